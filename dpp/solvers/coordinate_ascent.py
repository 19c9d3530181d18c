r"""Likelihood maximisation for DPP: coordinate ascent (section 4) and joint optimisation.

Coordinate ascent, as used for every experiment of the paper:

0. start from k-means centres and an initial ``beta`` (see :mod:`dpp.init`) and fit ``Theta``
   by a Theta-step, giving ``L_0``;
1. each round: a (mu, beta)-step (maximise ``L`` over ``mu`` and ``log beta`` with ``Theta``
   fixed, by L-BFGS/BFGS or mini-batch Adam), then a Theta-step (maximise ``L`` over ``Theta``
   with ``mu``, ``beta`` fixed; convex, by L-BFGS/BFGS on the fixed codes ``z``);
2. stop when :math:`(L_r - L_{r-1}) / |L_{r-1}| \\le` ``tol`` or after ``max_rounds``.

A step is accepted only if it does not decrease ``L`` (a safeguard against a line search that
ends badly, or against Adam's noise), so the returned history never decreases. Solvers minimise
``-L / sum(w)``; histories report ``L`` itself.

The (mu, beta)-step runs in well-scaled coordinates (:func:`prototype_coordinates`): prototypes
are measured in units of the code length-scale ``1 / sqrt(beta)``, and ``log beta`` moves inside
a smooth trust region of half-width ``log(beta_step_limit)``. Without them the first quasi-Newton
step on high-dimensional data is almost pure ``log beta`` (its gradient dwarfs the prototypes'),
the line search extrapolates along a direction that is nearly linear and then flat, and ``beta``
lands 1e4 to 1e30 times higher in saturated codes whose gradients vanish. ``beta`` that the data
want larger still grows, by up to ``beta_step_limit`` a round.

The module reads top to bottom: the fit's settings and results (:class:`FitSettings`,
:class:`StepDiagnostics`, :class:`FitResult`); the Theta-step (:func:`theta_step`, and the
classifier's fits on fixed codes, alone or along batched ``lambda`` paths:
:func:`fit_classifier`, :func:`fit_classifier_paths`); the (mu, beta)-step
(:func:`prototype_step` in the coordinates of :func:`prototype_coordinates`); then the round
loop. The round log is :mod:`dpp.solvers.progress`. Nothing here keeps mutable state.
Everything is traceable; :func:`coordinate_ascent`, :func:`fit_joint` and :func:`fit_classifier`
are the ``jit`` boundaries. Settings are pytrees (:mod:`dpp.hyper`):
``lambda``, the tolerances, the prior's parameters and ``beta_step_limit`` are traced, so a new
value reuses the compiled program; only shapes, iteration caps and solver kinds are static.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import ClassVar, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from dpp import params as check
from dpp.encoding import LOG_BETA_MAX, encode_soft, packed_log_likelihood
from dpp.hyper import check_concrete
from dpp.likelihood import (
    NO_PRIOR,
    BetaPrior,
    Params,
    classifier_objective,
    mean_log_likelihood,
    objective,
)
from dpp.pooling import by_kind
from dpp.pytrees import dataclass_pytree
from dpp.sets import RaggedSets, sets_bucket
from dpp.sharding import ShardedSets, sharded_codes
from dpp.solvers import options
from dpp.solvers.lbfgs import LBFGSSettings, MinimizeResult, minimize
from dpp.solvers.minibatch import AdamSettings


@dataclass_pytree("max_rounds", "patience", "verbose")
@dataclasses.dataclass(frozen=True)
class FitSettings:
    """Settings of DPP learning; the defaults are those of :class:`dpp.DPPClassifier`.

    A pytree (:mod:`dpp.hyper`): ``max_rounds``, ``patience``, ``verbose`` and the solvers'
    kinds and iteration caps are static; ``l2``, ``tol``, ``beta_step_limit``, the prior's
    parameters and the solvers' tolerances are traced, so changing them does not recompile.

    Attributes:
        l2: ridge ``lambda`` on ``tr(Theta^T Theta)`` (>= 0).
        prior: prior on ``log beta``.
        mu_prior_scale: ``None`` (the paper's model: no prior on ``mu``) or ``s > 0``: a
            Gaussian prior on each prototype coordinate around the fit's start (the k-means
            centres), of standard deviation ``s`` in the units of the vectors the solver sees
            (a fit's internal units, where it is a number of the data's spreads):
            :func:`prototype_log_prior`. The MAP reading the paper gives ``Theta``'s ridge
            (section 3.2), applied to ``mu``. ``None`` and a number compile two programs; two
            numbers share one.
        max_rounds: maximum coordinate-ascent rounds.
        tol: stop when the relative increase of ``L`` in a round is below this.
        theta_solver: full-batch solver of the convex Theta-steps.
        prototype_solver: solver of the (mu, beta)-steps and of the joint fit: L-BFGS/BFGS or
            mini-batch Adam.
        beta_step_limit: one (mu, beta)-step (or the joint fit) changes ``beta`` by at most this
            factor up or down (a smooth trust region on ``log beta``; > 1).
        patience: with early stopping, stop after this many rounds without a better validation
            log-likelihood.
        verbose: log ``L`` and ``beta`` of every round (:func:`dpp.model.fit_dpp` does, from the
            returned history, by :func:`log_rounds`; the compiled solver never calls the host,
            and :func:`dpp.model.fit_dpp` hands it ``verbose=False``, so verbose and quiet fits
            run one program).
    """

    l2: float = 1e-2
    prior: BetaPrior = NO_PRIOR
    mu_prior_scale: float | None = None
    max_rounds: int = 30
    tol: float = 1e-5
    theta_solver: LBFGSSettings = options.theta_solver(options.DEFAULT_OPTIMIZER)
    prototype_solver: LBFGSSettings | AdamSettings = options.prototype_solver(
        options.DEFAULT_OPTIMIZER
    )
    beta_step_limit: float = 2.0
    patience: int = 2
    verbose: bool = False

    #: The rules of the fit's numbers: the one home of DPP's fit rules. Checked here on
    #: construction (concrete values only), and part of :class:`dpp.DPPClassifier`'s table, so
    #: of its ``check_params``, the config check and the model-file loader.
    RULES: ClassVar[dict[str, check.Rule]] = {
        "l2": check.Real(low=0),
        "mu_prior_scale": check.Optional(check.Real(low=0, low_open=True)),
        "max_rounds": check.Int(0),
        "tol": check.Real(low=0),
        "beta_step_limit": check.Real(low=1, low_open=True),
        "patience": check.Int(1),
    }

    def __post_init__(self):
        check_concrete(self, self.RULES)


class StepDiagnostics(NamedTuple):
    """Per-round record of the two steps of coordinate ascent (row 0: the initial Theta-step).

    Attributes:
        prototype_iters: ``[R]`` int32 inner iterations of the (mu, beta)-step (Adam: steps).
        theta_iters: ``[R]`` int32 inner iterations of the Theta-step.
        prototype_accepted: ``[R]`` bool, the (mu, beta)-step raised ``L`` (strictly).
        theta_accepted: ``[R]`` bool, the Theta-step raised ``L`` (strictly).
        linesearch_failures: ``[R]`` int32 line searches of the round that found no sufficient
            decrease.
        grad_norm: ``[R]`` float, gradient norm of ``-L / sum(w)`` in the step's coordinates at
            the end of the (mu, beta)-step (NaN for Adam).
        log_beta: ``[R]`` float, mean of ``log beta`` after the round (internal units; row 0:
            the initial value).
    """

    prototype_iters: jax.Array
    theta_iters: jax.Array
    prototype_accepted: jax.Array
    theta_accepted: jax.Array
    linesearch_failures: jax.Array
    grad_norm: jax.Array
    log_beta: jax.Array


class FitResult(NamedTuple):
    """Output of :func:`coordinate_ascent` and :func:`fit_joint`.

    Attributes:
        params: fitted parameters.
        history: ``[max_rounds + 1]`` float, ``L`` after initialisation and after each round
            (NaN after the last round taken).
        num_rounds: int32 scalar, rounds taken.
        converged: bool scalar, whether the stopping rule was met: a round that raised ``L`` by
            at most ``tol * |L|``. :func:`dpp.model.fit_status` turns this and ``diagnostics``
            into the reported status.
        diagnostics: :class:`StepDiagnostics`, rows ``0..num_rounds`` filled.
        validation_history: ``[max_rounds + 1]`` validation log-likelihood per set (weighted
            by the sets' weights) after each round (early stopping), else ``None``.
        best_round: int32 scalar, the round whose parameters are returned (early stopping),
            else ``None``.
    """

    params: Params
    history: Float[Array, " R"]
    num_rounds: jax.Array
    converged: jax.Array
    diagnostics: StepDiagnostics
    validation_history: Float[Array, " R"] | None = None
    best_round: jax.Array | None = None


# ---- The Theta-step: the softmax classifier on fixed codes (convex) ----------------------------


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


def prototype_log_prior(
    mu: Float[Array, "K D"], anchor: Float[Array, "K D"], settings: FitSettings
) -> Float[Array, ""]:
    r"""The Gaussian log-prior on the prototypes around ``anchor`` (unnormalised; 0 without one).

    .. math:: \log p(\mu) = -\frac{1}{2 s^2} \sum_{k, d} (\mu_{kd} - \mu^0_{kd})^2

    with ``s = settings.mu_prior_scale``. ``L`` gains it beside eq. (17)'s ridge and the prior on
    ``beta``, so every step of the fit, and the acceptance of a step, maximises the posterior.

    Args:
        mu: ``[K, D]`` prototypes.
        anchor: ``[K, D]`` the prior's centre, in :func:`coordinate_ascent` the fit's start.
        settings: its ``mu_prior_scale`` (``None``: no prior, an exact 0 without a term).

    Returns:
        Scalar log-density (nats), 0 when ``settings.mu_prior_scale`` is ``None``.
    """
    if settings.mu_prior_scale is None:
        return jnp.zeros((), mu.dtype)
    return -0.5 * jnp.sum((mu - anchor) ** 2) / settings.mu_prior_scale**2


def fit_objective(params: Params, sets, settings: FitSettings, anchor=None) -> Float[Array, ""]:
    """``L`` as the fit maximises it: :func:`dpp.likelihood.objective` and the prior on ``mu``.

    Args:
        params: parameters.
        sets: training sets.
        settings: ``l2``, ``prior`` and ``mu_prior_scale`` are used.
        anchor: ``[K, D]`` centre of the prior on ``mu`` (needed when it has one).

    Returns:
        Scalar ``L`` (nats); without a prior on ``mu``, :func:`dpp.likelihood.objective` itself.

    Raises:
        ValueError: a prior on ``mu`` without an ``anchor``.
    """
    value = objective(params, sets, settings.l2, settings.prior)
    if settings.mu_prior_scale is None:
        return value
    if anchor is None:
        raise ValueError("fit_objective: a prior on mu (mu_prior_scale) needs its anchor")
    return value + prototype_log_prior(params.mu, anchor, settings)


# ---- The (mu, beta)-step -----------------------------------------------------------------------


def prototype_coordinates(params: Params, beta_step_limit: float):
    r"""Well-scaled coordinates of the (mu, beta)-step around the current parameters.

    With ``beta_c``, ``mu_c``, ``log beta_c`` the values at the start of the step and
    ``r = log(beta_step_limit)``:

    .. math::

        \mu = \mu_c + u / \sqrt{\beta_c}, \qquad
        \log\beta = \log\beta_c + r \tanh(v / r),

    starting from ``u = 0``, ``v = 0``. A unit move of ``u_k`` or of ``v`` changes the logits of
    eq. (3) by order one, so the first quasi-Newton step is balanced between prototypes and
    temperature; ``beta`` stays within a factor ``beta_step_limit`` of ``beta_c``. It is a smooth
    change of variables, so every stationary point inside the region is one of ``L``.

    The pooling's parameters (the generalised mean's ``rho``, :mod:`dpp.pooling`) move with
    them, in their own coordinates (``rho`` itself; a unit move changes ``p`` by at most one).

    Args:
        params: parameters at the start of the step.
        beta_step_limit: largest factor by which ``beta`` may change (> 1).

    Returns:
        ``(x0, to_params)``: the starting point ``(u [K, D], v [] or [K], pooling)`` (``u``,
        ``v`` zero, the pooling as it is) and the map from coordinates to
        ``(mu, log_beta, pooling)``.
    """
    mu_c, log_beta_c = params.mu, params.log_beta
    radius = jnp.log(jnp.asarray(beta_step_limit, mu_c.dtype))
    root_beta = jnp.exp(0.5 * jnp.minimum(log_beta_c, LOG_BETA_MAX))
    root_beta = jnp.reshape(root_beta, (-1, 1))  # [1, 1] or [K, 1]

    def to_params(x):
        u, v, pooling = x
        return mu_c + u / root_beta, log_beta_c + radius * jnp.tanh(v / radius), pooling

    return (jnp.zeros_like(mu_c), jnp.zeros_like(log_beta_c), params.pooling), to_params


def prototype_step(
    params: Params, sets: RaggedSets, settings: FitSettings, key: jax.Array, anchor=None
) -> Params:
    """(mu, beta)-step: maximise ``L`` over ``mu`` and ``log beta`` with ``Theta`` fixed.

    Runs in the coordinates of :func:`prototype_coordinates`, so ``beta`` changes by at most
    ``settings.beta_step_limit``.

    Args:
        params: current parameters (the starting point).
        sets: training sets.
        settings: ``l2``, ``prior``, ``mu_prior_scale``, ``prototype_solver`` and
            ``beta_step_limit`` are used.
        key: PRNG key (used by mini-batch Adam only).
        anchor: ``[K, D]`` centre of the prior on ``mu`` (default: ``params.mu``).

    Returns:
        Parameters with new ``mu`` and ``log_beta``.
    """
    return traced_prototype_step(params, sets, settings, key, anchor)[0]


def traced_prototype_step(
    params: Params, sets: RaggedSets, settings: FitSettings, key, anchor=None
):
    """:func:`prototype_step` unjitted, with the solver's result (the round loop traces it)."""
    anchor = params.mu if anchor is None else anchor
    theta = params.theta
    x0, to_params = prototype_coordinates(params, settings.beta_step_limit)

    def assemble(x):
        mu, log_beta, pooling = to_params(x)
        return Params(mu, log_beta, theta, pooling)

    result = minimise_objective(assemble, x0, sets, settings, key, anchor)
    return assemble(result.params), result


