r"""Likelihood maximisation for DPP: coordinate ascent (section 4) and joint optimisation.

Coordinate ascent, as used for every experiment of the paper:

0. start from k-means centres and an initial ``beta`` (see :mod:`dpp.init`) and fit ``Theta``
   by a Theta-step, giving ``L_0``;
1. each round: a (mu, beta)-step (maximise ``L`` over ``mu`` and ``log beta`` with ``Theta``
   fixed, by L-BFGS/BFGS or mini-batch Adam), then a Theta-step (maximise ``L`` over ``Theta``
   with ``mu``, ``beta`` fixed; convex, by L-BFGS/BFGS on the fixed codes ``z``);
2. stop when :math:`(L_r - L_{r-1}) / |L_{r-1}| <` ``tol`` or after ``max_rounds``.

A step is accepted only if it does not decrease ``L`` (a safeguard against a line search that
ends badly, or against Adam's noise), so the returned history never decreases. Solvers minimise
``-L / sum(w)``; histories report ``L`` itself.

Everything here is traceable; :func:`coordinate_ascent`, :func:`fit_joint` and
:func:`fit_classifier` are the ``jit`` boundaries, with the settings static.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from dpp.encoding import encode_soft
from dpp.likelihood import NO_PRIOR, BetaPrior, Params, classifier_objective, objective
from dpp.sets import RaggedSets
from dpp.solvers.lbfgs import LBFGSSettings, MinimizeResult, minimize
from dpp.solvers.minibatch import AdamSettings, minimize_minibatch

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class FitSettings:
    """Static settings of DPP learning.

    Attributes:
        l2: ridge ``lambda`` on ``tr(Theta^T Theta)`` (>= 0).
        prior: prior on ``log beta``.
        max_rounds: maximum coordinate-ascent rounds.
        tol: stop when the relative increase of ``L`` in a round is below this.
        theta_solver: full-batch solver of the convex Theta-steps.
        prototype_solver: solver of the (mu, beta)-steps and of the joint fit: L-BFGS/BFGS or
            mini-batch Adam.
        verbose: log ``L`` and ``beta`` after every round.
    """

    l2: float = 1e-2
    prior: BetaPrior = NO_PRIOR
    max_rounds: int = 20
    tol: float = 1e-5
    theta_solver: LBFGSSettings = LBFGSSettings(max_iter=300)
    prototype_solver: LBFGSSettings | AdamSettings = LBFGSSettings(max_iter=50)
    verbose: bool = False

    def __post_init__(self):
        if self.l2 < 0:
            raise ValueError("l2 (lambda) must be >= 0")
        if self.max_rounds < 0:
            raise ValueError("max_rounds must be >= 0")


class FitResult(NamedTuple):
    """Output of :func:`coordinate_ascent` and :func:`fit_joint`.

    Attributes:
        params: fitted parameters.
        history: ``[max_rounds + 1]`` float, ``L`` after initialisation and after each round
            (NaN after the last round taken); for the joint fit ``[2]``: before and after.
        num_rounds: int32 scalar, rounds taken.
        converged: bool scalar, whether the tolerance was reached.
    """

    params: Params
    history: Float[Array, " R"]
    num_rounds: jax.Array
    converged: jax.Array


def _scale(sets: RaggedSets) -> jax.Array:
    return 1.0 / jnp.sum(sets.weights)


def _classifier_step(theta0, z, labels, weights, l2, solver: LBFGSSettings) -> MinimizeResult:
    scale = 1.0 / jnp.sum(weights)
    return minimize(
        lambda theta: -scale * classifier_objective(theta, z, labels, weights, l2), theta0, solver
    )


@functools.partial(jax.jit, static_argnames=("solver",))
def fit_classifier(
    z: Float[Array, "N K"],
    labels: Float[Array, "N C"],
    weights: Float[Array, " N"],
    theta0: Float[Array, "K C"],
    l2: float,
    solver: LBFGSSettings,
) -> Float[Array, "K C"]:
    """Fits the softmax classifier (eq. 16) on fixed codes: the convex Theta-step.

    Maximises ``sum_n w_n L^n(Theta) - lambda ||Theta||^2`` (eqs. 5, 17). This is multinomial
    logistic regression without intercept, equal to scikit-learn's
    ``LogisticRegression(C=1 / (2 lambda), fit_intercept=False)`` for unit weights and hard labels.

    Args:
        z: ``[N, K]`` fixed set representations.
        labels: ``[N, C]`` soft labels.
        weights: ``[N]`` per-set weights.
        theta0: ``[K, C]`` starting point (warm start).
        l2: ridge ``lambda``.
        solver: full-batch solver settings.

    Returns:
        ``[K, C]`` maximiser.
    """
    return _classifier_step(theta0, z, labels, weights, l2, solver).params


def theta_step(params: Params, sets: RaggedSets, settings: FitSettings) -> Params:
    """Theta-step: maximise ``L`` over ``Theta`` with ``mu`` and ``beta`` fixed (convex).

    Args:
        params: current parameters (``Theta`` is the warm start).
        sets: training sets.
        settings: ``l2`` and ``theta_solver`` are used.

    Returns:
        Parameters with the new ``Theta``.
    """
    z = encode_soft(sets, params.mu, params.log_beta)
    result = _classifier_step(
        params.theta, z, sets.labels, sets.weights, settings.l2, settings.theta_solver
    )
    return params._replace(theta=result.params)


def prototype_step(
    params: Params, sets: RaggedSets, settings: FitSettings, key: jax.Array
) -> Params:
    """(mu, beta)-step: maximise ``L`` over ``mu`` and ``log beta`` with ``Theta`` fixed.

    Args:
        params: current parameters (the starting point).
        sets: training sets.
        settings: ``l2``, ``prior`` and ``prototype_solver`` are used.
        key: PRNG key (used by mini-batch Adam only).

    Returns:
        Parameters with new ``mu`` and ``log_beta``.
    """
    theta = params.theta

    def assemble(x):
        return Params(x[0], x[1], theta)

    x0 = (params.mu, params.log_beta)
    x = _minimise_objective(assemble, x0, sets, settings, key)
    return assemble(x)


def _minimise_objective(assemble, x0, sets: RaggedSets, settings: FitSettings, key):
    solver = settings.prototype_solver
    if isinstance(solver, AdamSettings):
        total_weight = jnp.sum(sets.weights)

        def batch_loss(x, batch, scale):
            return -_batch_objective(assemble(x), batch, scale, settings) / total_weight

        return minimize_minibatch(batch_loss, x0, sets, solver, key).params
    scale = _scale(sets)
    fun = lambda x: -scale * objective(assemble(x), sets, settings.l2, settings.prior)  # noqa: E731
    return minimize(fun, x0, solver).params


def _batch_objective(params: Params, batch: RaggedSets, scale, settings: FitSettings):
    z = encode_soft(batch, params.mu, params.log_beta)
    data = classifier_objective(params.theta, z, batch.labels, batch.weights, 0.0)
    penalty = settings.l2 * jnp.sum(params.theta**2)
    return scale * data - penalty + settings.prior.log_density(params.log_beta)


def _accept(candidate: Params, current: Params, current_value, sets, settings: FitSettings):
    """Keeps ``candidate`` only if it does not decrease ``L`` (and ``L`` is finite)."""
    value = objective(candidate, sets, settings.l2, settings.prior)
    better = jnp.isfinite(value) & (value >= current_value)
    chosen = jax.tree.map(lambda a, b: jnp.where(better, a, b), candidate, current)
    return chosen, jnp.where(better, value, current_value)


def _log_round(round_, value, beta, rel_change):
    logger.info(
        "coordinate ascent round %3d  L = %.6g  beta = %.4g  rel. change = %.3g",
        int(round_),
        float(value),
        float(beta),
        float(rel_change),
    )


@functools.partial(jax.jit, static_argnames=("settings",))
def coordinate_ascent(
    params0: Params, sets: RaggedSets, settings: FitSettings, key: jax.Array
) -> FitResult:
    """Coordinate ascent on ``L`` (section 4 of the paper), the default DPP learner.

    ``Theta`` in ``params0`` is only the warm start of the initial Theta-step.

    Args:
        params0: initial parameters, typically k-means centres and :func:`dpp.init.init_log_beta`.
        sets: training sets.
        settings: static solver settings.
        key: PRNG key for mini-batch solvers.

    Returns:
        :class:`FitResult` with a non-decreasing history of ``L``.
    """
    params = theta_step(params0, sets, settings)
    value = objective(params, sets, settings.l2, settings.prior)
    history = jnp.full((settings.max_rounds + 1,), jnp.nan, dtype=value.dtype).at[0].set(value)

    def keep_going(state):
        _, _, round_, _, converged, _ = state
        return (round_ < settings.max_rounds) & ~converged

    def one_round(state):
        params, value, round_, history, _, key = state
        key, step_key = jax.random.split(key)
        previous = value
        candidate = prototype_step(params, sets, settings, step_key)
        params, value = _accept(candidate, params, value, sets, settings)
        candidate = theta_step(params, sets, settings)
        params, value = _accept(candidate, params, value, sets, settings)
        round_ = round_ + 1
        rel_change = (value - previous) / jnp.maximum(jnp.abs(previous), 1e-30)
        if settings.verbose:
            jax.debug.callback(
                _log_round, round_, value, jnp.mean(jnp.exp(params.log_beta)), rel_change
            )
        return params, value, round_, history.at[round_].set(value), rel_change < settings.tol, key

    state = (params, value, jnp.int32(0), history, jnp.array(False), key)
    params, value, rounds, history, converged, _ = jax.lax.while_loop(keep_going, one_round, state)
    return FitResult(params, history, rounds, converged)


@functools.partial(jax.jit, static_argnames=("settings",))
def fit_joint(
    params0: Params, sets: RaggedSets, settings: FitSettings, key: jax.Array
) -> FitResult:
    """Joint optimisation of all parameters by one run of ``prototype_solver``.

    Starts with a Theta-step from ``params0``, then optimises ``(mu, log beta, Theta)`` together.
    Known to overfit on MPEG-7 (``beta`` runs away); offered for comparison.

    Args:
        params0: initial parameters.
        sets: training sets.
        settings: static settings (``prototype_solver`` runs the joint fit).
        key: PRNG key for mini-batch solvers.

    Returns:
        :class:`FitResult` with ``history = [L after the Theta-step, L at the end]``.
    """
    params = theta_step(params0, sets, settings)
    value = objective(params, sets, settings.l2, settings.prior)
    x = _minimise_objective(lambda x: Params(*x), tuple(params), sets, settings, key)
    params, final = _accept(Params(*x), params, value, sets, settings)
    history = jnp.stack([value, final])
    return FitResult(params, history, jnp.int32(1), jnp.array(True))
