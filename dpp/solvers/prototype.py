"""The (mu, beta)-step: ``L`` maximised over the prototypes and ``log beta`` with ``Theta`` fixed.

It runs in well-scaled coordinates (:func:`prototype_coordinates`): prototypes in units of the
code length-scale ``1 / sqrt(beta)``, ``log beta`` inside a smooth trust region of half-width
``log(beta_step_limit)``, by full-batch L-BFGS/BFGS or mini-batch Adam; a step that lowers ``L``
is refused (:func:`accept_if_higher`).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from dpp.encoding import LOG_BETA_MAX, encode_soft
from dpp.likelihood import (
    Params,
    classifier_objective,
    objective,
)
from dpp.sets import RaggedSets
from dpp.solvers.lbfgs import MinimizeResult
from dpp.solvers.settings import FitSettings
from dpp.solvers.theta import weight_scale


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
    params: Params, sets: RaggedSets, settings: FitSettings, key: jax.Array
) -> Params:
    """(mu, beta)-step: maximise ``L`` over ``mu`` and ``log beta`` with ``Theta`` fixed.

    Runs in the coordinates of :func:`prototype_coordinates`, so ``beta`` changes by at most
    ``settings.beta_step_limit``.

    Args:
        params: current parameters (the starting point).
        sets: training sets.
        settings: ``l2``, ``prior``, ``prototype_solver`` and ``beta_step_limit`` are used.
        key: PRNG key (used by mini-batch Adam only).

    Returns:
        Parameters with new ``mu`` and ``log_beta``.
    """
    return traced_prototype_step(params, sets, settings, key)[0]


def traced_prototype_step(params: Params, sets: RaggedSets, settings: FitSettings, key):
    """:func:`prototype_step` unjitted, with the solver's result (the round loop traces it)."""
    theta = params.theta
    x0, to_params = prototype_coordinates(params, settings.beta_step_limit)

    def assemble(x):
        mu, log_beta, pooling = to_params(x)
        return Params(mu, log_beta, theta, pooling)

    result = minimise_objective(assemble, x0, sets, settings, key)
    return assemble(result.params), result


def minimise_objective(
    assemble, x0, sets: RaggedSets, settings: FitSettings, key
) -> MinimizeResult:
    """``-L`` minimised by the prototype solver: over all sets, or over mini-batches of them."""

    def loss(x):
        return -weight_scale(sets) * objective(assemble(x), sets, settings.l2, settings.prior)

    total_weight = jnp.sum(sets.weights)  # once, not per mini-batch

    def batch_loss(x, batch, scale):
        return -_batch_objective(assemble(x), batch, scale, settings) / total_weight

    return settings.prototype_solver.minimize_loss(loss, batch_loss, x0, sets, key)


def _batch_objective(params: Params, batch: RaggedSets, scale, settings: FitSettings):
    z = encode_soft(batch, params.mu, params.log_beta, params.pooling)
    data = classifier_objective(params.theta, z, batch.labels, batch.weights, 0.0)
    penalty = settings.l2 * jnp.sum(params.theta**2)
    return scale * data - penalty + settings.prior.log_density(params.log_beta)


def accept_if_higher(
    candidate: Params, current: Params, current_value, sets, settings: FitSettings
):
    """Keeps ``candidate`` only if it raises ``L`` (and ``L`` is finite).

    Returns:
        ``(params, value, accepted)``.
    """
    value = objective(candidate, sets, settings.l2, settings.prior)
    better = jnp.isfinite(value) & (value > current_value)
    chosen = jax.tree.map(lambda a, b: jnp.where(better, a, b), candidate, current)
    return chosen, jnp.where(better, value, current_value), better