def minimise_objective(
    assemble, x0, sets: RaggedSets, settings: FitSettings, key, anchor=None
) -> MinimizeResult:
    """``-L`` minimised by the prototype solver: over all sets, or over mini-batches of them."""

    def loss(x):
        return -weight_scale(sets) * fit_objective(assemble(x), sets, settings, anchor)

    total_weight = jnp.sum(sets.weights)  # once, not per mini-batch

    def batch_loss(x, batch, scale):
        return -_batch_objective(assemble(x), batch, scale, settings, anchor) / total_weight

    return settings.prototype_solver.minimize_loss(loss, batch_loss, x0, sets, key)


def _batch_objective(params: Params, batch: RaggedSets, scale, settings: FitSettings, anchor):
    z = encode_soft(batch, params.mu, params.log_beta, params.pooling)
    data = classifier_objective(params.theta, z, batch.labels, batch.weights, 0.0)
    penalty = settings.l2 * jnp.sum(params.theta**2)
    value = scale * data - penalty + settings.prior.log_density(params.log_beta)
    if settings.mu_prior_scale is None:
        return value
    return value + prototype_log_prior(params.mu, anchor, settings)


def accept_if_higher(
    candidate: Params, current: Params, current_value, sets, settings: FitSettings, anchor=None
):
    """Keeps ``candidate`` only if it raises ``L`` (and ``L`` is finite).

    ``L`` is :func:`fit_objective`, with the prior on ``mu`` centred on ``anchor`` (default:
    ``current.mu``) when ``settings`` has one.

    Returns:
        ``(params, value, accepted)``.
    """
    anchor = current.mu if anchor is None else anchor
    value = fit_objective(candidate, sets, settings, anchor)
    better = jnp.isfinite(value) & (value > current_value)
    chosen = jax.tree.map(lambda a, b: jnp.where(better, a, b), candidate, current)
    return chosen, jnp.where(better, value, current_value), better


