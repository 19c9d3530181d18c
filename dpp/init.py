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

from dpp.sets import bucket_size, to_device

#: k-means restarts and Lloyd iterations per restart: the one home of the defaults that every
#: estimator's ``kmeans_n_init``/``kmeans_max_iter`` and the Hydra ``kmeans`` group take.
KMEANS_N_INIT = 1
KMEANS_MAX_ITER = 300
#: Which k-means computes the start (every estimator's ``kmeans_solver``, the Hydra
#: ``kmeans.solver``): ``scikit-learn`` (:func:`kmeans_centres`' ``KMeans`` on the host, in
#: float64), ``jax`` (:func:`device_kmeans`, on the device of the fit) or ``auto``: ``jax``
#: where the start's work ``T * D * K`` reaches :data:`DEVICE_KMEANS_WORK` in at least
#: :data:`DEVICE_KMEANS_DIM` dimensions, else scikit-learn.
KMEANS_SOLVERS = ("auto", "scikit-learn", "jax")
KMEANS_SOLVER = "auto"
#: ``T * D * K`` from which ``auto`` runs k-means on the device: 2^28, about 65,000 vectors in
#: 256-D with K = 16. Below it scikit-learn's k-means takes a couple of seconds at most on a
#: CPU, and above it it is most of the host work of a fit (``python benchmarks/device_fits.py
#: --host-share``: 7 of 10 s on 100 bags of 1,000-2,000 vectors in 256-D).
DEVICE_KMEANS_WORK = 2**28
#: The least ``D`` at which ``auto`` runs k-means on the device. In fewer dimensions its
#: distances are thin matmuls and each Lloyd iteration is bound by the ``[T, K]`` arrays' memory:
#: on 2 CPU cores (``python benchmarks/device_fits.py --kmeans``), 120,000 vectors in 10-D with
#: K = 200 (MPEG-7's shape) took 21.7 s on the device's k-means against 5.5 s on scikit-learn's;
#: 115,269 in 256-D with K = 16, 5.4 s against 6.6 s.
DEVICE_KMEANS_DIM = 32


@functools.cache
def _thread_pools() -> ThreadpoolController:
    """The process's native thread pools, found once (a scan of the loaded libraries: 8 ms)."""
    return ThreadpoolController()


def kmeans_solver_for(vectors: int, dim: int, num_prototypes: int, solver: str) -> str:
    """The k-means that ``solver`` names for ``T`` vectors in ``D`` dimensions and ``K`` centres.

    ``auto`` is ``jax`` where ``T * D * K >= DEVICE_KMEANS_WORK`` and ``D >= DEVICE_KMEANS_DIM``,
    else ``scikit-learn`` (a rule of the problem's shape alone: the same choice on every
    machine, so a seed gives the same start on a CPU and on a GPU up to float32 rounding).

    Raises:
        ValueError: a ``solver`` not in :data:`KMEANS_SOLVERS`.
    """
    if solver not in KMEANS_SOLVERS:
        raise ValueError(f"kmeans_solver must be one of {KMEANS_SOLVERS}, got {solver!r}")
    if solver != "auto":
        return solver
    large = vectors * dim * num_prototypes >= DEVICE_KMEANS_WORK and dim >= DEVICE_KMEANS_DIM
    return "jax" if large else "scikit-learn"


def kmeans_centres(
    vectors: np.ndarray,
    num_prototypes: int,
    seed: int,
    n_init: int = KMEANS_N_INIT,
    max_iter: int = KMEANS_MAX_ITER,
    solver: str = "scikit-learn",
) -> np.ndarray:
    """K-means centres of the training vectors (k-means++ seeding, then Lloyd's iterations).

    Section 4 of the paper. ``solver`` (:func:`kmeans_solver_for`) picks scikit-learn's
    ``KMeans`` on the host in float64 (the default here, and ``auto``'s choice on small
    problems) or :func:`device_kmeans` on the device, in float32 (another implementation of
    the same algorithm: its centres differ as another k-means run's do).

    Args:
        vectors: ``[T, D]`` training vectors (host array).
        num_prototypes: ``K``.
        seed: random state of k-means.
        n_init: number of k-means restarts (best inertia kept).
        max_iter: Lloyd iterations per restart.
        solver: ``scikit-learn``, ``jax`` or ``auto`` (:data:`KMEANS_SOLVERS`).

    Returns:
        ``[K, D]`` float64 centres.

    Raises:
        ValueError: fewer vectors than ``K``, an unknown ``solver`` (and
            :func:`device_kmeans`' errors where it runs).
    """
    shape = np.shape(vectors)
    if kmeans_solver_for(shape[0], shape[1], num_prototypes, solver) == "jax":
        return device_kmeans(vectors, num_prototypes, seed, n_init, max_iter)
    vectors = np.asarray(vectors, dtype=np.float64)
    if vectors.shape[0] < num_prototypes:
        raise ValueError(
            f"k-means needs at least K = {num_prototypes} training vectors, got {vectors.shape[0]}"
        )
    km = KMeans(n_clusters=num_prototypes, n_init=n_init, max_iter=max_iter, random_state=seed)
    km.fit(vectors)
    return km.cluster_centers_


