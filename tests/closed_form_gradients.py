r"""Closed-form gradients of the DPP log-likelihood, eqs. (8)-(19) of Bonilla & Robles-Kelly (2012).

Training uses autodiff; these plain functions are the paper's formulas, written once so that the
tests can check autodiff against them. They build dense Jacobians (``[N, K, K, D]`` for eq. 13),
so they are meant for small problems.

Two remarks on the paper's formulas:

* eqs. (12)-(15) sum over the vectors of a set without the factor :math:`\pi_k = 1/M_n` of
  eq. (2); since :math:`z^n` is the *mean* of the codes, the Jacobians here carry it.
* with one inverse temperature per prototype, eq. (13) uses :math:`\beta_\ell` and eq. (15)
  becomes :math:`\partial z_k / \partial \beta_\ell = \frac{1}{M_n}\sum_x f_k(x)\,
  (f_\ell(x) d_\ell(x) - \delta_{k\ell} d_k(x))` with :math:`d_\ell = \|\mu_\ell - x\|^2`;
  summing over :math:`\ell` gives eq. (15).

Gradients with respect to ``log beta`` are ``beta * dL/dbeta`` (chain rule).
"""

from __future__ import annotations

import jax.numpy as jnp
from jaxtyping import Array, Float

from dpp.encoding import encode_soft, pool, soft_assignment, squared_distances
from dpp.likelihood import NO_PRIOR, BetaPrior, Params, predict_proba
from dpp.sets import RaggedSets


def grad_z(
    z: Float[Array, "N K"], theta: Float[Array, "K C"], labels: Float[Array, "N C"]
) -> Float[Array, "N K"]:
    r"""Eq. (18), the gradient of a set's log-likelihood with respect to its representation.

    .. math:: g^{(n)} = \nabla_{z^n} \mathcal{L}^n = \sum_j (\tilde P_{nj} - \sigma^j) \theta^j

    Args:
        z: ``[N, K]`` representations.
        theta: ``[K, C]`` weights.
        labels: ``[N, C]`` soft labels.

    Returns:
        ``[N, K]`` gradient of each set's (unweighted) log-likelihood with respect to its ``z``.
    """
    return (labels - predict_proba(z, theta)) @ theta.T


def grad_theta(
    z: Float[Array, "N K"],
    theta: Float[Array, "K C"],
    labels: Float[Array, "N C"],
    weights: Float[Array, " N"],
    l2: float,
) -> Float[Array, "K C"]:
    r"""Eq. (19) with weights and the ridge: the gradient of ``L`` with respect to ``Theta``.

    .. math::

        \nabla_{\theta_i} \mathcal{L} = \sum_n w_n (\tilde P_{ni} - \sigma^i) z^n
            - 2\lambda\theta_i

    Args:
        z: ``[N, K]`` representations.
        theta: ``[K, C]`` weights.
        labels: ``[N, C]`` soft labels.
        weights: ``[N]`` per-set weights.
        l2: ridge ``lambda``.

    Returns:
        ``[K, C]`` gradient of ``L`` with respect to ``Theta``.
    """
    residual = weights[:, None] * (labels - predict_proba(z, theta))
    return z.T @ residual - 2.0 * l2 * theta


def _per_prototype_beta(log_beta: Float[Array, "*B"], num_prototypes: int) -> Float[Array, " K"]:
    return jnp.broadcast_to(jnp.exp(log_beta), (num_prototypes,))


def jacobian_z_mu(
    sets: RaggedSets, mu: Float[Array, "K D"], log_beta: Float[Array, "*B"]
) -> Float[Array, "N K L D"]:
    r"""Eq. (13): :math:`G^{(n,\ell)}_{k,d} = \partial z_k^n / \partial \mu_{\ell d}`.

    .. math::

        \frac{\partial z_k^n}{\partial \mu_\ell} = \frac{2\beta_\ell}{M_n} \sum_{x \in S^n}
            f_k(x) (\delta_{k\ell} - f_\ell(x)) (x - \mu_\ell)

    Args:
        sets: ``N`` sets.
        mu: ``[K, D]`` prototypes.
        log_beta: ``[]`` or ``[K]``.

    Returns:
        ``[N, K, K, D]`` array indexed ``[n, k, l, d]``.
    """
    k, d = mu.shape
    f = soft_assignment(sets.vectors, mu, log_beta)  # [U, K]
    beta = _per_prototype_beta(log_beta, k)
    diff = sets.vectors[:, None, :] - mu[None, :, :]  # [U, L, D]
    mix = f[:, :, None] * (jnp.eye(k, dtype=f.dtype)[None] - f[:, None, :])  # [U, K, L]
    per_vector = 2.0 * beta[None, None, :, None] * mix[..., None] * diff[:, None, :, :]
    return pool(per_vector.reshape(f.shape[0], -1), sets).reshape(sets.num_sets, k, k, d)