# ---- The round loop ----------------------------------------------------------------------------


@jax.jit
def coordinate_ascent(
    params0: Params,
    sets: RaggedSets,
    settings: FitSettings,
    key: jax.Array,
    validation: RaggedSets | None = None,
    round_cap: jax.Array | None = None,
) -> FitResult:
    """Coordinate ascent on ``L`` (section 4 of the paper), the default DPP learner.

    ``Theta`` in ``params0`` is only the warm start of the initial Theta-step. Each round is a
    (mu, beta)-step followed by a Theta-step, each accepted only if it raises ``L``.

    With ``validation`` sets (held-out sets, never test data) the weighted mean validation
    log-likelihood per set is recorded after every round, the parameters of the best
    round are returned, and the loop stops once ``settings.patience`` rounds in a row have not
    improved it (early stopping).

    The validation sets may be the training layout itself with other weights: ``sets`` weighs
    the held-out sets 0 and ``validation`` weighs only them (blocks of sets weighted 0 are
    skipped, so neither pass pays for the other's sets). Validation sets of zero total weight
    turn early stopping off, so a refit on every set (held-out weights 0 and training weights
    restored) runs the same compiled program as the fit that chose its rounds.

    Args:
        params0: initial parameters, typically k-means centres and :func:`dpp.init.init_log_beta`.
        sets: training sets.
        settings: solver settings (a pytree: continuous values traced, caps static).
        key: PRNG key for mini-batch solvers.
        validation: optional validation sets for early stopping (of zero total weight: none,
            in the same program).
        round_cap: optional traced int32 number of rounds at most (``<= max_rounds``), e.g. the
            best round found by early stopping; changing it does not recompile.

    Returns:
        :class:`FitResult` with a non-decreasing history of ``L``; with ``validation``,
        ``validation_history`` holds the validation log-likelihood per round (NaN after the last)
        and ``best_round`` the round whose parameters are returned.
    """
    return by_kind(
        lambda p: _ascend(p, sets, settings, key, validation, round_cap, joint=False), params0
    )


