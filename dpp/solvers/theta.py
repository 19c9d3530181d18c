"""The Theta-step: the softmax classifier fitted on fixed codes (convex), alone or in batched paths.

:func:`theta_step` is one step of coordinate ascent; :func:`fit_classifier` fits ``Theta`` on
given codes (a ``jit`` boundary); :func:`fit_classifier_paths` fits every fold's path of
``lambda`` values as one compiled program (``vmap`` over folds, ``lax.scan`` along each path,
each fit warm started from the previous maximiser), within :data:`MAX_BATCH_BYTES`.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from dpp.encoding import encode_soft
from dpp.likelihood import (
    Params,
    classifier_objective,
)
from dpp.sets import RaggedSets, sets_bucket
from dpp.sharding import ShardedSets, sharded_codes
from dpp.solvers import options
from dpp.solvers.lbfgs import LBFGSSettings, MinimizeResult, minimize
from dpp.solvers.settings import FitSettings


def weight_scale(sets: RaggedSets) -> jax.Array:
    """``1 / sum_n w_n``: the objective per unit of set weight, as the solvers minimise it."""
    return 1.0 / jnp.sum(sets.weights)


def _classifier_step(theta0, z, labels, weights, l2, solver: LBFGSSettings) -> MinimizeResult:
    scale = 1.0 / jnp.sum(weights)
    return minimize(
        lambda theta: -scale * classifier_objective(theta, z, labels, weights, l2), theta0, solver
    )


@jax.jit
def _fit_classifier(z, labels, weights, theta0, l2, solver):
    result = _classifier_step(theta0, z, labels, weights, l2, solver)
    return result.params, result.num_iter


def fit_classifier(
    z: Float[Array, "N K"],
    labels: Float[Array, "N C"],
    weights: Float[Array, " N"],
    theta0: Float[Array, "K C"],
    l2: float,
    solver: LBFGSSettings,
    with_iterations: bool = False,
) -> Float[Array, "K C"] | tuple[Float[Array, "K C"], int]:
    """Fits the softmax classifier (eq. 16) on fixed codes: the convex Theta-step.

    Maximises ``sum_n w_n L^n(Theta) - lambda ||Theta||^2`` (eqs. 5, 17). This is multinomial
    logistic regression without intercept, equal to scikit-learn's
    ``LogisticRegression(C=1 / (2 lambda), fit_intercept=False)`` for unit weights and hard labels.

    The rows are padded to :func:`dpp.sets.sets_bucket` with zero weight before the compiled
    solver runs, so the folds of a cross-validation share one program.

    Args:
        z: ``[N, K]`` fixed set representations.
        labels: ``[N, C]`` soft labels.
        weights: ``[N]`` per-set weights.
        theta0: ``[K, C]`` starting point (warm start).
        l2: ridge ``lambda`` (traced: a new value does not recompile).
        solver: full-batch solver settings (a pytree; ``tol`` is traced).
        with_iterations: also return the solver's iterations (``solver.max_iter``: it stopped
            at its cap before its gradient tolerance).

    Returns:
        ``[K, C]`` maximiser, or ``(maximiser, iterations)`` with ``with_iterations``.
    """
    n = z.shape[0]
    pad = sets_bucket(n) - n
    if pad:  # on the host: an eager jnp.concatenate would compile once per pair of shapes
        z, labels, weights = (
            np.concatenate([a, np.zeros((pad, *a.shape[1:]), a.dtype)])
            for a in (np.asarray(z), np.asarray(labels), np.asarray(weights))
        )
    theta, iterations = _fit_classifier(z, labels, weights, theta0, l2, solver)
    return (theta, int(iterations)) if with_iterations else theta


#: Memory budget of one chunk of :func:`fit_classifier_paths` (bytes): 1 GiB.
MAX_BATCH_BYTES = 2**30


def vectorise_members() -> bool:
    """Whether many fits of one program are ``vmap``-ped (an accelerator) or run in turn (CPU).

    On the CPU a fit is compute-bound: vectorising the members gains little, while every
    ``while_loop`` under ``vmap`` runs until its slowest member stops. In turn (``lax.map``),
    each member stops at its own iteration and its result is its fit alone, bit for bit. On
    Table 1 the folds' Theta paths in turn took the run from 107 s to 95 s with the same table.
    """
    return jax.default_backend() != "cpu"


@functools.partial(jax.jit, static_argnames="vectorised")
def _classifier_paths(z, labels, weights, l2, theta0, solver, vectorised=False):
    """``[F, L, K, C]`` maximisers and ``[F, L]`` iterations (see fit_classifier_paths)."""

    def path(z, weights, l2, theta0):
        def one(theta, l2):
            result = _classifier_step(theta, z, labels, weights, l2, solver)
            return result.params, (result.params, result.num_iter)

        return jax.lax.scan(one, theta0, l2)[1]

    if vectorised:
        return jax.vmap(path)(z, weights, l2, theta0)
    return jax.lax.map(lambda fold: path(*fold), (z, weights, l2, theta0))


def fit_classifier_paths(
    z: Float[Array, "F N K"],
    labels: Float[Array, "N C"],
    weights: Float[Array, "F N"],
    l2: Float[Array, "F L"],
    theta0: Float[Array, "F K C"] | None = None,
    solver: LBFGSSettings | None = None,
    max_batch_bytes: int = MAX_BATCH_BYTES,
) -> tuple[np.ndarray, np.ndarray]:
    """The Theta-steps (eq. 16 on fixed codes) of many folds along an ``l2`` path, as one program.

    Fold ``f`` fits :func:`fit_classifier` on its codes ``z[f]`` with weights ``weights[f]`` at
    ``l2[f, 0]``, ``l2[f, 1]``, ... in turn, each fit starting from the previous one's maximiser
    (the first from ``theta0[f]``): the problem is convex, so a warm start changes the maximiser
    only within the solver's tolerance, and along a path from strong to weak ``l2`` it saves most
    of the iterations. A cross-validation fold is every set with the held-out ones weighted 0
    (they add exact zeros to the objective and its gradient), so every fold shares one shape
    and one compiled program fits them all: on the CPU one after another (``lax.map``: each
    fold stops at its own iteration, and its fits are those of the fold alone), on an
    accelerator together (``vmap``: a fold whose solver has stopped is frozen while the others
    go on), as :func:`vectorise_members` says. The folds are fitted in chunks of equal shape
    whose estimate (:func:`classifier_member_bytes`) stays under ``max_batch_bytes``; every
    chunk reuses one compiled program.

    Args:
        z: ``[F, N, K]`` codes of every set, per fold (each fold's own encoder).
        labels: ``[N, C]`` soft labels.
        weights: ``[F, N]`` per-set weights of each fold's fits (0 for the sets it leaves
            out; each row has a positive entry).
        l2: ``[F, L]`` ridge ``lambda`` of each fit (>= 0), in the order they are fitted.
        theta0: ``[F, K, C]`` start of each fold's first fit (default 0).
        solver: full-batch solver settings, shared by every fit (default: the Theta-step's).
        max_batch_bytes: memory budget of one chunk.

    Returns:
        ``([F, L, K, C] float64 maximisers, [F, L] int solver iterations)``.

    Raises:
        ValueError: for inconsistent shapes or a fold without a positive weight.
    """
    z, labels = np.asarray(z), np.asarray(labels)
    weights, l2 = np.asarray(weights, z.dtype), np.asarray(l2, z.dtype)
    f, n, k = z.shape
    c = labels.shape[1]
    theta0 = np.zeros((f, k, c), z.dtype) if theta0 is None else np.asarray(theta0, z.dtype)
    if (
        labels.shape[0] != n
        or weights.shape != (f, n)
        or l2.ndim != 2
        or l2.shape[0] != f
        or theta0.shape != (f, k, c)
    ):
        raise ValueError(
            f"fit_classifier_paths: z {z.shape}, labels {labels.shape}, weights "
            f"{weights.shape}, l2 {l2.shape} and theta0 {theta0.shape} must be [F, N, K], "
            "[N, C], [F, N], [F, L] and [F, K, C]"
        )
    if not np.all(weights.sum(axis=1) > 0):
        raise ValueError("fit_classifier_paths: every fold needs a set of positive weight")
    solver = options.theta_solver(options.DEFAULT_OPTIMIZER, None) if solver is None else solver
    per_fold = z[0].nbytes + classifier_member_bytes(n, k, c, solver)
    chunk = int(np.clip(max_batch_bytes // per_fold, 1, f))
    thetas = np.zeros((f, l2.shape[1], k, c))
    iterations = np.zeros((f, l2.shape[1]), np.int64)
    for start in range(0, f, chunk):
        rows = np.minimum(np.arange(start, start + chunk), f - 1)  # the last repeats a fold
        theta, count = _classifier_paths(
            z[rows], labels, weights[rows], l2[rows], theta0[rows], solver,
            vectorised=vectorise_members(),
        )  # fmt: skip
        kept = min(chunk, f - start)
        thetas[start : start + kept] = np.asarray(theta)[:kept]
        iterations[start : start + kept] = np.asarray(count)[:kept]
    return thetas, iterations


def classifier_member_bytes(num_sets: int, num_prototypes: int, num_classes: int, solver) -> int:
    """Estimated working set of one fold of :func:`fit_classifier_paths` besides its codes.

    Bytes (float32): the ``[N, C]`` logits, probabilities and their cotangents, and the solver
    state (``2 * memory_size + 6`` copies of the ``[K, C]`` parameters). An estimate, stated
    so that a memory budget can be set.

    Args:
        num_sets: ``N``, the sets of every fold (held-out ones included).
        num_prototypes: ``K``.
        num_classes: ``C``.
        solver: the Theta-step's solver settings (its ``memory_size``; 10 if it has none).

    Returns:
        Bytes (int) of one fold's working set.
    """
    params = num_prototypes * num_classes
    memory = getattr(solver, "memory_size", 10)
    return 4 * (4 * num_sets * num_classes + (2 * memory + 6) * params)


def theta_step(params: Params, sets: RaggedSets, settings: FitSettings) -> Params:
    """Theta-step: maximise ``L`` over ``Theta`` with ``mu`` and ``beta`` fixed (convex).

    Args:
        params: current parameters (``Theta`` is the warm start).
        sets: training sets.
        settings: ``l2`` and ``theta_solver`` are used.

    Returns:
        Parameters with the new ``Theta``.
    """
    return traced_theta_step(params, sets, settings)[0]


def traced_theta_step(params: Params, sets: RaggedSets, settings: FitSettings):
    """:func:`theta_step` unjitted, with the solver's result (the round loop traces it)."""
    if isinstance(sets, ShardedSets):  # [P * N_p, K] codes, sharded by set
        z = sharded_codes(sets, params.mu, params.log_beta, params.pooling)
    else:
        z = encode_soft(sets, params.mu, params.log_beta, params.pooling)
    result = _classifier_step(
        params.theta, z, sets.labels, sets.weights, settings.l2, settings.theta_solver
    )
    return params._replace(theta=result.params), result
