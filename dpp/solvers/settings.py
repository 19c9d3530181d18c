"""The settings and results of a DPP fit: FitSettings, StepDiagnostics, FitResult.

Pytrees (:mod:`dpp.hyper`): continuous numbers are traced, the structure static.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar, NamedTuple

import jax
from jaxtyping import Array, Float

from dpp import params as check
from dpp.hyper import check_concrete
from dpp.likelihood import (
    NO_PRIOR,
    BetaPrior,
    Params,
)
from dpp.pytrees import dataclass_pytree
from dpp.solvers import options
from dpp.solvers.lbfgs import LBFGSSettings
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