@jax.jit
def fit_joint(
    params0: Params,
    sets: RaggedSets,
    settings: FitSettings,
    key: jax.Array,
    validation: RaggedSets | None = None,
    round_cap: jax.Array | None = None,
) -> FitResult:
    """Joint optimisation of all parameters, in rounds of one ``prototype_solver`` run each.

    Starts with a Theta-step from ``params0``; every round then optimises ``(mu, log beta,
    Theta)`` together from the current point, in the coordinates of
    :func:`prototype_coordinates` (so ``beta`` changes by at most ``beta_step_limit`` a round),
    and is accepted only if it raises ``L``. Rounds, stopping rule, diagnostics and early
    stopping are those of :func:`coordinate_ascent`.

    Args:
        params0: initial parameters.
        sets: training sets.
        settings: settings (``prototype_solver`` runs each joint step).
        key: PRNG key for mini-batch solvers.
        validation: optional validation sets for early stopping.
        round_cap: optional traced int32 cap on the rounds.

    Returns:
        :class:`FitResult`; ``diagnostics.prototype_iters`` counts the joint solver's iterations.
    """
    return by_kind(
        lambda p: _ascend(p, sets, settings, key, validation, round_cap, joint=True), params0
    )


def _joint_step(params: Params, sets: RaggedSets, settings: FitSettings, key, anchor):
    x0, to_params = prototype_coordinates(params, settings.beta_step_limit)

    def assemble(x):
        mu, log_beta, pooling = to_params(x[:3])
        return Params(mu, log_beta, x[3], pooling)

    result = minimise_objective(assemble, (*x0, params.theta), sets, settings, key, anchor)
    return assemble(result.params), result


