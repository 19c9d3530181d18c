"""The fused log-likelihood over sets packed into blocks: eqs. (3), (2), (16), (17) in one pass.

Each block of whole sets gives its codes, its sets' ``z`` and their log-likelihoods, and under
differentiation the gradient of eqs. (11)-(15), computing every code once
(:func:`packed_log_likelihood`; its custom VJPs for the mean and for the other poolings).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from dpp.encoding.codes import (
    LOG_BETA_MAX,
    beta_of,
    block_of,
    packed_blocks,
    soft_codes,
    soft_log_codes,
)
from dpp.pooling import MEAN, Pooling, pooled_cotangent, segment_pool
from dpp.sets import RaggedSets


def _block_likelihood(sets: RaggedSets, mu, log_beta, theta, block, with_grad: bool):
    """Weighted log-likelihood of a block's sets and, with ``with_grad``, its gradient terms."""
    x, ids, labels, weights, sizes = block_of(sets, *block)
    slots = sets.packing.slots.shape[0]
    f, d2, inside = soft_codes(x, mu, log_beta)
    z = jax.ops.segment_sum(f, ids, slots, indices_are_sorted=True) / sizes[:, None]
    logits = z @ theta
    log_p = jax.nn.log_softmax(logits, axis=1)
    value = jnp.sum(weights * jnp.sum(labels * log_p, axis=1))
    if not with_grad:
        return value
    # d(sum_n w_n L^n) / d logits = w_n (P~_n - sigma_n sum_j P~_nj)   (eq. 17 with eq. 16)
    dlogits = weights[:, None] * (labels - jnp.exp(log_p) * jnp.sum(labels, axis=1, keepdims=True))
    dtheta = z.T @ dlogits
    dz = (dlogits @ theta.T) / sizes[:, None]  # dL/dz_n / M_n
    g = jnp.concatenate([dz, jnp.zeros((1, dz.shape[1]), dz.dtype)])[ids]  # rows of other sets: 0
    s = f * (g - jnp.sum(f * g, axis=1, keepdims=True))
    s = jnp.where(inside, s, 0.0)  # the clip of d2 at 0 has no gradient
    # one [B, D + 2] x [B, K] contraction gives sum_x s (x - c), sum_x s and sum_x s ||x - c||^2
    xc = x - jnp.mean(mu, axis=0, keepdims=True)
    augmented = jnp.concatenate(
        [xc, jnp.ones((xc.shape[0], 1), xc.dtype), jnp.sum(xc * xc, axis=1, keepdims=True)], axis=1
    )
    moments = jnp.einsum("bd,bk->kd", augmented, s)  # [K, D + 2]
    return value, (moments, dtheta)


def _moments(x, mu, s):
    """``[K, D + 2]``: ``sum_x s (x - c)``, ``sum_x s`` and ``sum_x s ||x - c||^2`` in one pass."""
    xc = x - jnp.mean(mu, axis=0, keepdims=True)
    augmented = jnp.concatenate(
        [xc, jnp.ones((xc.shape[0], 1), xc.dtype), jnp.sum(xc * xc, axis=1, keepdims=True)], axis=1
    )
    return jnp.einsum("bd,bk->kd", augmented, s)


def _block_likelihood_pooled(sets, mu, log_beta, theta, pooling, block, with_grad: bool):
    """:func:`_block_likelihood` for max or generalised-mean pooling (:mod:`dpp.pooling`).

    The same one pass: the codes, each set's pooled ``z``, its log-likelihood and, with
    ``with_grad``, ``dL/dlog f`` of every vector from :func:`dpp.pooling.pooled_cotangent`;
    the gradient of the logits is then ``s = h - f sum_k h`` and eqs. (11)-(15) follow as for the
    mean, with ``dL/drho`` of the generalised mean beside them.
    """
    x, ids, labels, weights, _ = block_of(sets, *block)
    slots = sets.packing.slots.shape[0]
    f, log_f, _, inside = soft_log_codes(x, mu, log_beta)
    z = segment_pool(pooling, f, log_f, ids, slots)
    log_p = jax.nn.log_softmax(z @ theta, axis=1)
    value = jnp.sum(weights * jnp.sum(labels * log_p, axis=1))
    if not with_grad:
        return value
    dlogits = weights[:, None] * (labels - jnp.exp(log_p) * jnp.sum(labels, axis=1, keepdims=True))
    dtheta = z.T @ dlogits
    h, drho = pooled_cotangent(pooling, f, log_f, ids, z, dlogits @ theta.T)
    s = h - f * jnp.sum(h, axis=1, keepdims=True)
    s = jnp.where(inside, s, 0.0)  # the clip of d2 at 0 has no gradient
    return value, (_moments(x, mu, s), dtheta, drho)