def jacobian_z_beta(
    sets: RaggedSets, mu: Float[Array, "K D"], log_beta: Float[Array, "*B"]
) -> Float[Array, "N K *L"]:
    r"""Eq. (15): derivative of ``z`` with respect to the inverse temperature.

    With a shared ``beta`` the result is ``[N, K]``; with one per prototype it is ``[N, K, K]``,
    indexed ``[n, k, l]`` for ``dz_k / dbeta_l``.

    .. math::

        \frac{\partial z_k^n}{\partial \beta} = \frac{1}{M_n} \sum_{x \in S^n} f_k(x)
            \Big(\sum_\ell \|\mu_\ell - x\|^2 f_\ell(x) - \|\mu_k - x\|^2\Big)

    Args:
        sets: ``N`` sets.
        mu: ``[K, D]`` prototypes.
        log_beta: ``[]`` or ``[K]``.

    Returns:
        ``[N, K]`` if ``log_beta`` is a scalar, else ``[N, K, K]``.
    """
    k = mu.shape[0]
    f = soft_assignment(sets.vectors, mu, log_beta)  # [U, K]
    dist = squared_distances(sets.vectors, mu)  # [U, K]
    per_vector = f[:, :, None] * (
        (f * dist)[:, None, :] - jnp.eye(k, dtype=f.dtype)[None] * dist[:, :, None]
    )  # [U, K, L]
    jac = pool(per_vector.reshape(f.shape[0], -1), sets).reshape(sets.num_sets, k, k)
    return jac.sum(axis=2) if jnp.ndim(log_beta) == 0 else jac


def grad_mu(params: Params, sets: RaggedSets) -> Float[Array, "K D"]:
    r"""Eqs. (7), (8), (11): the gradient of ``L`` with respect to the prototypes.

    .. math:: \nabla_{\mu_\ell} \mathcal{L} = \sum_n w_n (G^{(n,\ell)})^T g^{(n)}

    Args:
        params: current parameters.
        sets: training sets (weights used).

    Returns:
        ``[K, D]`` gradient of ``L`` (the ridge and the beta prior do not depend on ``mu``).
    """
    z = encode_soft(sets, params.mu, params.log_beta)
    g = sets.weights[:, None] * grad_z(z, params.theta, sets.labels)
    return jnp.einsum("nk,nkld->ld", g, jacobian_z_mu(sets, params.mu, params.log_beta))


def grad_log_beta(
    params: Params, sets: RaggedSets, prior: BetaPrior = NO_PRIOR
) -> Float[Array, "*B"]:
    r"""Eqs. (7), (14), (15) by the chain rule, plus the prior's gradient.

    .. math::

        \frac{\partial \mathcal{L}}{\partial \log\beta} = \beta \sum_n w_n (g^{(n)})^T
            \frac{\partial z^n}{\partial \beta}
            + \frac{\partial \log p(\log\beta)}{\partial \log\beta}

    Args:
        params: current parameters.
        sets: training sets.
        prior: the prior on ``log beta`` included in ``L``.

    Returns:
        Same shape as ``params.log_beta``.
    """
    z = encode_soft(sets, params.mu, params.log_beta)
    g = sets.weights[:, None] * grad_z(z, params.theta, sets.labels)
    jac = jacobian_z_beta(sets, params.mu, params.log_beta)
    beta = jnp.exp(params.log_beta)
    if jnp.ndim(params.log_beta) == 0:
        dl_dbeta = jnp.sum(g * jac)
    else:
        dl_dbeta = jnp.einsum("nk,nkl->l", g, jac)
    return beta * dl_dbeta + _prior_grad(prior, params.log_beta)


def _prior_grad(prior: BetaPrior, log_beta: Float[Array, "*B"]) -> Float[Array, "*B"]:
    if prior.kind == "lognormal":
        return -(log_beta - prior.loc) / prior.scale**2
    if prior.kind == "gamma":
        return prior.loc - prior.scale * jnp.exp(log_beta)
    return jnp.zeros_like(log_beta)