class _RoundState(NamedTuple):
    """Carry of the round loop of :func:`_ascend`."""

    params: Params  # current parameters
    value: jax.Array  # [] L at params
    round: jax.Array  # [] int32 rounds taken
    history: jax.Array  # [max_rounds + 1] L after each round
    converged: jax.Array  # [] bool, the stopping rule was met
    key: jax.Array  # PRNG key
    diag: StepDiagnostics  # per-round diagnostics
    val_history: jax.Array  # [max_rounds + 1] validation log-likelihood (early stopping)
    best_params: Params  # parameters of the best validation round
    best_val: jax.Array  # [] its validation log-likelihood
    best_round: jax.Array  # [] int32 its round


def _first_diagnostics(rows: int, theta_result, params, dtype) -> StepDiagnostics:
    """The per-round diagnostics of ``rows`` rounds, row 0 holding the start's Theta-step."""
    return StepDiagnostics(
        prototype_iters=jnp.zeros(rows, jnp.int32),
        theta_iters=jnp.zeros(rows, jnp.int32).at[0].set(theta_result.num_iter),
        prototype_accepted=jnp.zeros(rows, bool),
        theta_accepted=jnp.zeros(rows, bool),
        linesearch_failures=jnp.zeros(rows, jnp.int32).at[0].set(theta_result.linesearch_failures),
        grad_norm=jnp.full(rows, jnp.nan, dtype),
        log_beta=jnp.zeros(rows, dtype).at[0].set(jnp.mean(params.log_beta)),
    )


