r"""Initialisation of DPP: k-means centres (scikit-learn) and a stated beta heuristic.

Section 4 of the paper initialises the centres by k-means. The paper gives no rule for ``beta``;
dpp uses

.. math:: \beta_0 = s / \mathrm{median}_x \min_k \|x - \mu_k\|^2

(``s = beta_scale``, default 1): a vector at the typical distance from its nearest centre gets
logit gaps of order 1, so the initial codes are soft but informative. With one ``beta`` per
prototype every prototype starts from the same value.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from sklearn.cluster import KMeans
from sklearn.metrics import pairwise_distances_argmin_min
from threadpoolctl import ThreadpoolController

#: k-means restarts and Lloyd iterations per restart: the one home of the defaults that every
#: estimator's ``kmeans_n_init``/``kmeans_max_iter`` and the Hydra ``kmeans`` group take.
KMEANS_N_INIT = 1
KMEANS_MAX_ITER = 300


@functools.cache
def _thread_pools() -> ThreadpoolController:
    """The process's native thread pools, found once (a scan of the loaded libraries: 8 ms)."""
    return ThreadpoolController()


def kmeans_centres(
    vectors: np.ndarray,
    num_prototypes: int,
    seed: int,
    n_init: int = KMEANS_N_INIT,
    max_iter: int = KMEANS_MAX_ITER,
) -> np.ndarray:
    """K-means centres of the training vectors (scikit-learn ``KMeans``, k-means++ seeding).

    Args:
        vectors: ``[T, D]`` training vectors (host array).
        num_prototypes: ``K``.
        seed: random state of k-means.
        n_init: number of k-means restarts (best inertia kept).
        max_iter: Lloyd iterations per restart.

    Returns:
        ``[K, D]`` float64 centres.

    Raises:
        ValueError: if there are fewer distinct vectors than ``K``.
    """
    vectors = np.asarray(vectors, dtype=np.float64)
    if vectors.shape[0] < num_prototypes:
        raise ValueError(
            f"k-means needs at least K = {num_prototypes} training vectors, got {vectors.shape[0]}"
        )
    km = KMeans(n_clusters=num_prototypes, n_init=n_init, max_iter=max_iter, random_state=seed)
    km.fit(vectors)
    return km.cluster_centers_


def init_log_beta(
    vectors: np.ndarray,
    centres: np.ndarray,
    scale: float = 1.0,
    per_prototype: bool = False,
    dtype=jnp.float32,
) -> jnp.ndarray:
    """Initial ``log beta = log(scale / median squared distance to the nearest centre)``.

    Args:
        vectors: ``[T, D]`` training vectors.
        centres: ``[K, D]`` initial centres.
        scale: multiplier ``s`` of the heuristic (> 0).
        per_prototype: return ``[K]`` copies instead of a scalar.
        dtype: dtype of the result.

    Returns:
        ``[]`` or ``[K]`` log inverse temperature (units: log of 1 / squared distance).

    Raises:
        ValueError: if ``scale`` is not positive.
    """
    if scale <= 0:
        raise ValueError("beta_scale must be positive")
    # one OpenMP thread: the same distances, without its threads spinning against XLA's (30 ms
    # a call inside a fit instead of 2)
    with _thread_pools().limit(limits=1, user_api="openmp"):
        _, dist = pairwise_distances_argmin_min(np.asarray(vectors), np.asarray(centres))
    sq = np.square(dist)
    median = np.median(sq)
    if median <= 0:  # more than half the vectors sit on a centre: fall back to the mean
        median = sq.mean() if sq.mean() > 0 else 1.0
    log_beta = np.log(scale / median)
    shape = (centres.shape[0],) if per_prototype else ()
    return jax.device_put(np.full(shape, log_beta, dtype=dtype))  # no staging program
