"""What a trained network says of sets: class probabilities, codes, evidence, per bucket.

Every readout runs in inference mode (no dropout) over the size buckets of
:func:`~dpp.networks.training.bucketize`; :class:`EmbeddedFit` is a trained
:class:`~dpp.networks.layers.EmbeddedDPP` as the prototype estimators' fitted model.
"""

from __future__ import annotations

import dataclasses

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from dpp.model.report import FitReport
from dpp.networks.layers import AttentionMIL, EmbeddedDPP, Embedding
from dpp.networks.training import Bucket, bucketize
from dpp.pooling import MEAN, Pooling
from dpp.sets import RaggedSets, to_device


@eqx.filter_jit
def log_proba(model: eqx.Module, bucket: Bucket) -> jax.Array:
    """``[N, C]`` log class probabilities of a bucket's sets (inference mode)."""
    logits = jax.vmap(lambda x, m: model(x, m, inference=True))(bucket.x, bucket.mask)
    return jax.nn.log_softmax(logits, axis=1)


@eqx.filter_jit
def pooled(model: eqx.Module, bucket: Bucket) -> jax.Array:
    """``[N, H]`` the pooled representations of a bucket's sets (inference mode)."""
    return jax.vmap(lambda x, m: model.pooled(x, m, inference=True))(bucket.x, bucket.mask)


def embedded_codes(model: EmbeddedDPP, bucket: Bucket) -> jax.Array:
    """``[N, K]`` pooled codes ``z`` of a bucket's sets (inference mode)."""
    return _codes(model, bucket)


@eqx.filter_jit
def _codes(model, bucket):
    return jax.vmap(lambda x, m: model.codes(x, m, inference=True))(bucket.x, bucket.mask)


@eqx.filter_jit
def instance_scores(model: eqx.Module, bucket: Bucket) -> jax.Array:
    """``[N, M, C]`` each row's part of its set's logits (the model's ``instance_scores``)."""
    return jax.vmap(model.instance_scores)(bucket.x, bucket.mask)


@eqx.filter_jit
def attention(model: AttentionMIL, bucket: Bucket) -> jax.Array:
    """``[N, M, 1]`` attention weights of a bucket's rows (0 on padding rows)."""
    return jax.vmap(model.attention)(bucket.x, bucket.mask)[..., None]


@eqx.filter_jit
def vector_codes(model: EmbeddedDPP, bucket: Bucket) -> jax.Array:
    """``[N, M, K]`` eq. (3) codes of a bucket's embedded rows."""
    return jnp.exp(jax.vmap(lambda x: model.log_codes(x))(bucket.x))


def per_vector(model: eqx.Module, sets: RaggedSets, fn, width: int) -> np.ndarray:
    """``[T, width]`` float64 rows of ``fn(model, bucket)`` back in the sets' membership order.

    Args:
        model: a network.
        sets: preprocessed sets.
        fn: ``(model, Bucket) -> [N_b, M, width]`` (:func:`instance_scores`, :func:`attention`,
            :func:`vector_codes`).
        width: the last axis of ``fn``'s output.
    """
    sizes = sets.set_sizes()
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    buckets, index = bucketize(sets, 1, 1 if sets.labels is None else sets.labels.shape[1])
    out = np.zeros((int(sizes.sum()), width))
    for bucket, members in zip(buckets, index, strict=True):  # a handful of buckets
        values = np.asarray(fn(model, bucket), np.float64)
        counts = sizes[members]
        row = np.repeat(np.arange(members.size), counts)
        col = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
        out[np.repeat(starts[members], counts) + col] = values[row, col]
    return out


def embed(embedding: Embedding, vectors: np.ndarray, chunk: int = 4096) -> np.ndarray:
    """``[T, H]`` embedded vectors (inference mode), a chunk at a time, on the host.

    Each chunk is padded with zero rows to a power of two (at least 256, at most ``chunk``) and
    placed on the device as it is (:func:`~dpp.sets.to_device`), so that the training parts
    of a selection's folds, of similar sizes, share one program (every row is embedded alone).
    """
    out = []
    for i in range(0, len(vectors), chunk):
        part = np.asarray(vectors[i : i + chunk], np.float32)
        rows = min(chunk, max(256, 1 << (len(part) - 1).bit_length()))
        padded = np.zeros((rows, part.shape[1]), np.float32)
        padded[: len(part)] = part
        out.append(np.asarray(_embed(embedding, to_device(padded)))[: len(part)])
    return np.concatenate(out) if out else np.zeros((0, embedding.layers[-1].out_features))


@eqx.filter_jit
def _embed(embedding, x):
    return embedding(x, inference=True)