def _validation_score(validation, dtype):
    """``(has_val, validate)``: early stopping's held-out score of a round's parameters (traced).

    ``validate(params)`` is the weighted mean log-likelihood per validation set, NaN without
    validation sets; validation sets of zero total weight (a refit that shares the
    early-stopping fit's program) turn early stopping off (``has_val`` false: no score, no
    patience, the last round returned). ``has_val`` is ``None`` without validation sets.
    """
    has_val = None if validation is None else jnp.sum(validation.weights) > 0
    nan = jnp.array(jnp.nan, dtype)

    def score(params):
        if validation.packing is not None:  # blocks of sets weighted 0 are skipped
            total = packed_log_likelihood(validation, *params)
            return (total / jnp.sum(validation.weights)).astype(dtype)
        return mean_log_likelihood(params, validation, weighted=True).astype(dtype)

    def validate(params):
        if validation is None:
            return nan
        return jax.lax.cond(has_val, score, lambda _: nan, params)

    return has_val, validate


def _ascend(params0, sets, settings: FitSettings, key, validation, round_cap, joint: bool):
    """The round loop shared by coordinate ascent and the joint fit (traced)."""
    cap = jnp.int32(settings.max_rounds)
    if round_cap is not None:  # never past the preallocated history
        cap = jnp.minimum(jnp.asarray(round_cap, jnp.int32), cap)
    params, theta_result = traced_theta_step(params0, sets, settings)
    anchor = params0.mu  # the prior on mu (if any) is centred on the start
    value = fit_objective(params, sets, settings, anchor)
    rows = settings.max_rounds + 1
    diag = _first_diagnostics(rows, theta_result, params, value.dtype)
    has_val, validate = _validation_score(validation, value.dtype)

    def trace(x0):
        return jnp.full((rows,), jnp.nan, dtype=value.dtype).at[0].set(x0)

    val = validate(params)

    def accept(candidate, current, current_value):
        return accept_if_higher(candidate, current, current_value, sets, settings, anchor)

    def keep_going(s: _RoundState):
        going = (s.round < cap) & ~s.converged
        if validation is not None:
            going = going & (~has_val | (s.round - s.best_round < settings.patience))
        return going

    def one_round(s: _RoundState) -> _RoundState:
        key, step_key = jax.random.split(s.key)
        params, value = s.params, s.value
        if joint:
            candidate, proto = _joint_step(params, sets, settings, step_key, anchor)
            params, value, proto_ok = accept(candidate, params, value)
            theta_iters, theta_ok, theta_failures = jnp.int32(0), jnp.array(False), 0
        else:
            candidate, proto = traced_prototype_step(params, sets, settings, step_key, anchor)
            params, value, proto_ok = accept(candidate, params, value)
            candidate, theta = traced_theta_step(params, sets, settings)
            params, value, theta_ok = accept(candidate, params, value)
            theta_iters, theta_failures = theta.num_iter, theta.linesearch_failures
        round_ = s.round + 1
        rel_change = (value - s.value) / jnp.maximum(jnp.abs(s.value), 1e-30)
        diag = StepDiagnostics(
            s.diag.prototype_iters.at[round_].set(proto.num_iter),
            s.diag.theta_iters.at[round_].set(theta_iters),
            s.diag.prototype_accepted.at[round_].set(proto_ok),
            s.diag.theta_accepted.at[round_].set(theta_ok),
            s.diag.linesearch_failures.at[round_].set(proto.linesearch_failures + theta_failures),
            s.diag.grad_norm.at[round_].set(proto.grad_norm.astype(value.dtype)),
            s.diag.log_beta.at[round_].set(jnp.mean(params.log_beta).astype(value.dtype)),
        )
        best = (s.best_params, s.best_val, s.best_round)
        val_history = s.val_history
        if validation is not None:
            val = validate(params)
            val_history = val_history.at[round_].set(val)
            improved = val > s.best_val
            best = jax.tree.map(
                lambda new, old: jnp.where(improved, new, old), (params, val, round_), best
            )
        return _RoundState(
            params,
            value,
            round_,
            s.history.at[round_].set(value),
            rel_change <= settings.tol,
            key,
            diag,
            val_history,
            *best,
        )

    start = _RoundState(
        params, value, jnp.int32(0), trace(value), jnp.array(False), key, diag, trace(val),
        params, val, jnp.int32(0),
    )  # fmt: skip
    end = jax.lax.while_loop(keep_going, one_round, start)
    if validation is None:
        return FitResult(end.params, end.history, end.round, end.converged, end.diag)
    params = jax.tree.map(lambda b, e: jnp.where(has_val, b, e), end.best_params, end.params)
    best_round = jnp.where(has_val, end.best_round, end.round)
    return FitResult(
        params, end.history, end.round, end.converged, end.diag, end.val_history, best_round
    )
