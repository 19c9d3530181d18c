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

The module is the round loop; the steps are :mod:`dpp.solvers.theta` (the Theta-step and its
batched paths) and :mod:`dpp.solvers.prototype` (the (mu, beta)-step), the settings and results
:mod:`dpp.solvers.settings`, and the round log :mod:`dpp.solvers.progress`. No module keeps
mutable state. Everything here is traceable; :func:`coordinate_ascent`, :func:`fit_joint` and
:func:`fit_classifier` are the ``jit`` boundaries. Settings are pytrees (:mod:`dpp.hyper`):
``lambda``, the tolerances, the prior's parameters and ``beta_step_limit`` are traced, so a new
value reuses the compiled program; only shapes, iteration caps and solver kinds are static.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from dpp.encoding import packed_log_likelihood
from dpp.likelihood import (
    Params,
    mean_log_likelihood,
    objective,
)
from dpp.pooling import by_kind
from dpp.sets import RaggedSets
from dpp.solvers.progress import log_rounds
from dpp.solvers.prototype import (
    accept_if_higher,
    minimise_objective,
    prototype_coordinates,
    prototype_step,
    traced_prototype_step,
)
from dpp.solvers.settings import FitResult, FitSettings, StepDiagnostics
from dpp.solvers.theta import (
    MAX_BATCH_BYTES,
    classifier_member_bytes,
    fit_classifier,
    fit_classifier_paths,
    theta_step,
    traced_theta_step,
)

#: The round loop's own names, and those of the steps it runs (re-exported from the modules
#: the loop was split into: :mod:`~dpp.solvers.settings`, :mod:`~dpp.solvers.theta`,
#: :mod:`~dpp.solvers.prototype`, :mod:`~dpp.solvers.progress`).
__all__ = [
    "MAX_BATCH_BYTES",
    "FitResult",
    "FitSettings",
    "StepDiagnostics",
    "classifier_member_bytes",
    "coordinate_ascent",
    "fit_classifier",
    "fit_classifier_paths",
    "fit_joint",
    "log_rounds",
    "prototype_coordinates",
    "prototype_step",
    "theta_step",
]


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


def _joint_step(params: Params, sets: RaggedSets, settings: FitSettings, key):
    x0, to_params = prototype_coordinates(params, settings.beta_step_limit)

    def assemble(x):
        mu, log_beta, pooling = to_params(x[:3])
        return Params(mu, log_beta, x[3], pooling)

    result = minimise_objective(assemble, (*x0, params.theta), sets, settings, key)
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
    value = objective(params, sets, settings.l2, settings.prior)
    rows = settings.max_rounds + 1
    diag = _first_diagnostics(rows, theta_result, params, value.dtype)
    has_val, validate = _validation_score(validation, value.dtype)

    def trace(x0):
        return jnp.full((rows,), jnp.nan, dtype=value.dtype).at[0].set(x0)

    val = validate(params)

    def keep_going(s: _RoundState):
        going = (s.round < cap) & ~s.converged
        if validation is not None:
            going = going & (~has_val | (s.round - s.best_round < settings.patience))
        return going

    def one_round(s: _RoundState) -> _RoundState:
        key, step_key = jax.random.split(s.key)
        params, value = s.params, s.value
        if joint:
            candidate, proto = _joint_step(params, sets, settings, step_key)
            params, value, proto_ok = accept_if_higher(candidate, params, value, sets, settings)
            theta_iters, theta_ok, theta_failures = jnp.int32(0), jnp.array(False), 0
        else:
            candidate, proto = traced_prototype_step(params, sets, settings, step_key)
            params, value, proto_ok = accept_if_higher(candidate, params, value, sets, settings)
            candidate, theta = traced_theta_step(params, sets, settings)
            params, value, theta_ok = accept_if_higher(candidate, params, value, sets, settings)
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
