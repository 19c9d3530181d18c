"""Prototype functions and set pooling: eqs. (1), (2) and (3) of Bonilla & Robles-Kelly (2012).

Every set representation in dpp goes through :func:`pool`, so a faster or leaner encoder replaces
one function. Units: ``beta`` is an inverse squared distance in the units of the feature vectors;
it is parameterised as ``beta = exp(log_beta)``, either shared (``log_beta`` of shape ``[]``) or
one per prototype (shape ``[K]``).

The module's second part is the fused log-likelihood over sets packed into blocks
(:func:`packed_log_likelihood`): eqs. (3), (2), (16) and (17) in one pass, each block of whole
sets giving its codes, its sets' ``z``, their log-likelihoods and, under differentiation, the
gradient of eqs. (11)-(15) with every code computed once (custom VJPs for the mean and for the
other poolings).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from dpp.pooling import MEAN, Pooling, pooled_cotangent, segment_pool, segment_shares
from dpp.sets import BLOCK_SIZE, RaggedSets

__all__ = [
    "LOG_BETA_MAX",
    "encode_hard",
    "encode_soft",
    "hard_assignment",
    "max_codes",
    "membership_codes",
    "membership_shares",
    "packed_log_likelihood",
    "pool",
    "set_counts",
    "soft_assignment",
    "squared_distances",
]

#: Cap on ``log beta`` inside the encoder (``beta <= e^60 ~ 1e26``): codes are one-hot to working
#: precision long before, and ``exp`` stays finite in float32 (whose limit is ``e^88``).
LOG_BETA_MAX = 60.0


def squared_distances(x: Float[Array, "U D"], mu: Float[Array, "K D"]) -> Float[Array, "U K"]:
    """Squared Euclidean distances ``||mu_k - x||^2`` as a matmul, clipped at 0.

    Computed as ``||x - c||^2 - 2 (x - c).(mu - c) + ||mu - c||^2`` with ``c`` the mean of the
    prototypes (a constant for differentiation): the identity holds for any ``c``, and centring
    keeps the digits of the differences when the data sit far from the origin (features offset by
    1e6 lose every digit in float32 without it). The clip removes the small negative values that
    rounding leaves for near-coincident points.

    Args:
        x: ``[U, D]`` float vectors.
        mu: ``[K, D]`` prototypes (centres), same dtype.

    Returns:
        ``[U, K]`` non-negative squared distances, finite for finite inputs whose distances do
        not overflow the dtype.
    """
    c = jax.lax.stop_gradient(jnp.mean(mu, axis=0, keepdims=True))  # [1, D]
    xc, mc = x - c, mu - c
    x2 = jnp.sum(xc * xc, axis=1, keepdims=True)
    mu2 = jnp.sum(mc * mc, axis=1)[None, :]
    return jnp.maximum(x2 - 2.0 * (xc @ mc.T) + mu2, 0.0)


def soft_assignment(
    x: Float[Array, "U D"], mu: Float[Array, "K D"], log_beta: Float[Array, "*B"]
) -> Float[Array, "U K"]:
    r"""Probabilistic prototype functions, eq. (3).

    .. math:: f_k(x) = \frac{\exp(-\beta_k \|\mu_k - x\|^2)}{\sum_j \exp(-\beta_j \|\mu_j - x\|^2)}

    Finite for every finite input and every ``log_beta``: ``beta`` is capped at
    :data:`LOG_BETA_MAX` (beyond it the codes are one-hot to working precision anyway); with a
    shared ``beta`` the logits are ``-beta (d^2 - min_k d^2)``, so the nearest centre's logit is
    exactly 0 and a vector far from every prototype gets the one-hot code of eq. (1) instead of
    ``inf - inf``; per-prototype logits are floored at ``-finfo.max / 4``. A large ``beta`` thus
    gives the one-hot nearest centre of eq. (1) without overflow or NaN gradients.

    Args:
        x: ``[U, D]`` float vectors.
        mu: ``[K, D]`` prototypes.
        log_beta: ``[]`` (shared) or ``[K]`` (one per prototype) log inverse temperature.

    Returns:
        ``[U, K]`` rows on the simplex.
    """
    return soft_codes(x, mu, log_beta)[0]


def hard_assignment(x: Float[Array, "U D"], mu: Float[Array, "K D"]) -> Float[Array, "U K"]:
    """Winner-takes-all prototype functions, eq. (1): one-hot of the nearest centre.

    Ties go to the lowest index. This is the ``beta -> infinity`` limit of eq. (3).

    Args:
        x: ``[U, D]`` float vectors.
        mu: ``[K, D]`` centres.

    Returns:
        ``[U, K]`` one-hot rows in the dtype of ``x``.
    """
    nearest = jnp.argmin(squared_distances(x, mu), axis=1)
    return jax.nn.one_hot(nearest, mu.shape[0], dtype=x.dtype)


def set_counts(sets: RaggedSets) -> Float[Array, " N"]:
    """``[N]`` number of vectors ``M_n`` of each set, at least 1, as floats (a ``segment_sum``).

    Every set is non-empty (checked at construction); the floor keeps padding segments finite.
    """
    return _counts(sets.set_ids, sets.num_sets, sets.vectors.dtype)


def _counts(set_ids, num_sets, dtype):
    ones = jnp.ones(set_ids.shape, dtype=dtype)
    return jnp.maximum(jax.ops.segment_sum(ones, set_ids, num_sets, indices_are_sorted=True), 1.0)


def _row_blocks(arrays, fill_values, block: int):
    """Pads the leading axis of each array to a multiple of ``block`` and reshapes to blocks."""
    rows = arrays[0].shape[0]
    pad = -rows % block
    out = []
    for a, fill in zip(arrays, fill_values, strict=True):
        widths = [(0, pad)] + [(0, 0)] * (a.ndim - 1)
        a = jnp.pad(a, widths, constant_values=fill)
        out.append(a.reshape((-1, block) + a.shape[1:]))
    return out


def pool(f: Float[Array, "U K"], sets: RaggedSets) -> Float[Array, "N K"]:
    r"""Set representation, eq. (2) with :math:`\pi_k = 1/M_n`: the mean of a set's codes.

    .. math:: z^{(n)} = \frac{1}{M_n} \sum_{x \in S^{(n)}} f(x)

    Uses ``jax.ops.segment_sum`` with the static ``num_segments = N`` over sorted ids. In the
    shared-pool layout the codes of the ``U`` distinct vectors are gathered through
    ``sets.members`` block by block (:data:`BLOCK_SIZE` memberships at a time), so memory grows
    with ``U * K``, never ``T * K``.

    Args:
        f: ``[U, K]`` codes of the vectors (``U = T`` in the disjoint layout).
        sets: the batch; its ``set_ids`` say which set each membership belongs to.

    Returns:
        ``[N, K]`` set representations; each row is on the K-simplex when ``f``'s rows are.
    """
    n = sets.num_sets
    if sets.members is None:
        totals = jax.ops.segment_sum(f, sets.set_ids, n, indices_are_sorted=True)
    else:
        members, ids = _row_blocks([sets.members, sets.set_ids], [0, n], BLOCK_SIZE)

        def add_block(totals, block):
            m, i = block
            return totals + jax.ops.segment_sum(f[m], i, n, indices_are_sorted=True), None

        totals, _ = jax.lax.scan(add_block, jnp.zeros((n, f.shape[1]), f.dtype), (members, ids))
    return totals / set_counts(sets)[:, None]


@functools.partial(jax.custom_vjp, nondiff_argnums=(4,))
def _soft_pool(x, set_ids, mu, log_beta, num_sets):
    return _soft_pool_fwd(x, set_ids, mu, log_beta, num_sets)[0]


def _soft_pool_fwd(x, set_ids, mu, log_beta, num_sets):
    xb, ib = _row_blocks([x, set_ids], [0, num_sets], BLOCK_SIZE)

    def add_block(totals, block):
        f = soft_codes(block[0], mu, log_beta)[0]
        return totals + jax.ops.segment_sum(f, block[1], num_sets, indices_are_sorted=True), None

    totals, _ = jax.lax.scan(add_block, jnp.zeros((num_sets, mu.shape[0]), x.dtype), (xb, ib))
    counts = _counts(set_ids, num_sets, x.dtype)
    return totals / counts[:, None], (x, set_ids, mu, log_beta, counts)


def _soft_pool_bwd(num_sets, residuals, gz):
    """Eqs. (11)-(15) block by block, recomputing the codes instead of storing ``T x K`` of them.

    With ``s = f * (g - <f, g>)`` the gradient of ``L`` with respect to the logits
    ``-beta_k ||x - mu_k||^2`` (``g`` the set's ``dL/dz / M_n``):
    ``dL/dmu_k = 2 beta_k sum_x s_k (x - mu_k)`` and ``dL/dbeta_k = -sum_x s_k ||x - mu_k||^2``.
    """
    x, set_ids, mu, log_beta, counts = residuals
    c = jnp.mean(mu, axis=0, keepdims=True)  # [1, D]: centring keeps the digits of x - mu
    xb, ib = _row_blocks([x, set_ids], [0, num_sets], BLOCK_SIZE)
    g = jnp.concatenate([gz / counts[:, None], jnp.zeros((1, gz.shape[1]), gz.dtype)])

    def add_block(acc, block):
        xblk, iblk = block
        f, d2, inside = soft_codes(xblk, mu, log_beta)
        gt = g[iblk]
        s = f * (gt - jnp.sum(f * gt, axis=1, keepdims=True))
        s_mu = jnp.where(inside, s, 0.0)  # the clip at 0 has no gradient
        sx, colsum, sd = acc
        return (
            sx + s_mu.T @ (xblk - c),
            colsum + jnp.sum(s_mu, axis=0),
            sd + jnp.sum(s * d2, axis=0),
        ), None

    k, d = mu.shape
    zeros = (jnp.zeros((k, d), x.dtype), jnp.zeros((k,), x.dtype), jnp.zeros((k,), x.dtype))
    (sx, colsum, sd), _ = jax.lax.scan(add_block, zeros, (xb, ib))
    beta = jnp.broadcast_to(beta_of(log_beta, x.dtype), (k,))
    grad_mu = 2.0 * beta[:, None] * (sx - colsum[:, None] * (mu - c))
    grad_log_beta = jnp.where(log_beta < LOG_BETA_MAX, -beta * sd, 0.0)
    if jnp.ndim(log_beta) == 0:
        grad_log_beta = jnp.sum(grad_log_beta)
    return None, None, grad_mu, grad_log_beta


_soft_pool.defvjp(_soft_pool_fwd, _soft_pool_bwd)


def beta_of(log_beta, dtype):
    """``exp(log_beta)`` capped at ``exp(LOG_BETA_MAX)`` so that it stays finite."""
    return jnp.exp(jnp.minimum(log_beta, LOG_BETA_MAX)).astype(dtype)


def soft_codes(x, mu, log_beta):
    """Eq. (3) codes of a block, its clipped squared distances and where they are > 0.

    ``x`` ``[B, D]``, ``mu`` ``[K, D]``, ``log_beta`` ``[]`` or ``[K]``; returns ``(f [B, K],
    d2 [B, K], d2 > 0)``, ``f`` in the dtype of ``x``.
    """
    d2 = squared_distances(x, mu)
    beta = jnp.reshape(beta_of(log_beta, d2.dtype), (1, -1))  # [1, 1] or [1, K]
    if jnp.ndim(log_beta) == 0:
        # the largest logit is exactly 0, so exp cannot overflow: no max-subtraction pass
        e = jnp.exp(-beta * (d2 - jnp.min(d2, axis=1, keepdims=True)))
        return e / jnp.sum(e, axis=1, keepdims=True), d2, d2 > 0
    logits = jnp.maximum(-beta * d2, -jnp.finfo(d2.dtype).max / 4)
    return jax.nn.softmax(logits, axis=1), d2, d2 > 0


def soft_log_codes(x, mu, log_beta):
    """Eq. (3) codes of a block with their logarithms, the squared distances and where > 0.

    ``log f`` comes from the logits (``logits - logsumexp``), so it is finite wherever the
    logits are, also where ``f`` underflows to 0 (what the generalised mean needs).
    """
    d2 = squared_distances(x, mu)
    beta = jnp.reshape(beta_of(log_beta, d2.dtype), (1, -1))
    if jnp.ndim(log_beta) == 0:
        logits = -beta * (d2 - jnp.min(d2, axis=1, keepdims=True))
    else:
        logits = jnp.maximum(-beta * d2, -jnp.finfo(d2.dtype).max / 4)
    log_f = jax.nn.log_softmax(logits, axis=1)
    return jnp.exp(log_f), log_f, d2, d2 > 0


def block_of(sets: RaggedSets, start, first_set, set_count, with_labels: bool = True):
    """Rows, local set ids (``S`` for rows of other sets), labels, weights and sizes of a block.

    A real block's slice starts at its first set's first row and is never clamped (block ``b``
    starts at or before row ``b * B`` and ``T = blocks * B``), so its local ids run
    ``0 .. set_count - 1`` and then ``S``: sorted, as ``indices_are_sorted`` requires. Padding
    blocks (``set_count = 0``) may be clamped; they are skipped.
    """
    packing = sets.packing
    block, slots = packing.rows.shape[0], packing.slots.shape[0]
    x = jax.lax.dynamic_slice_in_dim(sets.vectors, start, block)
    ids = jax.lax.dynamic_slice_in_dim(sets.set_ids, start, block) - first_set
    ids = jnp.where((ids >= 0) & (ids < set_count), ids, slots)
    ones = jnp.ones((block,), x.dtype)
    sizes = jnp.maximum(jax.ops.segment_sum(ones, ids, slots, indices_are_sorted=True), 1.0)
    if not with_labels:
        return x, ids, None, None, sizes
    real = packing.slots < set_count
    index = jnp.minimum(first_set + packing.slots, sets.num_sets - 1)
    labels = jnp.where(real[:, None], sets.labels[index], 0.0)
    weights = jnp.where(real, sets.weights[index], 0.0)
    return x, ids, labels, weights, sizes


def packed_blocks(sets: RaggedSets):
    """``(start, first_set, set_count)``, each ``[blocks]`` int32: what a scan over blocks reads.

    Of sets with a :class:`~dpp.sets.Packing` (:meth:`~dpp.sets.RaggedSets.bucketed`): each
    block's first row, first set and number of sets (0 for a padding block).
    """
    p = sets.packing
    return p.start, p.first_set, p.set_count


def _packed_codes(sets: RaggedSets, mu, log_beta):
    """Eq. (2) over eq. (3) from the packed blocks: ``[N, K]`` means of each set's codes."""
    slots = sets.packing.slots

    def add(totals, block):
        def encode(totals):
            x, ids, _, _, sizes = block_of(sets, *block, with_labels=False)
            f = soft_codes(x, mu, log_beta)[0]
            z = jax.ops.segment_sum(f, ids, slots.shape[0], indices_are_sorted=True)
            rows = jnp.where(slots < block[2], block[1] + slots, sets.num_sets)
            return totals.at[rows].add(z / sizes[:, None], mode="drop")

        return jax.lax.cond(block[2] > 0, encode, lambda t: t, totals), None

    init = jnp.zeros((sets.num_sets, mu.shape[0]), sets.vectors.dtype)
    return jax.lax.scan(add, init, packed_blocks(sets))[0]


def _packed_codes_pooled(sets: RaggedSets, mu, log_beta, pooling):
    """:func:`_packed_codes` for max or generalised-mean pooling (values only)."""
    slots = sets.packing.slots

    def add(totals, block):
        def encode(totals):
            x, ids, _, _, _ = block_of(sets, *block, with_labels=False)
            f, log_f, _, _ = soft_log_codes(x, mu, log_beta)
            z = segment_pool(pooling, f, log_f, ids, slots.shape[0])
            rows = jnp.where(slots < block[2], block[1] + slots, sets.num_sets)
            return totals.at[rows].add(z, mode="drop")

        return jax.lax.cond(block[2] > 0, encode, lambda t: t, totals), None

    init = jnp.zeros((sets.num_sets, mu.shape[0]), sets.vectors.dtype)
    return jax.lax.scan(add, init, packed_blocks(sets))[0]


def encode_soft(
    sets: RaggedSets,
    mu: Float[Array, "K D"],
    log_beta: Float[Array, "*B"],
    pooling: Pooling = MEAN,
) -> Float[Array, "N K"]:
    """DPP set representation: eq. (3) codes pooled by eq. (2) (or ``pooling``).

    Sets packed into blocks of whole sets (:meth:`~dpp.sets.RaggedSets.bucketed`) are encoded
    block by block (padding blocks skipped); this path is for values, not gradients (the
    likelihood's gradient over packed sets is :func:`packed_log_likelihood`'s). Otherwise, in
    the disjoint layout the codes are computed and pooled :data:`BLOCK_SIZE` vectors at a
    time, and the gradient (a custom VJP implementing eqs. 11-15) recomputes them block by block,
    so neither pass holds a ``T x K`` array. The vectors are treated as data: no gradient flows
    to them. In the shared-pool layout the codes of the ``U`` distinct vectors are computed once
    and pooled by :func:`pool`.

    Max and generalised-mean pooling (:mod:`dpp.pooling`) take the same packed path block by
    block; on unpacked sets they pool the ``[T, K]`` codes with autodiff-ready segment ops
    (memory ``T x K``: mini-batches, sets too large to pack), and in the shared-pool layout the
    ``U`` distinct vectors' codes are gathered membership block by membership block.

    Args:
        sets: ``N`` sets of ``D``-dimensional vectors.
        mu: ``[K, D]`` prototypes.
        log_beta: ``[]`` or ``[K]`` log inverse temperature.
        pooling: how a set's codes become ``z`` (default: eq. 2's mean).

    Returns:
        ``[N, K]`` representations (on the simplex for the mean; in ``[0, 1]`` otherwise).
    """
    if not pooling.linear:
        return _encode_pooled(sets, mu, log_beta, pooling)
    if sets.packing is not None:
        return _packed_codes(sets, mu, log_beta)
    if sets.members is None:
        return _soft_pool(sets.vectors, sets.set_ids, mu, log_beta, sets.num_sets)
    return pool(soft_assignment(sets.vectors, mu, log_beta), sets)


def _encode_pooled(sets: RaggedSets, mu, log_beta, pooling: Pooling):
    """:func:`encode_soft` for max or generalised-mean pooling."""
    if sets.packing is not None:
        return _packed_codes_pooled(sets, mu, log_beta, pooling)
    f, log_f, _, _ = soft_log_codes(sets.vectors, mu, log_beta)
    if sets.members is None:
        return segment_pool(pooling, f, log_f, sets.set_ids, sets.num_sets)
    return _pool_shared(pooling, f, log_f, sets)


def _pool_shared(pooling: Pooling, f, log_f, sets: RaggedSets):
    """Max or generalised-mean pooling of the pool's codes over memberships, block by block.

    Two passes over blocks of :data:`BLOCK_SIZE` memberships: the largest code (or ``p log f``)
    per set, then the sums :func:`dpp.pooling.segment_pool` needs, so memory stays ``U x K``
    plus a block.
    """
    n, k = sets.num_sets, f.shape[1]
    members, ids = _row_blocks([sets.members, sets.set_ids], [0, n], BLOCK_SIZE)
    values = pooling.shared_scores(f, log_f)

    def largest(top, block):
        m, i = block
        return jnp.maximum(top, jax.ops.segment_max(values[m], i, n, True)), None

    top, _ = jax.lax.scan(largest, jnp.full((n, k), -jnp.inf, f.dtype), (members, ids))
    top = jax.lax.stop_gradient(jnp.where(jnp.isfinite(top), top, 0.0))
    shifted = jnp.concatenate([top, jnp.zeros((1, k), f.dtype)])

    def add(acc, block):
        m, i = block
        terms = pooling.shared_terms(f[m], values[m], shifted[i], (i < n)[:, None])
        sums = (jax.ops.segment_sum(t, i, n, indices_are_sorted=True) for t in terms)
        return tuple(a + b for a, b in zip(acc, sums, strict=True)), None

    zeros = (jnp.zeros((n, k), f.dtype), jnp.zeros((n, k), f.dtype))
    (total, count), _ = jax.lax.scan(add, zeros, (members, ids))
    return pooling.shared_combine(top, total, count)


def encode_hard(sets: RaggedSets, mu: Float[Array, "K D"]) -> Float[Array, "N K"]:
    """Standard prototype (bag-of-words) representation: eq. (1) codes pooled by eq. (2).

    The nearest centre of each vector is found :data:`BLOCK_SIZE` vectors at a time and the
    histograms are built by a scatter-add of counts, without ``T x K`` one-hot codes.

    Args:
        sets: ``N`` sets of ``D``-dimensional vectors.
        mu: ``[K, D]`` centres (k-means in the standard baseline).

    Returns:
        ``[N, K]`` normalised histograms of nearest centres.
    """
    nearest = jax.lax.map(
        lambda x: jnp.argmin(squared_distances(x[None, :], mu)[0]),
        sets.vectors,
        batch_size=BLOCK_SIZE,
    )
    if sets.members is not None:
        nearest = nearest[sets.members]
    counts = jnp.zeros((sets.num_sets, mu.shape[0]), sets.vectors.dtype)
    counts = counts.at[sets.set_ids, nearest].add(1.0, mode="drop")  # padding ids N: dropped
    return counts / set_counts(sets)[:, None]


def max_codes(
    x: Float[Array, "U D"], mu: Float[Array, "K D"], log_beta: Float[Array, "*B"]
) -> Float[Array, " U"]:
    """``[U]`` largest eq. (3) code of each vector, :data:`BLOCK_SIZE` vectors at a time.

    A value of 1 to working precision means the code is one-hot (saturated): the gradients of
    eqs. (11)-(15) vanish for that vector. Used to tell a fit that stalled in saturated codes.
    """
    (xb,) = _row_blocks([x], [0], BLOCK_SIZE)
    blocks = jax.lax.map(lambda blk: jnp.max(soft_codes(blk, mu, log_beta)[0], axis=1), xb)
    return blocks.reshape(-1)[: x.shape[0]]


def membership_codes(
    sets: RaggedSets, mu: Float[Array, "K D"], log_beta: Float[Array, "*B"] | None
) -> Float[Array, "T K"]:
    """``[T, K]`` codes of every membership: eq. (3), or eq. (1) for ``log_beta=None``.

    The soft assignments themselves (what a set pools), one row per membership in the order of
    ``sets.set_ids``; the pool's codes are computed once per distinct vector and gathered.
    Holds a ``T x K`` array (for reports and instance evidence, not for training).

    Args:
        sets: ``N`` sets (either layout, unpacked; padding memberships allowed).
        mu: ``[K, D]`` prototypes.
        log_beta: ``[]`` or ``[K]`` log inverse temperature, or ``None`` (hard codes).

    Returns:
        ``[T, K]`` rows on the simplex.
    """
    if log_beta is None:
        f = hard_assignment(sets.vectors, mu)
    else:
        f = soft_log_codes(sets.vectors, mu, log_beta)[0]
    return f if sets.members is None else f[sets.members]


def membership_shares(
    sets: RaggedSets,
    mu: Float[Array, "K D"],
    log_beta: Float[Array, "*B"] | None,
    pooling: Pooling = MEAN,
) -> Float[Array, "T K"]:
    """``[T, K]`` each membership's share of its set's representation ``z``.

    The rows of a set sum to its ``z`` of :func:`encode_soft` (or :func:`encode_hard` for
    ``log_beta=None``, whose histogram is a mean), by :func:`dpp.pooling.segment_shares`: a
    linear classifier's scores of a set are then the sum of its vectors' ``shares @ Theta``
    (eqs. 2, 3, 16).

    Args:
        sets: ``N`` sets (either layout, unpacked; padding memberships, id ``N``, get 0).
        mu: ``[K, D]`` prototypes.
        log_beta: ``[]`` or ``[K]`` log inverse temperature, or ``None`` (eq. 1, mean pooled).
        pooling: the soft encoder's pooling (ignored with ``log_beta=None``).

    Returns:
        ``[T, K]`` non-negative shares in the dtype of the vectors.
    """
    if log_beta is None:
        f = hard_assignment(sets.vectors, mu)
        log_f, pooling = f, MEAN
    else:
        f, log_f = soft_log_codes(sets.vectors, mu, log_beta)[:2]
    if sets.members is not None:
        f, log_f = f[sets.members], log_f[sets.members]
    return segment_shares(pooling, f, log_f, sets.set_ids, sets.num_sets)


# ---- The fused log-likelihood over packed blocks of sets ----------------------------------------


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