def initial_embedded_dpp(
    embedding: Embedding,
    centres: np.ndarray,
    log_beta: float,
    num_classes: int,
    pooling=MEAN,
    ridge: float = 0.0,
    normalize: bool = False,
) -> EmbeddedDPP:
    """An :class:`EmbeddedDPP` at its start: ``Theta = 0``.

    Args:
        embedding: the (untrained) embedding.
        centres: ``[K, H]`` k-means centres of the embedded training vectors.
        log_beta: the beta heuristic on the embedded vectors (:func:`dpp.init.init_log_beta`).
        num_classes: ``C``.
        pooling: :mod:`dpp.pooling` pytree.
        ridge: ``lambda / sum(w)`` (see :class:`EmbeddedDPP`).
        normalize: L2-normalise before eq. (3) (see :class:`EmbeddedDPP`; ``centres`` and
            ``log_beta`` are then those of the normalised embedded vectors).
    """
    dtype = np.float32  # placed as they are: eager jnp conversions compile a program each
    return EmbeddedDPP(
        embedding,
        to_device(np.asarray(centres), dtype),
        to_device(np.asarray(log_beta), dtype),
        to_device(np.zeros((centres.shape[0], num_classes)), dtype),
        jax.tree.map(lambda leaf: to_device(np.asarray(leaf), dtype), pooling),
        to_device(np.asarray(ridge), dtype),
        bool(normalize),
    )


@dataclasses.dataclass(frozen=True)
class EmbeddedFit:
    """A fitted :class:`EmbeddedDPP` with the interface of :class:`dpp.model.FittedModel`.

    What ``EmbeddedDPPClassifier`` keeps as ``model_``: ``encode`` gives the pooled codes
    ``z``, ``log_predictive`` eq. (16), and ``mu``, ``beta``, ``theta`` are the parameters (the
    prototypes live in the embedding space, so :meth:`input_prototypes` returns them there).

    Attributes:
        network: the trained :class:`EmbeddedDPP`.
        history: the objective per round: empty (epochs record the held-out log-likelihood,
            in ``report.early_stopping``).
        report: the fit's :class:`~dpp.model.report.FitReport`.
    """

    network: EmbeddedDPP
    history: np.ndarray
    report: FitReport
    method: str = "dpp"

    @property
    def info(self) -> dict:
        """The report's JSON form."""
        return self.report.to_dict()

    @property
    def mu(self) -> jax.Array:
        """``[K, H]`` prototypes in the embedding space (as eq. 3 sees them)."""
        return self.network.centres()

    @property
    def log_beta(self) -> jax.Array:
        """``[]`` log inverse temperature (1 / squared embedding units)."""
        return self.network.log_beta

    @property
    def theta(self) -> jax.Array:
        """``[K, C]`` softmax weights."""
        return self.network.theta

    @property
    def pooling(self) -> Pooling:
        """The pooling (:mod:`dpp.pooling`)."""
        return self.network.pooling

    @property
    def prototypes(self) -> np.ndarray:
        """``[K, H]`` float64 prototypes in the embedding space (as eq. 3 sees them)."""
        return np.asarray(self.network.centres(), np.float64)

    @property
    def beta(self) -> np.ndarray:
        """Inverse temperature (1 / squared embedding units)."""
        return np.exp(np.asarray(self.network.log_beta, np.float64))

    def input_prototypes(self, preprocess) -> np.ndarray:
        """The prototypes: in the embedding space, which no map takes back to the inputs."""
        del preprocess
        return self.prototypes

    def _per_bucket(self, sets: RaggedSets, fn, width: int) -> np.ndarray:
        buckets, index = bucketize(sets, 1, self.network.theta.shape[1])
        out = np.zeros((sets.num_sets, width))
        for bucket, rows in zip(buckets, index, strict=True):
            out[rows] = np.asarray(fn(self.network, bucket))[: rows.size]
        return out

    def encode(self, sets: RaggedSets) -> np.ndarray:
        """``[N, K]`` pooled codes ``z`` of preprocessed sets."""
        return self._per_bucket(sets, embedded_codes, self.network.mu.shape[0])

    def log_predictive(self, sets: RaggedSets) -> np.ndarray:
        """``[N, C]`` log class probabilities of preprocessed sets (eq. 16)."""
        return self._per_bucket(sets, log_proba, self.network.theta.shape[1])

    def membership_codes(self, sets: RaggedSets) -> np.ndarray:
        """``[T, K]`` eq. (3) codes of every embedded vector of preprocessed sets."""
        return per_vector(self.network, sets, vector_codes, self.network.mu.shape[0])

    def instance_scores(self, sets: RaggedSets) -> np.ndarray:
        """``[T, C]`` each vector's share of ``z`` times Theta; a set's rows sum to ``z Theta``."""
        return per_vector(self.network, sets, instance_scores, self.network.theta.shape[1])
