r"""The neural set classifiers' layers and models, on Equinox.

What a practitioner tries besides pooled features, and DPP as the pooling layer of a
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
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from dpp.encoding import LOG_BETA_MAX, squared_distances
from dpp.pooling import Pooling, make_pooling, padded_pool, segment_shares


def initialised(cls, *args, key):
    """``cls(*args, key=key)``: a network's random start built by one compiled program.

    Built eagerly, every layer's ``jax.random`` draws compiled a program per weight shape
    (eight for a three-layer embedding); compiled whole, one per class and arguments, with
    the same draws (the same bits). ``args`` are hashable (sizes, widths, rates, names).
    """
    return _initialised(cls, args, key)


@eqx.filter_jit
def _initialised(cls, args, key):
    return cls(*args, key=key)


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
