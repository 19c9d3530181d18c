"""Prototype functions and set pooling: eqs. (1), (2) and (3) of Bonilla & Robles-Kelly (2012).

Every set representation in dpp goes through :func:`pool`, so a faster or leaner encoder replaces
one function. Units: ``beta`` is an inverse squared distance in the units of the feature vectors;
it is parameterised as ``beta = exp(log_beta)``, either shared (``log_beta`` of shape ``[]``) or
one per prototype (shape ``[K]``).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from dpp.sets import RaggedSets


def squared_distances(x: Float[Array, "U D"], mu: Float[Array, "K D"]) -> Float[Array, "U K"]:
    """Squared Euclidean distances ``||mu_k - x||^2`` as a matmul, clipped at 0.

    Computed as ``||x||^2 - 2 x.mu + ||mu||^2``; the clip removes the small negative values that
    cancellation leaves for near-coincident points.

    Args:
        x: ``[U, D]`` float vectors.
        mu: ``[K, D]`` prototypes (centres), same dtype.

    Returns:
        ``[U, K]`` non-negative squared distances.
    """
    x2 = jnp.sum(x * x, axis=1, keepdims=True)
    mu2 = jnp.sum(mu * mu, axis=1)[None, :]
    return jnp.maximum(x2 - 2.0 * (x @ mu.T) + mu2, 0.0)


def soft_assignment(
    x: Float[Array, "U D"], mu: Float[Array, "K D"], log_beta: Float[Array, "*B"]
) -> Float[Array, "U K"]:
    r"""Probabilistic prototype functions, eq. (3).

    .. math:: f_k(x) = \frac{\exp(-\beta_k \|\mu_k - x\|^2)}{\sum_j \exp(-\beta_j \|\mu_j - x\|^2)}

    The softmax subtracts the row maximum (log-sum-exp), so a large ``beta`` gives the one-hot
    nearest centre of eq. (1) without overflow or NaN gradients.

    Args:
        x: ``[U, D]`` float vectors.
        mu: ``[K, D]`` prototypes.
        log_beta: ``[]`` (shared) or ``[K]`` (one per prototype) log inverse temperature.

    Returns:
        ``[U, K]`` rows on the simplex.
    """
    beta = jnp.reshape(jnp.exp(log_beta), (1, -1))  # [1, 1] or [1, K]
    return jax.nn.softmax(-beta * squared_distances(x, mu), axis=1)


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


def pool(f: Float[Array, "U K"], sets: RaggedSets) -> Float[Array, "N K"]:
    r"""Set representation, eq. (2) with :math:`\pi_k = 1/M_n`: the mean of a set's codes.

    .. math:: z^{(n)} = \frac{1}{M_n} \sum_{x \in S^{(n)}} f(x)

    Uses ``jax.ops.segment_sum`` with the static ``num_segments = N`` over sorted ids. In the
    shared-pool layout the codes of the ``U`` distinct vectors are gathered through
    ``sets.members``.

    Args:
        f: ``[U, K]`` codes of the vectors (``U = T`` in the disjoint layout).
        sets: the batch; its ``set_ids`` say which set each membership belongs to.

    Returns:
        ``[N, K]`` set representations; each row is on the K-simplex when ``f``'s rows are.
    """
    if sets.members is not None:
        f = f[sets.members]
    totals = jax.ops.segment_sum(
        f, sets.set_ids, num_segments=sets.num_sets, indices_are_sorted=True
    )
    counts = jax.ops.segment_sum(
        jnp.ones_like(sets.set_ids, dtype=f.dtype),
        sets.set_ids,
        num_segments=sets.num_sets,
        indices_are_sorted=True,
    )
    # Every set is non-empty (checked at construction); the guard keeps padding segments finite.
    return totals / jnp.maximum(counts, 1.0)[:, None]


def encode_soft(
    sets: RaggedSets, mu: Float[Array, "K D"], log_beta: Float[Array, "*B"]
) -> Float[Array, "N K"]:
    """DPP set representation: eq. (3) codes pooled by eq. (2).

    Args:
        sets: ``N`` sets of ``D``-dimensional vectors.
        mu: ``[K, D]`` prototypes.
        log_beta: ``[]`` or ``[K]`` log inverse temperature.

    Returns:
        ``[N, K]`` representations on the simplex.
    """
    return pool(soft_assignment(sets.vectors, mu, log_beta), sets)


def encode_hard(sets: RaggedSets, mu: Float[Array, "K D"]) -> Float[Array, "N K"]:
    """Standard prototype (bag-of-words) representation: eq. (1) codes pooled by eq. (2).

    Args:
        sets: ``N`` sets of ``D``-dimensional vectors.
        mu: ``[K, D]`` centres (k-means in the standard baseline).

    Returns:
        ``[N, K]`` normalised histograms of nearest centres.
    """
    return pool(hard_assignment(sets.vectors, mu), sets)
