"""Fitted prototype models and the DPP learner (k-means init + coordinate ascent or joint fit).

A :class:`FittedModel` is what every method (DPP and the baselines) returns: prototypes, an
encoder (soft, eq. 3, or hard, eq. 1), the softmax classifier of eq. (16) and the objective
history. The experiment layer only talks to this type.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from dpp.classifier import log_predictive
from dpp.encoding import encode_hard, encode_soft
from dpp.init import init_log_beta
from dpp.likelihood import Params
from dpp.sets import RaggedSets
from dpp.solvers.coordinate_ascent import FitSettings, coordinate_ascent, fit_joint
from dpp.solvers.minibatch import AdamSettings, batch_capacity

MODES = ("coordinate_ascent", "joint")

encode_soft_jit = jax.jit(encode_soft)
encode_hard_jit = jax.jit(encode_hard)
_log_predictive = jax.jit(log_predictive)


@dataclasses.dataclass(frozen=True)
class FittedModel:
    """A trained prototype model.

    Attributes:
        method: name of the method that produced it (``dpp``, ``standard``, ...).
        mu: ``[K, D]`` prototypes.
        log_beta: ``[]`` or ``[K]`` log inverse temperature for the soft encoder of eq. (3), or
            ``None`` for the hard encoder of eq. (1).
        theta: ``[K, C]`` softmax classifier weights.
        history: objective values recorded during training (method-specific meaning).
        info: scalars worth reporting (rounds, convergence, final ``beta``, ...).
    """

    method: str
    mu: Float[Array, "K D"]
    log_beta: Float[Array, "*B"] | None
    theta: Float[Array, "K C"]
    history: np.ndarray
    info: dict

    def encode(self, sets: RaggedSets) -> Float[Array, "N K"]:
        """``[N, K]`` set representations ``z`` (eq. 2 over eq. 3 or eq. 1)."""
        if self.log_beta is None:
            return encode_hard_jit(sets, self.mu)
        return encode_soft_jit(sets, self.mu, self.log_beta)

    def log_predictive(self, sets: RaggedSets) -> Float[Array, "N C"]:
        """``[N, C]`` log class probabilities of eq. (16) for each set."""
        return _log_predictive(self.encode(sets), self.theta)


def fit_dpp(
    train: RaggedSets,
    centres: np.ndarray,
    settings: FitSettings,
    key: jax.Array,
    mode: str = "coordinate_ascent",
    beta_scale: float = 1.0,
    per_prototype_beta: bool = False,
) -> FittedModel:
    """Learns DPP from k-means centres: eqs. (3), (2), (16) by likelihood maximisation.

    Args:
        train: ``N`` training sets.
        centres: ``[K, D]`` initial centres (k-means on the training vectors).
        settings: static solver settings (``prototype_solver`` may be Adam; its ``capacity`` is
            filled in here).
        key: PRNG key (mini-batch shuffling).
        mode: ``coordinate_ascent`` (section 4) or ``joint`` (one solver run on all parameters).
        beta_scale: multiplier of the beta heuristic of :func:`dpp.init.init_log_beta`.
        per_prototype_beta: one ``beta`` per prototype instead of one shared.

    Returns:
        The fitted model; ``history`` holds ``L`` per round.

    Raises:
        ValueError: for an unknown ``mode`` or centres of the wrong dimension.
    """
    if mode not in MODES:
        raise ValueError(f"unknown DPP mode {mode!r}; choose from {MODES}")
    if centres.ndim != 2 or centres.shape[1] != train.dim:
        raise ValueError(f"centres must be [K, {train.dim}], got {centres.shape}")
    if isinstance(settings.prototype_solver, AdamSettings):
        solver = dataclasses.replace(
            settings.prototype_solver,
            capacity=batch_capacity(train, settings.prototype_solver.batch_size),
        )
        settings = dataclasses.replace(settings, prototype_solver=solver)
    dtype = train.vectors.dtype
    mu0 = jnp.asarray(centres, dtype=dtype)
    log_beta0 = init_log_beta(
        np.asarray(train.vectors), centres, beta_scale, per_prototype_beta, dtype=dtype
    )
    theta0 = jnp.zeros((centres.shape[0], train.num_classes), dtype=dtype)
    solve = coordinate_ascent if mode == "coordinate_ascent" else fit_joint
    result = solve(Params(mu0, log_beta0, theta0), train, settings, key)
    history = np.asarray(result.history)
    history = history[np.isfinite(history)]
    beta = np.exp(np.asarray(result.params.log_beta))
    info = {
        "rounds": int(result.num_rounds),
        "converged": bool(result.converged),
        "beta_init": float(np.exp(np.mean(np.asarray(log_beta0)))),
        "beta": float(beta) if beta.ndim == 0 else [float(b) for b in beta],
    }
    return FittedModel(
        "dpp", result.params.mu, result.params.log_beta, result.params.theta, history, info
    )
