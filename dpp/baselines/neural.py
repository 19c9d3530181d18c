r"""Neural set classifiers on Equinox layers, and the trainer they share.

What a practitioner tries besides pooled features (issue 33), and DPP as the pooling layer of a
learned embedding:

* :class:`AttentionMIL`: attention-based multiple-instance pooling (Ilse, Tomczak & Welling,
  *Attention-based deep multiple instance learning*, ICML 2018). An embedding network
  :math:`h_k = \phi(x_k)`, attention
  :math:`a_k = \mathrm{softmax}_k(w^T \tanh(V h_k))` (gated:
  :math:`w^T (\tanh(V h_k) \odot \mathrm{sigm}(U h_k))`), :math:`z = \sum_k a_k h_k`, and a
  linear softmax classifier.
* :class:`DeepSets`: the embedding pooled by max (mi-Net/MI-Net: Wang, Yan, Tang, Bai & Liu,
  *Revisiting multiple instance neural networks*, Pattern Recognition 2018) or by mean (Deep
  Sets: Zaheer et al., NeurIPS 2017), then a linear softmax classifier.
* :class:`EmbeddedDPP`: DPP on a learned embedding: eq. (3)'s soft assignment of the embedded
  vectors to ``K`` prototypes ``mu`` with inverse temperature ``beta``, pooled (mean, max or a
  generalised mean, :mod:`dpp.pooling`) and classified by eq. (16)'s softmax ``Theta``.

The embedding (:class:`Embedding`) is an MLP of ReLU layers with dropout after the last, as in
both papers. Layers are ``equinox.nn.Linear``; a model is an Equinox module, so a pytree:
``jit`` and ``vmap`` see its arrays, and a model file stores its leaves.

Sets are laid out in padded size buckets (:func:`bucketize`): every set of a bucket is padded to
the bucket's size with masked rows (real rows first), so a mini-batch is a dense
``[B, M, D]`` array and an epoch is one compiled program: a ``lax.scan`` over each bucket's
mini-batches (buckets in a fixed order, sets shuffled within each; never a Python loop over
sets). Training (:func:`train`) runs Adam with PyTorch's coupled weight decay (the papers'
``Adam(weight_decay=...)``) on the weighted soft-label log-likelihood of eq. (17), epochs in a
``lax.while_loop`` whose carry keeps the best epoch on the validation sets (early stopping with
``patience``). :func:`train_batch` runs many such fits (a selection's folds x candidates x
seeds) as one program, each member ending where it would alone.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jaxtyping import Array, Bool, Float

from dpp.encoding import LOG_BETA_MAX, squared_distances
from dpp.model.report import FitReport
from dpp.pooling import MEAN, Pooling, make_pooling, padded_pool, segment_shares
from dpp.sets import RaggedSets, bucket_size


# ---------------------------------------------------------------------- layers and models
class Embedding(eqx.Module):
    """An MLP applied to every vector of a set: ReLU layers, dropout after the last.

    Attributes:
        layers: the ``equinox.nn.Linear`` layers, ``D -> widths[0] -> ... -> widths[-1]``.
        dropout: dropout after the last layer (both papers' place for it).
    """

    layers: tuple[eqx.nn.Linear, ...]
    dropout: eqx.nn.Dropout

    def __init__(self, in_size: int, widths: tuple[int, ...], dropout: float, *, key):
        keys = jax.random.split(key, len(widths))
        sizes = (in_size, *widths)
        self.layers = tuple(
            eqx.nn.Linear(a, b, key=k) for a, b, k in zip(sizes[:-1], sizes[1:], keys, strict=True)
        )
        self.dropout = eqx.nn.Dropout(dropout)

    def __call__(self, x: Float[Array, "M D"], *, key=None, inference: bool = True):
        """``[M, H]`` embedded vectors (``H = widths[-1]``)."""
        for layer in self.layers:
            x = jax.nn.relu(jax.vmap(layer)(x))
        return self.dropout(x, key=key, inference=inference)


class AttentionMIL(eqx.Module):
    """Attention-based MIL pooling (Ilse et al. 2018), plain or gated, into a softmax.

    Attributes:
        embedding: :class:`Embedding`.
        attention_V: ``H -> A`` (``tanh`` branch).
        attention_U: ``H -> A`` (``sigm`` gate) or ``None``.
        attention_w: ``A -> 1``.
        classifier: ``H -> C``.
    """

    embedding: Embedding
    attention_V: eqx.nn.Linear
    attention_U: eqx.nn.Linear | None
    attention_w: eqx.nn.Linear
    classifier: eqx.nn.Linear

    def __init__(self, in_size, num_classes, widths, dropout, attention_size, gated, *, key):
        keys = jax.random.split(key, 5)
        width = widths[-1]
        self.embedding = Embedding(in_size, widths, dropout, key=keys[0])
        self.attention_V = eqx.nn.Linear(width, attention_size, key=keys[1])
        self.attention_U = eqx.nn.Linear(width, attention_size, key=keys[2]) if gated else None
        self.attention_w = eqx.nn.Linear(attention_size, 1, key=keys[3])
        self.classifier = eqx.nn.Linear(width, num_classes, key=keys[4])

    def penalty(self):
        """Added to the loss (none: weight decay is the optimizer's)."""
        return 0.0

    def decay_mask(self):
        """Which leaves weight decay applies to: all."""
        return jax.tree.map(lambda _: True, self)

    def _attention(self, h, mask):
        gate = jnp.tanh(jax.vmap(self.attention_V)(h))
        if self.attention_U is not None:
            gate = gate * jax.nn.sigmoid(jax.vmap(self.attention_U)(h))
        scores = jax.vmap(self.attention_w)(gate)[:, 0]
        return jax.nn.softmax(jnp.where(mask, scores, -jnp.inf))

    def pooled(self, x, mask, *, key=None, inference=True):
        """``[H]`` the set's representation ``z = sum_k a_k h_k`` (Ilse et al. 2018, eq. 6)."""
        h = self.embedding(x, key=key, inference=inference)
        return self._attention(h, mask) @ h

    def __call__(self, x, mask, *, key=None, inference=True):
        """``[C]`` class logits of one padded set (``x [M, D]``, ``mask [M]``)."""
        return self.classifier(self.pooled(x, mask, key=key, inference=inference))

    def attention(self, x, mask):
        """``[M]`` attention weights ``a_k`` of one padded set (inference; 0 on padding rows)."""
        return self._attention(self.embedding(x, inference=True), mask)

    def instance_scores(self, x, mask):
        """``[M, C]`` each vector's part of the logits: ``a_k W h_k`` (the head's bias apart).

        The logits are ``W (sum_k a_k h_k) + b = sum_k a_k W h_k + b`` exactly: the head is
        linear (Ilse et al. 2018, eq. 6 into a linear layer).
        """
        h = self.embedding(x, inference=True)
        return self._attention(h, mask)[:, None] * (h @ self.classifier.weight.T)

    def intercept(self):
        """``[C]`` the head's bias ``b``."""
        return self.classifier.bias


def unit_rows(h: jax.Array) -> jax.Array:
    """``[..., H]`` rows scaled to unit Euclidean length (a zero row stays 0, its gradient finite).

    Args:
        h: ``[..., H]`` float rows.

    Returns:
        ``h / max(||h||, eps)`` row by row, ``eps`` the dtype's smallest normal's square root.
    """
    norm2 = jnp.sum(h * h, axis=-1, keepdims=True)
    return h * jax.lax.rsqrt(jnp.maximum(norm2, jnp.finfo(h.dtype).tiny))


def _log(h: jax.Array) -> jax.Array:
    """``log h`` of non-negative activations, finite with a finite gradient (0 maps to tiny)."""
    return jnp.log(jnp.maximum(h, jnp.finfo(h.dtype).tiny))


class DeepSets(eqx.Module):
    """The embedding pooled by max (MI-Net) or mean (Deep Sets), into a softmax.

    The pooling is one of :data:`dpp.pooling.REGISTRY`'s, the same code as DPP's (its value,
    gradient and per-vector shares).

    Attributes:
        embedding: :class:`Embedding`.
        classifier: ``H -> C``.
        pooling: the name of a pooling with a dense form, ``max`` or ``mean`` (static).
    """

    embedding: Embedding
    classifier: eqx.nn.Linear
    pooling: str = eqx.field(static=True)

    def __init__(self, in_size, num_classes, widths, dropout, pooling, *, key):
        keys = jax.random.split(key, 2)
        self.embedding = Embedding(in_size, widths, dropout, key=keys[0])
        self.classifier = eqx.nn.Linear(widths[-1], num_classes, key=keys[1])
        self.pooling = pooling

    def penalty(self):
        """Added to the loss (none: weight decay is the optimizer's)."""
        return 0.0

    def decay_mask(self):
        """Which leaves weight decay applies to: all."""
        return jax.tree.map(lambda _: True, self)

    def pooled(self, x, mask, *, key=None, inference=True):
        """``[H]`` the set's representation: the embedding pooled by its pooling's ``dense``."""
        h = self.embedding(x, key=key, inference=inference)
        return make_pooling(self.pooling).dense(h, mask)

    def __call__(self, x, mask, *, key=None, inference=True):
        """``[C]`` class logits of one padded set."""
        return self.classifier(self.pooled(x, mask, key=key, inference=inference))

    def instance_scores(self, x, mask):
        """``[M, C]`` each vector's part of the logits, the head's bias apart.

        Each vector's share of every pooled unit (max: the unit's value split equally among
        the vectors that hold it, as :func:`dpp.pooling.segment_shares`; mean: ``h / M``)
        through the linear head: they sum to ``W z``, the logits less ``b``.
        """
        h = self.embedding(x, inference=True)
        ids = jnp.where(mask, 0, 1).astype(jnp.int32)  # h >= 0 (a ReLU): codes to share
        shares = segment_shares(make_pooling(self.pooling), h, _log(h), ids, 1)
        return shares @ self.classifier.weight.T

    def intercept(self):
        """``[C]`` the head's bias ``b``."""
        return self.classifier.bias


class EmbeddedDPP(eqx.Module):
    """DPP on a learned embedding: eq. (3) codes of the embedded vectors, pooled, eq. (16).

    Attributes:
        embedding: :class:`Embedding`.
        mu: ``[K, H]`` prototypes in the embedding space.
        log_beta: ``[]`` log inverse temperature (1 / squared embedding units).
        theta: ``[K, C]`` softmax weights (no intercept, as in eq. 16).
        pooling: :mod:`dpp.pooling` pytree (the generalised mean's ``rho`` is learned).
        ridge: ``[]`` ``lambda / sum(w)``: DPP's ridge ``lambda tr(Theta^T Theta)`` on the
            summed log-likelihood, as a share of the per-set loss (a leaf that no step
            changes, so that a new ``lambda`` reuses the compiled program).
        normalize: L2-normalise the embedded vectors and the prototypes before eq. (3)
            (static; NetVLAD's normalisation, Arandjelovic et al., CVPR 2016): squared
            distances lie in ``[0, 4]``, so the embedding's scale cannot harden the codes and
            ``beta`` alone sets their temperature.
    """

    embedding: Embedding
    mu: Float[Array, "K H"]
    log_beta: Float[Array, ""]
    theta: Float[Array, "K C"]
    pooling: Pooling
    ridge: Float[Array, ""]
    normalize: bool = eqx.field(static=True, default=False)

    def penalty(self):
        """``ridge * tr(Theta^T Theta)``: DPP's ridge (no gradient reaches ``ridge``)."""
        return jax.lax.stop_gradient(self.ridge) * jnp.sum(self.theta * self.theta)

    def decay_mask(self):
        """Weight decay on the embedding only.

        ``Theta`` has DPP's ridge instead; ``mu``, ``beta`` and the pooling have none.
        """
        mask = jax.tree.map(lambda _: False, self)
        return eqx.tree_at(
            lambda m: m.embedding, mask, jax.tree.map(lambda _: True, self.embedding)
        )

    def features(self, x, *, key=None, inference=True):
        """``[M, H]`` the embedded vectors as eq. (3) sees them (unit length with ``normalize``)."""
        h = self.embedding(x, key=key, inference=inference)
        return unit_rows(h) if self.normalize else h

    def centres(self):
        """``[K, H]`` the prototypes as eq. (3) sees them (unit length with ``normalize``)."""
        return unit_rows(self.mu) if self.normalize else self.mu

    def log_codes(self, x, *, key=None, inference=True):
        """``[M, K]`` log eq. (3) codes of the embedded vectors of one padded set."""
        h = self.features(x, key=key, inference=inference)
        d2 = squared_distances(h, self.centres())
        beta = jnp.exp(jnp.minimum(self.log_beta, LOG_BETA_MAX))
        return jax.nn.log_softmax(-beta * (d2 - jnp.min(d2, axis=1, keepdims=True)), axis=1)

    def codes(self, x, mask, *, key=None, inference=True):
        """``[K]`` pooled codes ``z`` of one padded set."""
        log_f = self.log_codes(x, key=key, inference=inference)
        return padded_pool(self.pooling, jnp.exp(log_f), log_f, mask)

    def instance_scores(self, x, mask):
        """``[M, C]`` each vector's share of ``z`` (:func:`~dpp.pooling.segment_shares`) @ Theta."""
        log_f = self.log_codes(x)
        ids = jnp.where(mask, 0, 1).astype(jnp.int32)
        return segment_shares(self.pooling, jnp.exp(log_f), log_f, ids, 1) @ self.theta

    def intercept(self):
        """``[C]`` zeros: eq. (16) has no intercept."""
        return jnp.zeros(self.theta.shape[1], self.theta.dtype)

    def __call__(self, x, mask, *, key=None, inference=True):
        """``[C]`` class logits of one padded set."""
        return self.codes(x, mask, key=key, inference=inference) @ self.theta


# ---------------------------------------------------------------------- data layout
class Bucket(NamedTuple):
    """Sets of one size bucket, padded (real rows first) to ``M`` vectors.

    Attributes:
        x: ``[N, M, D]`` float32 vectors (0 in padding rows).
        mask: ``[N, M]`` bool, the real rows (a padding set has one, a zero vector, so that
            every set's pooling is finite).
        labels: ``[N, C]`` soft labels (0 for padding sets).
        weights: ``[N]`` set weights (0 for padding sets, which every step skips).
    """

    x: Float[Array, "N M D"]
    mask: Bool[Array, "N M"]
    labels: Float[Array, "N C"]
    weights: Float[Array, " N"]


#: Size buckets of a layout at most (each adds a traced copy of the training step: about
#: 1.5 s of compilation on 2 CPU cores).
MAX_BUCKETS = 3
#: Several buckets are used only where they pad less than this share of one bucket's rows
#: (sizes that are heavy-tailed); otherwise one bucket compiles faster than it costs.
SPLIT_GAIN = 0.6


def _pow2_rows(count: int, batch_size: int) -> int:
    """The power of two at or above ``count`` sets, in whole batches (at least one)."""
    return batch_size * (1 << max(int(-(-count // batch_size)) - 1, 0).bit_length())


def layout(
    sizes: np.ndarray, batch_size: int, held_out: int | None = None
) -> tuple[tuple[int, int], ...]:
    """``((M, rows), ...)``: padded set sizes and sets per bucket for sets of these sizes.

    One bucket, or, where that saves at least ``1 - SPLIT_GAIN`` of the padded rows (sizes
    that are heavy-tailed), at most :data:`MAX_BUCKETS`, their sizes the thirds of the sizes
    (quantiles 1/3, 2/3 and the largest); sizes are rounded up to
    :func:`dpp.sets.bucket_size` (steps of at most 1.25x, at least 8). A bucket's rows are the
    power of two at or above its sets (a multiple of ``batch_size``), so a held-out part and
    all the training sets, or the folds of a selection, usually share one layout, and so one
    compiled program.

    Args:
        sizes: ``[N]`` set sizes (>= 1).
        batch_size: sets per mini-batch.
        held_out: the layout of any ``held_out`` of these sets instead (rows for at most that
            many per bucket): the early-stopping part of every seed gets the same shapes.

    Returns:
        The layout, by increasing ``M``.
    """
    sizes = np.asarray(sizes)
    largest = bucket_size(int(sizes.max()))
    edges = np.quantile(sizes, [1 / 3, 2 / 3, 1.0], method="higher")[-MAX_BUCKETS:]
    ms = sorted({bucket_size(int(e)) for e in edges} | {largest})
    counts = np.bincount(np.searchsorted(ms, sizes), minlength=len(ms))
    if np.dot(counts, ms) > SPLIT_GAIN * largest * sizes.size:
        ms, counts = [largest], np.array([sizes.size])  # one bucket: one traced step
    if held_out is not None:
        counts = np.minimum(counts, held_out)
    rows = [_pow2_rows(c, batch_size) for c in counts]
    return tuple((m, r) for m, r in zip(ms, rows, strict=True))


def bucketize(
    sets: RaggedSets, batch_size: int, num_classes: int, shape=None
) -> tuple[tuple[Bucket, ...], list[np.ndarray]]:
    """The sets in padded size buckets, and each bucket's set indices (for predictions).

    Args:
        sets: the sets (either layout; labels and weights used when present).
        batch_size: sets per mini-batch.
        num_classes: ``C`` (for unlabelled sets, zero label rows).
        shape: a :func:`layout` that fits these sets (a held-out part takes the layout of all
            the training sets, so both fits share one program); default: the sets' own.

    Returns:
        ``(buckets, index)``: the buckets by increasing size, and the ``[N_b]`` indices of the
        real sets of each (its first ``N_b`` rows); padding sets have weight 0.

    Raises:
        ValueError: sets that do not fit ``shape``.
    """
    sizes = sets.set_sizes()
    shape = layout(sizes, batch_size) if shape is None else shape
    ms = [m for m, _ in shape]
    where = np.searchsorted(ms, sizes)
    if sizes.max() > ms[-1]:
        raise ValueError(f"a set of {sizes.max()} vectors does not fit the layout {shape}")
    vectors = np.asarray(sets.member_vectors(), np.float32)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    labels = (
        np.zeros((sets.num_sets, num_classes), np.float32)
        if sets.labels is None
        else np.asarray(sets.labels, np.float32)
    )
    weights = np.asarray(sets.weights, np.float32)
    buckets, index = [], []
    for b, (m, rows) in enumerate(shape):  # a loop over buckets (a handful), not over sets
        members = np.flatnonzero(where == b)
        if members.size > rows:
            raise ValueError(f"{members.size} sets do not fit the {rows} rows of bucket {m}")
        counts = sizes[members]
        row = np.repeat(np.arange(members.size), counts)
        col = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
        source = np.repeat(starts[members], counts) + col
        x = np.zeros((rows, m, vectors.shape[1]), np.float32)
        x[row, col] = vectors[source]
        mask = np.zeros((rows, m), bool)
        mask[row, col] = True
        mask[members.size :, 0] = True  # a padding set holds one zero vector: finite, weight 0
        lab = np.zeros((rows, num_classes), np.float32)
        lab[: members.size] = labels[members]
        w = np.zeros(rows, np.float32)
        w[: members.size] = weights[members]
        buckets.append(Bucket(*(jnp.asarray(a) for a in (x, mask, lab, w))))
        index.append(members)
    return tuple(buckets), index


# ---------------------------------------------------------------------- training
@dataclasses.dataclass(frozen=True)
class TrainSettings:
    """Adam and early stopping of the neural models (hashable: static under ``jit``).

    Attributes:
        learning_rate: Adam's step size.
        weight_decay: coupled L2 weight decay (added to the gradient, as PyTorch's
            ``Adam(weight_decay=...)`` that the papers used).
        batch_size: sets per mini-batch.
        max_epochs: epochs at most.
        patience: stop after this many epochs without a better validation log-likelihood.
    """

    learning_rate: float = 5e-4
    weight_decay: float = 5e-3
    batch_size: int = 1
    max_epochs: int = 100
    patience: int = 20

    def optimizer(self, mask=None) -> optax.GradientTransformation:
        """``add_decayed_weights`` then ``adam``: PyTorch's Adam with ``weight_decay``.

        Args:
            mask: pytree of bools (or a function of the parameters giving one): the leaves
                weight decay applies to (default: all).
        """
        return optax.chain(
            optax.add_decayed_weights(self.weight_decay, mask=mask),
            optax.adam(self.learning_rate),
        )


class TrainResult(NamedTuple):
    """What :func:`train` returns.

    Attributes:
        model: the model after ``epochs`` epochs, or the best epoch's with validation sets.
        epochs: int, epochs run.
        best_epoch: int, the epoch of the returned model (``epochs`` without validation).
        history: ``[max_epochs + 1]`` validation log-likelihood per set after each epoch (row 0:
            before training; NaN after the last, or everywhere without validation).
    """

    model: eqx.Module
    epochs: jax.Array
    best_epoch: jax.Array
    history: jax.Array


def _set_log_likelihoods(model, bucket: Bucket, key, inference: bool):
    """``[N]`` ``sum_j P~_nj log p_nj`` of every set of a bucket (eq. 17), dropout keyed."""
    keys = jax.random.split(key, bucket.x.shape[0])
    logits = jax.vmap(lambda x, m, k: model(x, m, key=k, inference=inference))(
        bucket.x, bucket.mask, keys
    )
    return jnp.sum(bucket.labels * jax.nn.log_softmax(logits, axis=1), axis=1)


def mean_log_likelihood(model, buckets: tuple[Bucket, ...]) -> jax.Array:
    """Weighted mean log-likelihood per set (nats) over buckets, inference mode (no dropout)."""
    key = jax.random.key(0)  # unused in inference
    total = sum(jnp.sum(b.weights * _set_log_likelihoods(model, b, key, True)) for b in buckets)
    return total / sum(jnp.sum(b.weights) for b in buckets)


def batch_order(key, weights: jax.Array, batch_size: int) -> jax.Array:
    """``[B, batch_size]`` the rows of a bucket's mini-batches in one epoch, shuffled.

    One set a step (``batch_size=1``): a random permutation of the rows (a padding row's step
    is skipped). Larger batches: the real sets (weight > 0) shuffled, then the padding rows, so
    a batch holds real sets only, but for the last partial one. A step's loss is its batch's
    weighted mean, so a real set shuffled in among padding rows would weigh more than one in a
    full batch, and the layout's padding would change the fit.

    Args:
        key: PRNG key.
        weights: ``[N]`` the bucket's set weights (0: padding).
        batch_size: sets per mini-batch (``N`` is a multiple of it).
    """
    if batch_size == 1:
        return jax.random.permutation(key, weights.shape[0]).reshape(-1, 1)
    u = jax.random.uniform(key, weights.shape)
    return jnp.argsort(jnp.where(weights > 0, u, 2.0)).reshape(-1, batch_size)


def run_epoch(params, static, opt_state, key, buckets, settings: TrainSettings, optimizer):
    """One epoch: every bucket's mini-batches in a ``lax.scan``, sets shuffled within buckets.

    Args:
        params: the model's trained arrays (``eqx.partition(model, eqx.is_inexact_array)``).
        static: the rest of the model.
        opt_state: ``optimizer``'s state.
        key: PRNG key (the order of the sets and dropout).
        buckets: the training sets (:func:`bucketize`).
        settings: Adam and early stopping (its ``batch_size``).
        optimizer: ``settings.optimizer(...)`` with the model's weight-decay mask.

    Returns:
        ``(params, opt_state, key)`` after the epoch (what :func:`train` loops over, and what
        :mod:`dpp.baselines.diagnostics` steps one epoch at a time).
    """

    def loss(params, batch: Bucket, key):
        model = eqx.combine(params, static)
        ll = _set_log_likelihoods(model, batch, key, inference=False)
        return -jnp.sum(batch.weights * ll) / jnp.sum(batch.weights) + model.penalty()

    def step(carry, rows, bucket: Bucket):
        params, opt_state, key = carry
        key, step_key = jax.random.split(key)
        batch = jax.tree.map(lambda a: a[rows], bucket)

        def update(args):
            params, opt_state = args
            grads = jax.grad(loss)(params, batch, step_key)
            updates, opt_state = optimizer.update(grads, opt_state, params)
            return optax.apply_updates(params, updates), opt_state

        # a batch of padding sets only (weight 0) leaves everything as it is
        params, opt_state = jax.lax.cond(
            jnp.sum(batch.weights) > 0, update, lambda args: args, (params, opt_state)
        )
        return (params, opt_state, key), None

    for bucket in buckets:  # a handful of shapes, traced once each
        key, order_key = jax.random.split(key)
        batches = batch_order(order_key, bucket.weights, settings.batch_size)
        (params, opt_state, key), _ = jax.lax.scan(
            lambda c, r, b=bucket: step(c, r, b), (params, opt_state, key), batches
        )
    return params, opt_state, key


def _train(
    model: eqx.Module,
    buckets: tuple[Bucket, ...],
    validation: tuple[Bucket, ...],
    key: jax.Array,
    settings: TrainSettings,
    epoch_cap: jax.Array,
    monitor: jax.Array,
) -> TrainResult:
    """Trains ``model`` by Adam, with early stopping on the ``validation`` sets if ``monitor``.

    The weighted mean log-likelihood per set of the validation sets is recorded before training
    and after every epoch. With ``monitor``, training stops once ``settings.patience`` epochs
    in a row have not raised it (or at ``epoch_cap``), and the best epoch's model is returned;
    without, exactly ``epoch_cap`` epochs run (a refit for the number of epochs early stopping
    chose) and the last model is returned. ``monitor`` and ``epoch_cap`` are traced, so the
    monitored fit and the refit on buckets of the same layout are one compiled program.

    Args:
        model: the initial model.
        buckets: the training sets (:func:`bucketize`).
        validation: held-out sets (in a refit, the monitored fit's, only recorded).
        key: PRNG key (shuffling and dropout).
        settings: Adam and early stopping (static).
        epoch_cap: traced int, epochs at most (``<= settings.max_epochs``).
        monitor: traced bool, stop early and keep the best epoch.

    Returns:
        :class:`TrainResult`.
    """
    params, static = eqx.partition(model, eqx.is_inexact_array)
    trained = jax.tree.map(eqx.is_inexact_array, model)  # the leaves params holds
    optimizer = settings.optimizer(eqx.filter(model.decay_mask(), trained))
    opt_state = optimizer.init(params)
    rows = settings.max_epochs + 1
    cap = jnp.minimum(jnp.asarray(epoch_cap, jnp.int32), settings.max_epochs)
    monitor = jnp.asarray(monitor, bool)

    def score(params):
        return mean_log_likelihood(eqx.combine(params, static), validation).astype(jnp.float32)

    first = score(params)
    history = jnp.full(rows, jnp.nan, jnp.float32).at[0].set(first)

    def keep_going(carry):
        _, _, _, epoch, _, _, best_epoch, _ = carry
        return (epoch < cap) & (~monitor | (epoch - best_epoch < settings.patience))

    def one_epoch(carry):
        params, opt_state, key, epoch, best, best_value, best_epoch, history = carry
        params, opt_state, key = run_epoch(
            params, static, opt_state, key, buckets, settings, optimizer
        )
        epoch = epoch + 1
        value = score(params)
        history = history.at[epoch].set(value)
        take = ~monitor | (value > best_value)  # a refit keeps its last epoch
        best = jax.tree.map(lambda new, old: jnp.where(take, new, old), params, best)
        best_value = jnp.where(take, value, best_value)
        best_epoch = jnp.where(take, epoch, best_epoch)
        return params, opt_state, key, epoch, best, best_value, best_epoch, history

    start = (params, opt_state, key, jnp.int32(0), params, first, jnp.int32(0), history)
    end = jax.lax.while_loop(keep_going, one_epoch, start)
    return TrainResult(eqx.combine(end[4], static), end[3], end[6], end[7])


train = eqx.filter_jit(_train)


def train_batch(
    model: eqx.Module,
    buckets: tuple[Bucket, ...],
    validation: tuple[Bucket, ...],
    key: jax.Array,
    settings: TrainSettings,
    epoch_cap: jax.Array,
    monitor: jax.Array,
    chunk: int = 1,
) -> TrainResult:
    """:func:`train` of a batch of members as one compiled program.

    Every array argument (the model's arrays, the buckets, the validation sets, the key,
    ``epoch_cap`` and ``monitor``) has a leading member axis; ``settings`` is shared. The
    members run ``chunk`` at a time (``jax.lax.map``), the chunks one after another.

    * ``chunk=1``: a ``lax.scan`` over the members whose body is :func:`train`'s program, so
      every member ends bit for bit where :func:`train` on it alone ends, and stops at its
      own epoch (``tests/test_neural.py``).
    * ``chunk > 1``: each chunk ``vmap``-ped, what pays on an accelerator. A chunk runs until
      its last member stops early (the others' carries are kept as they were when each
      stopped). Batched matrix products round in another order than a single member's: over
      8 epochs the members stay within 3e-7 of their fits alone, but Adam on mini-batches of
      one set amplifies the difference over tens of epochs (probabilities up to 0.83 apart
      after 21-100 epochs, 13 of 20 members at other epochs: ``python scripts/bench.py
      --together``).

    Args:
        model: the members' initial models, stacked (``[B, ...]`` arrays).
        buckets: their training buckets, stacked.
        validation: their validation buckets, stacked.
        key: ``[B]`` PRNG keys.
        settings: Adam and early stopping, shared (static).
        epoch_cap: ``[B]`` int32, each member's epochs at most.
        monitor: ``[B]`` bool, whether each member stops early.
        chunk: members vectorised at a time (static).

    Returns:
        :class:`TrainResult` with a leading member axis on every array.
    """
    return _train_batch(model, buckets, validation, key, settings, epoch_cap, monitor, chunk)


@eqx.filter_jit
def _train_batch(model, buckets, validation, key, settings, epoch_cap, monitor, chunk):
    params, static = eqx.partition(model, eqx.is_array)

    def one(args):
        p, b, v, k, cap, mon = args
        result = _train(eqx.combine(p, static), b, v, k, settings, cap, mon)
        return result._replace(model=eqx.filter(result.model, eqx.is_array))

    args = (params, buckets, validation, key, epoch_cap, monitor)
    # batch_size=1 would still vmap each member over an axis of one: a plain scan instead
    out = jax.lax.map(one, args, batch_size=None if chunk == 1 else chunk)
    return out._replace(model=eqx.combine(out.model, static))


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
    """``[T, H]`` embedded vectors (inference mode), a chunk at a time, on the host."""
    out = [
        np.asarray(_embed(embedding, jnp.asarray(vectors[i : i + chunk])))
        for i in range(0, len(vectors), chunk)
    ]
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
    dtype = jnp.float32
    return EmbeddedDPP(
        embedding,
        jnp.asarray(centres, dtype),
        jnp.asarray(log_beta, dtype),
        jnp.zeros((centres.shape[0], num_classes), dtype),
        jax.tree.map(lambda leaf: jnp.asarray(leaf, dtype), pooling),
        jnp.asarray(ridge, dtype),
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