def _scan_blocks(body, init, sets: RaggedSets):
    """Adds ``body(block)`` over the packed blocks of the weighted likelihood.

    Blocks whose sets all weigh 0 are skipped: padding blocks (no set), and the blocks of
    held-out sets when the validation part of a fit is weights on the same layout
    (:func:`dpp.solvers.coordinate_ascent.coordinate_ascent`). Their terms are exact zeros
    (every term carries its set's weight), so skipping them changes no bit of the sums.
    """
    zeros = jax.tree.map(jnp.zeros_like, init)
    slots = sets.packing.slots

    def add(acc, block):
        _, first, count = block
        index = jnp.minimum(first + slots, sets.num_sets - 1)
        weighed = jnp.any((slots < count) & (sets.weights[index] > 0))
        terms = jax.lax.cond(weighed, body, lambda _: zeros, block)
        return jax.tree.map(jnp.add, acc, terms), None

    return jax.lax.scan(add, init, packed_blocks(sets))[0]


@jax.custom_vjp
def _packed_likelihood(mu, log_beta, theta, sets):
    def body(block):
        return _block_likelihood(sets, mu, log_beta, theta, block, False)

    return _scan_blocks(body, jnp.zeros((), sets.vectors.dtype), sets)


def _packed_likelihood_fwd(mu, log_beta, theta, sets):
    """Value and gradient in one pass over the blocks: every code is computed once."""
    k, d = mu.shape
    dtype = sets.vectors.dtype

    def body(block):
        value, (moments, dtheta) = _block_likelihood(sets, mu, log_beta, theta, block, True)
        return value, moments, dtheta

    zeros = (jnp.zeros((), dtype), jnp.zeros((k, d + 2), dtype), jnp.zeros_like(theta))
    value, moments, dtheta = _scan_blocks(body, zeros, sets)
    grad_mu, grad_log_beta = _prototype_gradients(mu, log_beta, moments, dtype)
    zero_sets = jax.tree.map(_zero_cotangent, sets)
    return value, (grad_mu, grad_log_beta, dtheta, zero_sets)


def _zero_cotangent(x):
    if jnp.issubdtype(x.dtype, jnp.floating):
        return jnp.zeros_like(x)
    return np.zeros(x.shape, jax.dtypes.float0)


def _packed_likelihood_bwd(residuals, g):
    grad_mu, grad_log_beta, dtheta, zero_sets = residuals
    return g * grad_mu, g * grad_log_beta, g * dtheta, zero_sets


_packed_likelihood.defvjp(_packed_likelihood_fwd, _packed_likelihood_bwd)


@jax.custom_vjp
def _packed_likelihood_pooled(mu, log_beta, theta, pooling, sets):
    def body(block):
        return _block_likelihood_pooled(sets, mu, log_beta, theta, pooling, block, False)

    return _scan_blocks(body, jnp.zeros((), sets.vectors.dtype), sets)


def _packed_likelihood_pooled_fwd(mu, log_beta, theta, pooling, sets):
    """Value and gradient in one pass over the blocks (max or generalised mean)."""
    k, d = mu.shape
    dtype = sets.vectors.dtype

    def body(block):
        value, grads = _block_likelihood_pooled(sets, mu, log_beta, theta, pooling, block, True)
        return (value, *grads)

    zeros = (
        jnp.zeros((), dtype), jnp.zeros((k, d + 2), dtype), jnp.zeros_like(theta),
        jnp.zeros((), dtype),
    )  # fmt: skip
    value, moments, dtheta, drho = _scan_blocks(body, zeros, sets)
    grad_mu, grad_log_beta = _prototype_gradients(mu, log_beta, moments, dtype)
    grad_pooling = jax.tree.map(lambda leaf: drho.astype(jnp.result_type(leaf)), pooling)
    zero_sets = jax.tree.map(_zero_cotangent, sets)
    return value, (grad_mu, grad_log_beta, dtheta, grad_pooling, zero_sets)