def device_kmeans(
    vectors,
    num_prototypes: int,
    seed: int,
    n_init: int = KMEANS_N_INIT,
    max_iter: int = KMEANS_MAX_ITER,
    tol: float = 1e-4,
) -> np.ndarray:
    """K-means centres computed on the default JAX device (k-means++ seeding, then Lloyd).

    The same algorithm as :func:`kmeans_centres` (Arthur & Vassilvitskii 2007's seeding, one
    candidate a step; Lloyd's iterations until the centres move by at most ``tol`` times the
    data's mean variance, no vector changes cluster, or ``max_iter``: scikit-learn's rules),
    in float32 on the device that runs the fit, so the vectors and the restarts' distances
    stay off the host. Its random draws are JAX's: the centres differ from scikit-learn's for
    the same ``seed``, as another k-means run's do.
    The vectors are padded on the host to :func:`dpp.sets.bucket_size` rows (masked out), so
    sizes in one bucket share one compiled program; an empty cluster keeps its centre. Source:
    section 4 of the paper (k-means initialisation); Lloyd (1982); Arthur & Vassilvitskii (2007).

    Args:
        vectors: ``[T, D]`` training vectors (host array; float32 on the device).
        num_prototypes: ``K``.
        seed: the random state of the seeding.
        n_init: restarts (run together, ``vmap``); the lowest inertia is kept.
        max_iter: Lloyd iterations per restart.
        tol: the stopping rule's tolerance, relative to the data's mean variance.

    Returns:
        ``[K, D]`` float64 centres (host array).

    Raises:
        ValueError: fewer vectors than ``K``, ``n_init`` or ``max_iter`` below 1, or a NaN or
            infinite vector.
    """
    vectors = np.asarray(vectors, np.float32)
    t = vectors.shape[0]
    if t < num_prototypes:
        raise ValueError(f"k-means needs at least K = {num_prototypes} training vectors, got {t}")
    if n_init < 1 or max_iter < 1:
        raise ValueError(f"n_init and max_iter must be >= 1, got {n_init} and {max_iter}")
    if not np.all(np.isfinite(vectors)):
        raise ValueError("k-means needs finite training vectors: got NaN or infinite values")
    rows = bucket_size(t)  # padded on the host: a new size in the bucket compiles nothing
    padded = np.zeros((rows, vectors.shape[1]), np.float32)
    padded[:t] = vectors
    keys = jax.random.split(jax.random.key(seed), n_init)
    centres, inertia = _kmeans_restarts(
        to_device(padded, fresh=True), to_device(np.arange(rows) < t, fresh=True), keys,
        num_prototypes, max_iter, np.float32(tol),
    )  # fmt: skip
    return np.asarray(centres[jnp.argmin(inertia)], np.float64)


def _squared_distances(x, centres):
    """``[T, K]`` squared distances, ``||x||^2 - 2 x.c + ||c||^2`` clipped at 0."""
    cross = x @ centres.T
    return jnp.maximum(
        jnp.sum(x * x, axis=1)[:, None] - 2.0 * cross + jnp.sum(centres * centres, axis=1)[None],
        0.0,
    )


@functools.partial(jax.jit, static_argnames=("num_prototypes", "max_iter"))
def _kmeans_restarts(x, valid, keys, num_prototypes: int, max_iter: int, tol):
    """``([R, K, D] centres, [R] inertia)`` of one k-means run per key (see device_kmeans)."""
    weight = valid.astype(x.dtype)
    count = jnp.sum(weight)
    mean = jnp.sum(x * weight[:, None], axis=0) / count
    variance = jnp.sum(weight[:, None] * (x - mean[None]) ** 2, axis=0) / count
    threshold = tol * jnp.mean(variance)

    def seeding(key):
        def pick(key, d2):  # a row with probability d2 (uniform among valid rows if all 0)
            some = jnp.sum(d2) > 0
            logits = jnp.where(some, jnp.log(jnp.where(d2 > 0, d2, 1.0)), 0.0)
            logits = jnp.where(valid & (~some | (d2 > 0)), logits, -jnp.inf)
            return x[jax.random.categorical(key, logits)]

        first, rest = jax.random.split(key)
        c0 = pick(first, jnp.zeros(x.shape[0], x.dtype))
        centres = jnp.zeros((num_prototypes, x.shape[1]), x.dtype).at[0].set(c0)
        d2 = _squared_distances(x, c0[None])[:, 0] * weight

        def step(k, carry):
            centres, d2 = carry
            c = pick(jax.random.fold_in(rest, k), d2)
            return centres.at[k].set(c), jnp.minimum(d2, _squared_distances(x, c[None])[:, 0])

        return jax.lax.fori_loop(1, num_prototypes, step, (centres, d2))[0]

    def lloyd(centres):
        def update(carry):
            centres, _, it, before, _ = carry
            # the nearest centre by -2 x.c + ||c||^2 (||x||^2 is the same for every centre), and
            # the clusters' sums as one matmul of the one-hot assignments (a scatter-add is
            # several times slower on a CPU)
            nearest = jnp.argmin(jnp.sum(centres * centres, axis=1)[None] - 2.0 * x @ centres.T, 1)
            assign = (nearest[:, None] == jnp.arange(num_prototypes)[None]) * weight[:, None]
            sums, counts = assign.T @ x, jnp.sum(assign, axis=0)
            new = jnp.where(counts[:, None] > 0, sums / jnp.maximum(counts, 1.0)[:, None], centres)
            moved = jnp.any((nearest != before) & valid)
            return new, jnp.sum((new - centres) ** 2), it + 1, nearest, moved

        def going(carry):  # scikit-learn's rules: a small shift, or no vector changed cluster
            return (carry[2] < max_iter) & (carry[1] > threshold) & carry[4]

        start = (
            centres, jnp.array(jnp.inf, x.dtype), jnp.int32(0),
            jnp.full(x.shape[0], -1, jnp.int32), jnp.array(True),
        )  # fmt: skip
        centres = jax.lax.while_loop(going, update, start)[0]
        inertia = jnp.sum(weight * jnp.min(_squared_distances(x, centres), axis=1))
        return centres, inertia

    return jax.vmap(lambda key: lloyd(seeding(key)))(keys)


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
