r"""InfoLoss baseline (Lazebnik & Raginsky, TPAMI 2009), as described in the spec.

Every training vector ``x_i`` carries the class distribution ``p_i`` of its set. The codebook has
centres ``m_k`` and per-centre class distributions ``pi_k``; with soft Voronoi weights
``w_k(x) = softmax_k(-beta ||x - m_k||^2)`` the objective, per training vector, is

.. math::

    J(m, \pi) = \frac{1}{T} \sum_i \sum_k w_k(x_i)
        \big[\mathrm{KL}(p_i \,\|\, \pi_k) + \gamma \|x_i - m_k\|^2\big].

Learning alternates (i) the closed-form ``pi``-update, the exact minimiser for fixed centres,
:math:`\pi_k \propto \sum_i w_k(x_i) p_i`, and (ii) an L-BFGS step (zoom line search) on the
centres with ``pi`` fixed, accepted only if ``J`` does not increase; so ``J`` decreases
monotonically. Prediction encodes sets with the learned centres and the hard assignment of eq. (1)
and trains the same softmax classifier (eq. 16) as DPP.

Choices (the spec leaves them open): ``beta = beta_scale / median squared distance to the nearest
k-means centre`` (the DPP heuristic, fixed during learning), ``gamma = gamma_scale * beta``
(``gamma ||x - m||^2`` is then ``gamma_scale`` at the typical distance), ``pi`` smoothed by
``1e-8`` before the logarithm.

In the shared-pool layout the sums over memberships are folded onto the ``U`` distinct vectors:
vector ``u`` with ``n_u`` memberships carries the summed label mass ``P_u``, so the cost is
``U x K``.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from dpp.baselines.standard import fit_standard
from dpp.encoding import soft_assignment, squared_distances
from dpp.init import init_log_beta
from dpp.model import FittedModel
from dpp.model.report import FitReport, InfoLossFacts, as_tuples
from dpp.pytrees import dataclass_pytree, is_concrete
from dpp.sets import RaggedSets
from dpp.solvers.lbfgs import LBFGSSettings, minimize

#: Smoothing of the centre distributions before their logarithm.
PI_EPS = 1e-8


@dataclass_pytree("max_rounds")
@dataclasses.dataclass(frozen=True)
class InfoLossSettings:
    """Settings of InfoLoss learning (a pytree: ``max_rounds`` static, the numbers traced).

    Attributes:
        beta_scale: soft-Voronoi ``beta`` relative to 1 / median squared distance.
        gamma_scale: distortion weight ``gamma`` relative to ``beta``.
        max_rounds: alternations of the pi-update and the centre step at most.
        tol: stop when a round lowers ``J`` by less than ``tol * |J|``.
        centre_solver: L-BFGS settings of each centre step.
    """

    beta_scale: float = 1.0
    gamma_scale: float = 0.1
    max_rounds: int = 30
    tol: float = 1e-5
    centre_solver: LBFGSSettings = LBFGSSettings(max_iter=20)

    def __post_init__(self):
        if self.max_rounds < 0:
            raise ValueError(f"max_rounds must be >= 0, got {self.max_rounds}")
        for name in ("beta_scale", "gamma_scale", "tol"):
            value = getattr(self, name)
            if is_concrete(value) and not value >= 0:
                raise ValueError(f"{name} must be >= 0, got {value}")


class LabelMass(NamedTuple):
    """Label statistics folded onto the distinct vectors.

    Attributes:
        mass: ``[U, C]`` sum of the class distributions of the sets holding each vector.
        count: ``[U]`` number of memberships ``n_u`` of each vector.
        neg_entropy: scalar ``sum_i sum_c p_ic log p_ic`` (the constant part of the KL terms).
    """

    mass: Float[Array, "U C"]
    count: Float[Array, " U"]
    neg_entropy: Float[Array, ""]


def label_mass(sets: RaggedSets) -> LabelMass:
    """Folds the memberships' class distributions onto the distinct vectors.

    Args:
        sets: training sets (either layout).

    Returns:
        :class:`LabelMass`.
    """
    u = sets.vectors.shape[0]
    p = sets.labels[sets.set_ids]  # [T, C]
    index = jnp.arange(u) if sets.members is None else sets.members
    mass = jax.ops.segment_sum(p, index, u) if sets.members is not None else p
    count = jax.ops.segment_sum(jnp.ones_like(index, sets.vectors.dtype), index, u)
    plogp = jnp.where(p > 0, p * jnp.log(jnp.where(p > 0, p, 1.0)), 0.0)
    return LabelMass(mass, count, jnp.sum(plogp))


def update_pi(
    centres: Float[Array, "K D"], vectors: Float[Array, "U D"], stats: LabelMass, log_beta
) -> Float[Array, "K C"]:
    """Closed-form minimiser of ``J`` over ``pi`` for fixed centres: weighted mean of the ``p_i``.

    Returns:
        ``[K, C]`` rows on the simplex (smoothed by :data:`PI_EPS`).
    """
    w = soft_assignment(vectors, centres, log_beta)  # [U, K]
    pi = w.T @ stats.mass + PI_EPS
    return pi / jnp.sum(pi, axis=1, keepdims=True)


def objective(
    centres: Float[Array, "K D"],
    pi: Float[Array, "K C"],
    vectors: Float[Array, "U D"],
    stats: LabelMass,
    log_beta,
    gamma: float,
) -> Float[Array, ""]:
    """``J``: mean over memberships of the soft-Voronoi information loss plus distortion.

    Returns:
        Scalar ``J >= 0`` (nats plus ``gamma`` times squared distance).
    """
    w = soft_assignment(vectors, centres, log_beta)  # [U, K]
    cross = -(stats.mass @ jnp.log(pi).T)  # [U, K]: -sum_i in u sum_c p_ic log pi_kc
    distortion = stats.count[:, None] * squared_distances(vectors, centres)
    total = stats.neg_entropy + jnp.sum(w * (cross + gamma * distortion))
    return total / jnp.sum(stats.count)


class InfoLossResult(NamedTuple):
    """Output of :func:`learn_codebook`.

    Attributes:
        centres: ``[K, D]`` learned centres.
        pi: ``[K, C]`` per-centre class distributions.
        history: ``[max_rounds + 1]`` ``J`` after the initial pi-update and after each round
            (NaN after the last round).
        num_rounds: int32 rounds taken.
    """

    centres: jax.Array
    pi: jax.Array
    history: jax.Array
    num_rounds: jax.Array


@jax.jit
def learn_codebook(
    centres0: Float[Array, "K D"], sets: RaggedSets, log_beta, gamma, settings: InfoLossSettings
) -> InfoLossResult:
    """Alternating minimisation of ``J`` from initial centres (k-means).

    Args:
        centres0: ``[K, D]`` initial centres.
        sets: training sets with their class distributions.
        log_beta: scalar log soft-Voronoi inverse temperature.
        gamma: distortion weight (1 / squared distance units).
        settings: settings (``max_rounds`` static, the rest traced).

    Returns:
        :class:`InfoLossResult` with a non-increasing history.
    """
    stats = label_mass(sets)
    x = sets.vectors

    def j(centres, pi):
        return objective(centres, pi, x, stats, log_beta, gamma)

    pi = update_pi(centres0, x, stats, log_beta)
    value = j(centres0, pi)
    history = jnp.full((settings.max_rounds + 1,), jnp.nan, value.dtype).at[0].set(value)

    def keep_going(state):
        return (state[3] < settings.max_rounds) & ~state[5]

    def one_round(state):
        centres, pi, value, round_, history, _ = state
        previous = value
        candidate = minimize(lambda c: j(c, pi), centres, settings.centre_solver).params
        new = j(candidate, pi)
        better = jnp.isfinite(new) & (new <= value)
        centres = jnp.where(better, candidate, centres)
        value = jnp.where(better, new, value)
        pi_new = update_pi(centres, x, stats, log_beta)
        new = j(centres, pi_new)
        better = new <= value  # exact minimiser: holds up to rounding
        pi = jnp.where(better, pi_new, pi)
        value = jnp.where(better, new, value)
        round_ = round_ + 1
        done = (previous - value) <= settings.tol * jnp.abs(previous)
        return centres, pi, value, round_, history.at[round_].set(value), done

    state = (centres0, pi, value, jnp.int32(0), history, jnp.array(False))
    centres, pi, _, rounds, history, _ = jax.lax.while_loop(keep_going, one_round, state)
    return InfoLossResult(centres, pi, history, rounds)


def fit_infoloss(
    train: RaggedSets,
    centres: np.ndarray,
    l2: float,
    theta_solver: LBFGSSettings,
    settings: InfoLossSettings = InfoLossSettings(),
) -> FittedModel:
    """Learns an InfoLoss codebook, then the softmax classifier on its hard (eq. 1) codes.

    Args:
        train: training sets.
        centres: ``[K, D]`` initial centres (k-means).
        l2: ridge ``lambda`` of the Theta-step (the same as the other methods').
        theta_solver: solver of the Theta-step.
        settings: InfoLoss settings.

    Returns:
        :class:`~dpp.model.FittedModel` named ``infoloss`` with the learned centres, the hard
        encoder, and ``history`` = ``J`` per round; ``info`` holds ``beta``, ``gamma``, rounds and
        the learned ``pi``.

    Raises:
        ValueError: for centres of the wrong dimension.
    """
    if centres.ndim != 2 or centres.shape[1] != train.dim:
        raise ValueError(f"centres must be [K, {train.dim}], got {centres.shape}")
    dtype = train.vectors.dtype
    log_beta = init_log_beta(np.asarray(train.vectors), centres, settings.beta_scale, dtype=dtype)
    gamma = settings.gamma_scale * float(np.exp(log_beta))
    result = learn_codebook(jnp.asarray(centres, dtype), train, log_beta, gamma, settings)
    learned = np.asarray(result.centres)
    model = fit_standard(train, learned, l2, theta_solver, method="infoloss")
    history = np.asarray(result.history)
    history = history[np.isfinite(history)]
    facts = InfoLossFacts(
        float(np.exp(log_beta)), float(gamma), as_tuples(np.asarray(result.pi).tolist())
    )
    rounds = int(result.num_rounds)
    status, reason = model.report.status, model.report.reason  # the Theta-step's
    if rounds >= settings.max_rounds:
        status, reason = (
            "max_rounds",
            (
                f"the codebook learning stopped at max_rounds = {settings.max_rounds} before J "
                f"fell by less than tol = {settings.tol:g} in a round"
            ),
        )
    else:
        reason = f"J fell by less than tol after {rounds} rounds; {reason}"
    report = FitReport(
        "infoloss", status, reason, rounds=rounds, history=tuple(float(h) for h in history),
        infoloss=facts,
    )  # fmt: skip
    return dataclasses.replace(model, history=history, report=report)