def _packed_likelihood_pooled_bwd(residuals, g):
    grad_mu, grad_log_beta, dtheta, grad_pooling, zero_sets = residuals
    scaled = jax.tree.map(lambda leaf: g * leaf, grad_pooling)
    return g * grad_mu, g * grad_log_beta, g * dtheta, scaled, zero_sets


_packed_likelihood_pooled.defvjp(_packed_likelihood_pooled_fwd, _packed_likelihood_pooled_bwd)


def _prototype_gradients(mu, log_beta, moments, dtype):
    """``(dL/dmu, dL/dlog beta)`` of eqs. (11)-(15) from the moments of ``s`` (:func:`_moments`)."""
    k, d = mu.shape
    sx, colsum, sx2 = moments[:, :d], moments[:, d], moments[:, d + 1]
    mc = mu - jnp.mean(mu, axis=0, keepdims=True)  # centred as in squared_distances
    # sum_x s_k ||x - mu_k||^2 = sum_x s_k ||x - c||^2 - 2 (mu_k - c).sx_k + ||mu_k - c||^2 colsum_k
    sd = sx2 - 2.0 * jnp.sum(mc * sx, axis=1) + jnp.sum(mc * mc, axis=1) * colsum
    beta = jnp.broadcast_to(beta_of(log_beta, dtype), (k,))
    grad_mu = 2.0 * beta[:, None] * (sx - colsum[:, None] * mc)
    grad_log_beta = jnp.where(log_beta < LOG_BETA_MAX, -beta * sd, 0.0)
    if jnp.ndim(log_beta) == 0:
        grad_log_beta = jnp.sum(grad_log_beta)
    return grad_mu, grad_log_beta


def packed_log_likelihood(
    sets: RaggedSets,
    mu: Float[Array, "K D"],
    log_beta: Float[Array, "*B"],
    theta: Float[Array, "K C"],
    pooling: Pooling = MEAN,
) -> Float[Array, ""]:
    r"""``sum_n w_n L^n`` (eqs. 3, 2, 16, 17) over sets packed into blocks of whole sets.

    Each block's codes give its sets' ``z`` and log-likelihoods directly, and, under
    differentiation, the gradient of eqs. (11)-(15) in the same pass: with
    ``g_n = dL^n/dz_n / M_n`` and ``s = f * (g - <f, g>)``,
    ``dL/dmu_k = 2 beta_k sum_x s_k (x - mu_k)``, ``dL/dbeta_k = -sum_x s_k ||x - mu_k||^2`` and
    ``dL/dTheta = sum_n z_n (w_n (P~_n - sigma_n))^T``. Every code is computed once per value and
    gradient (the two-pass :func:`encode_soft` computes them twice); memory stays ``B x K`` per
    block. No gradient flows to the sets.

    Args:
        sets: sets with a :class:`~dpp.sets.Packing` (from :meth:`~dpp.sets.RaggedSets.bucketed`).
        mu: ``[K, D]`` prototypes.
        log_beta: ``[]`` or ``[K]`` log inverse temperature.
        theta: ``[K, C]`` classifier weights.
        pooling: how a set's codes become ``z`` (:mod:`dpp.pooling`; default eq. 2's mean).
            Max and the generalised mean get their gradient in the same one pass; the
            generalised mean's ``rho`` gets one too.

    Returns:
        Scalar weighted log-likelihood (nats), without the ridge or the prior.

    Raises:
        ValueError: for sets without a packing (use :meth:`~dpp.sets.RaggedSets.bucketed`).
    """
    if sets.packing is None:
        raise ValueError("packed_log_likelihood needs packed sets: call sets.bucketed() first")
    if pooling.linear:  # the mean: the paper's path, as it always was
        return _packed_likelihood(mu, log_beta, theta, sets)
    return _packed_likelihood_pooled(mu, log_beta, theta, pooling, sets)
