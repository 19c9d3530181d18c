"""The likelihood with soft labels and weights against a direct NumPy computation."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import random_sets

from dpp.likelihood import BetaPrior, Params, mean_log_likelihood, objective


def _numpy_objective_and_grads(sets, mu, beta, theta, l2):
    """Eqs. (2), (3), (5), (13), (16)-(19) written out with loops over sets and vectors."""
    x, ids = np.asarray(sets.vectors), np.asarray(sets.set_ids)
    labels, weights = np.asarray(sets.labels), np.asarray(sets.weights)
    k = mu.shape[0]
    value = -l2 * np.sum(theta**2)
    grad_mu = np.zeros_like(mu)
    grad_theta = -2 * l2 * theta
    for n in range(sets.num_sets):
        members = x[ids == n]
        codes = []
        for v in members:
            logits = -beta * np.sum((mu - v) ** 2, axis=1)
            e = np.exp(logits - logits.max())
            codes.append(e / e.sum())
        codes = np.array(codes)
        z = codes.mean(axis=0)
        a = theta.T @ z
        sigma = np.exp(a - a.max())
        sigma /= sigma.sum()
        value += weights[n] * np.sum(labels[n] * np.log(sigma))
        g = theta @ (labels[n] - sigma)  # eq. (18)
        grad_theta += weights[n] * np.outer(z, labels[n] - sigma)  # eq. (19)
        for ell in range(k):  # eqs. (11)-(13), with 1/M_n
            for f, v in zip(codes, members, strict=True):
                coeff = sum(g[kk] * f[kk] * ((kk == ell) - f[ell]) for kk in range(k))
                grad_mu[ell] += weights[n] * 2 * beta * coeff * (v - mu[ell]) / len(members)
    return value, grad_mu, grad_theta


@pytest.mark.parametrize("weighted", [False, True])
def test_soft_label_likelihood_and_gradient_match_numpy(rng, x64, weighted):
    sets = random_sets(rng, num_sets=6, dim=2, num_classes=4, soft=True, weighted=weighted)
    mu, beta, theta = rng.normal(size=(3, 2)), 0.7, rng.normal(size=(3, 4))
    params = Params(jnp.asarray(mu), jnp.log(jnp.asarray(beta)), jnp.asarray(theta))
    value, grad_mu, grad_theta = _numpy_objective_and_grads(sets, mu, beta, theta, l2=0.1)
    np.testing.assert_allclose(float(objective(params, sets, 0.1)), value, rtol=1e-12)
    grads = jax.grad(objective)(params, sets, 0.1)
    np.testing.assert_allclose(np.asarray(grads.mu), grad_mu, rtol=1e-10)
    np.testing.assert_allclose(np.asarray(grads.theta), grad_theta, rtol=1e-10)


def test_mean_log_likelihood_is_unweighted_mean_per_set(rng, x64):
    sets = random_sets(rng, num_sets=5, soft=True, weighted=True)
    params = Params(
        jnp.asarray(rng.normal(size=(2, 3))), jnp.asarray(0.0), jnp.asarray(rng.normal(size=(2, 3)))
    )
    unit = sets.astype(jnp.float64)
    unit = type(unit)(unit.vectors, unit.set_ids, unit.labels, jnp.ones(5), None, 5)
    expected = float(objective(params, unit, 0.0)) / 5
    np.testing.assert_allclose(float(mean_log_likelihood(params, sets)), expected, rtol=1e-12)


def test_beta_priors(x64):
    log_beta = jnp.asarray([0.0, 1.0])
    np.testing.assert_allclose(
        float(BetaPrior("lognormal", 1.0, 2.0).log_density(log_beta)), -0.5 * 0.25
    )
    gamma = BetaPrior("gamma", 2.0, 0.5).log_density(log_beta)
    np.testing.assert_allclose(float(gamma), 2.0 * 1.0 - 0.5 * (1 + np.e))
    assert float(BetaPrior().log_density(log_beta)) == 0.0
    with pytest.raises(ValueError, match="unknown beta prior"):
        BetaPrior("cauchy")
    with pytest.raises(ValueError, match="scale must be positive"):
        BetaPrior("lognormal", 0.0, 0.0)
