"""Autodiff gradients of L against the paper's closed forms and central finite differences."""

import closed_form_gradients as gradients
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import random_sets

from dpp.encoding import encode_soft
from dpp.likelihood import BetaPrior, Params, objective

L2 = 0.05
# float64 throughout: the closed forms and autodiff agree to rounding (1e-10 relative); the
# central difference with step 1e-6 has O(h^2) truncation and O(eps / h) rounding, ~1e-8.
RTOL_EXACT, RTOL_FD = 1e-10, 1e-6


def _params(rng, sets, k, per_prototype):
    log_beta = rng.normal(size=k) * 0.3 if per_prototype else np.float64(-0.2)
    return Params(
        mu=jnp.asarray(rng.normal(size=(k, sets.dim))),
        log_beta=jnp.asarray(log_beta),
        theta=jnp.asarray(rng.normal(size=(k, sets.num_classes))),
    )


@pytest.mark.parametrize("per_prototype", [False, True])
@pytest.mark.parametrize(
    "prior", [BetaPrior(), BetaPrior("lognormal", 0.5, 2.0), BetaPrior("gamma", 2.0, 0.5)]
)
def test_autodiff_matches_closed_forms(rng, x64, block_size, per_prototype, prior):
    sets = random_sets(rng, num_sets=8, dim=3, num_classes=3, soft=True, weighted=True)
    params = _params(rng, sets, 4, per_prototype)
    auto = jax.grad(objective)(params, sets, L2, prior)
    np.testing.assert_allclose(
        auto.mu, gradients.grad_mu(params, sets), rtol=RTOL_EXACT, atol=1e-12
    )
    np.testing.assert_allclose(
        auto.log_beta, gradients.grad_log_beta(params, sets, prior), rtol=RTOL_EXACT, atol=1e-12
    )
    z = encode_soft(sets, params.mu, params.log_beta)
    np.testing.assert_allclose(
        auto.theta,
        gradients.grad_theta(z, params.theta, sets.labels, sets.weights, L2),
        rtol=RTOL_EXACT,
        atol=1e-12,
    )


@pytest.mark.parametrize("per_prototype", [False, True])
def test_autodiff_matches_central_differences(rng, x64, per_prototype):
    sets = random_sets(rng, num_sets=6, dim=2, num_classes=3)
    params = _params(rng, sets, 3, per_prototype)
    prior = BetaPrior("lognormal", 0.0, 1.0)
    grad = jax.grad(objective)(params, sets, L2, prior)
    h = 1e-6
    for field in ("mu", "log_beta", "theta"):  # (mean pooling has no parameter)
        direction = jax.tree.map(jnp.zeros_like, params)._replace(
            **{field: jnp.asarray(rng.normal(size=np.shape(getattr(params, field))))}
        )
        plus = jax.tree.map(lambda p, d: p + h * d, params, direction)  # noqa: B023
        minus = jax.tree.map(lambda p, d: p - h * d, params, direction)  # noqa: B023
        fd = (objective(plus, sets, L2, prior) - objective(minus, sets, L2, prior)) / (2 * h)
        leaves = zip(jax.tree.leaves(grad), jax.tree.leaves(direction), strict=True)
        directional = sum(jnp.vdot(g, d) for g, d in leaves)
        np.testing.assert_allclose(float(directional), float(fd), rtol=RTOL_FD, err_msg=field)


def test_jacobians_match_autodiff_of_z(rng, x64):
    """Eqs. (13) and (15), with the 1/M_n of eq. (2), against jax.jacobian of the encoder."""
    sets = random_sets(rng, num_sets=5, dim=2)
    params = _params(rng, sets, 3, per_prototype=False)
    jac_mu = jax.jacobian(lambda m: encode_soft(sets, m, params.log_beta))(
        params.mu
    )  # [N, K, L, D]
    np.testing.assert_allclose(
        gradients.jacobian_z_mu(sets, params.mu, params.log_beta), jac_mu, rtol=1e-10, atol=1e-13
    )
    jac_beta = jax.jacobian(lambda b: encode_soft(sets, params.mu, jnp.log(b)))(
        jnp.exp(params.log_beta)
    )
    np.testing.assert_allclose(
        gradients.jacobian_z_beta(sets, params.mu, params.log_beta),
        jac_beta,
        rtol=1e-10,
        atol=1e-13,
    )


def test_grad_z_is_eq18(rng, x64):
    sets = random_sets(rng, num_sets=4, soft=True)
    params = _params(rng, sets, 3, per_prototype=False)
    z = encode_soft(sets, params.mu, params.log_beta)

    def local(z):
        return jnp.sum(sets.labels * jax.nn.log_softmax(z @ params.theta, axis=1))

    np.testing.assert_allclose(
        gradients.grad_z(z, params.theta, sets.labels), jax.grad(local)(z), rtol=1e-12
    )


def test_single_vector_update_is_lvq_like(rng, x64):
    """Section 3.3: with one vector per set, the gradient for prototype l is a multiple of
    (x - mu_l) whose sign is that of g_l - sum_k g_k f_k(x): the prototype is attracted towards x
    or repelled, as in LVQ (eq. 21; the paper's eq. 22 drops the sum)."""
    x = rng.normal(size=(1, 2))
    sets = random_sets(rng, num_sets=1, dim=2, num_classes=3, max_size=1).with_vectors(x)
    params = _params(rng, sets, 4, per_prototype=False)
    grad_mu = np.asarray(jax.grad(objective)(params, sets, 0.0).mu)
    f = np.asarray(
        jax.nn.softmax(-np.exp(params.log_beta) * np.sum((np.asarray(params.mu) - x) ** 2, axis=1))
    )
    g = np.asarray(
        gradients.grad_z(encode_soft(sets, params.mu, params.log_beta), params.theta, sets.labels)
    )[0]
    for ell in range(4):
        towards = x[0] - np.asarray(params.mu)[ell]
        expected = 2 * np.exp(params.log_beta) * f[ell] * (g[ell] - g @ f) * towards
        np.testing.assert_allclose(grad_mu[ell], expected, rtol=1e-10)
