"""Solvers: Theta-step backends against scikit-learn, monotone coordinate ascent, mini-batches."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import random_sets
from sklearn.linear_model import LogisticRegression

from dpp.datasets.synthetic import make_synthetic
from dpp.init import init_log_beta, kmeans_centres
from dpp.likelihood import BetaPrior, Params, classifier_objective, objective
from dpp.model import fit_dpp
from dpp.solvers import AdamSettings, FitSettings, LBFGSSettings, coordinate_ascent
from dpp.solvers.coordinate_ascent import fit_classifier
from dpp.solvers.minibatch import batch_capacity, epoch_order, make_batch


@pytest.fixture(scope="module")
def small_problem():
    data = make_synthetic(60, 2, 12, seed=3)
    train = data.sets.subset(np.arange(0, 60, 2))
    return train, kmeans_centres(np.asarray(train.vectors), 3, seed=0)


def test_theta_step_backends_agree_with_sklearn(rng, x64):
    """The convex Theta-step: optax L-BFGS, jaxopt L-BFGS and jaxopt BFGS reach the optimum of
    multinomial logistic regression without intercept, C = 1 / (2 lambda)."""
    n, k, c, l2 = 80, 5, 3, 0.05
    z = rng.dirichlet(np.ones(k), size=n)
    y = np.argmax(z @ rng.normal(size=(k, c)) * 4 + rng.gumbel(size=(n, c)), axis=1)
    labels = np.eye(c)[y]
    reference = LogisticRegression(C=1 / (2 * l2), fit_intercept=False, tol=1e-12, max_iter=10000)
    theta_sklearn = reference.fit(z, y).coef_.T  # [K, C]
    args = (jnp.asarray(z), jnp.asarray(labels), jnp.ones(n), jnp.zeros((k, c)), l2)
    for backend in ("lbfgs_optax", "lbfgs_jaxopt", "bfgs_jaxopt"):
        solver = LBFGSSettings(backend=backend, max_iter=1000, tol=1e-10)
        theta = fit_classifier(*args, solver=solver)
        np.testing.assert_allclose(np.asarray(theta), theta_sklearn, atol=1e-6, err_msg=backend)
        grad = jax.grad(classifier_objective)(theta, *args[:3], l2)
        assert float(jnp.max(jnp.abs(grad))) < 1e-7


@pytest.mark.parametrize(
    "solver, per_prototype, prior",
    [
        (LBFGSSettings(max_iter=20), False, BetaPrior()),
        pytest.param(  # the other backend, in the extended tier (about 10 s)
            LBFGSSettings(backend="lbfgs_jaxopt", max_iter=20),
            True,
            BetaPrior("lognormal", 0.0, 3.0),
            marks=pytest.mark.extended,
        ),
        (
            AdamSettings(learning_rate=0.05, batch_size=8, epochs=2),
            False,
            BetaPrior("gamma", 2.0, 0.1),
        ),
    ],
    ids=["optax", "jaxopt-per-prototype", "adam"],
)
def test_coordinate_ascent_never_decreases_L(small_problem, solver, per_prototype, prior):
    train, centres = small_problem
    settings = FitSettings(
        l2=1e-2,
        prior=prior,
        max_rounds=6,
        tol=0.0,
        prototype_solver=solver,
        theta_solver=LBFGSSettings(max_iter=100),
    )
    model = fit_dpp(train, centres, settings, jax.random.key(0), per_prototype_beta=per_prototype)
    history = model.history
    assert len(history) >= 2
    # the accept rule makes the history monotone by construction; what can fail is progress:
    # (mu, beta)-steps were taken (not only Theta-steps) and L rose over the k-means start
    assert sum(model.report.prototypes.steps["prototype_accepted"]) >= 1
    assert history[-1] > history[0]
    assert np.shape(model.log_beta) == ((3,) if per_prototype else ())
    # the history is L itself, evaluated in the model's internal units (dpp.units)
    internal_prior = prior.in_internal_units(model.normalizer.log_beta_offset())
    final = objective(model.params, model.internal_sets(train), 1e-2, internal_prior)
    np.testing.assert_allclose(float(final), history[-1], rtol=1e-5)


def test_coordinate_ascent_raises_L_over_kmeans_start(small_problem):
    train, centres = small_problem
    settings = FitSettings(l2=1e-2, max_rounds=10)
    params0 = Params(
        jnp.asarray(centres, jnp.float32),
        init_log_beta(np.asarray(train.vectors), centres),
        jnp.zeros((3, 2)),
    )
    result = coordinate_ascent(params0, train, settings, jax.random.key(0))
    history = np.asarray(result.history)[: int(result.num_rounds) + 1]
    assert np.all(np.isfinite(history))
    assert history[-1] > history[0] + 1e-3 * abs(history[0])


def test_joint_mode_does_not_decrease_L(small_problem):
    train, centres = small_problem
    model = fit_dpp(train, centres, FitSettings(l2=1e-2), jax.random.key(0), mode="joint")
    assert model.history.shape == (model.report.rounds + 1,)
    assert model.history[-1] > model.history[0]
    with pytest.raises(ValueError, match="mode must be one of coordinate_ascent, joint"):
        fit_dpp(train, centres, FitSettings(), jax.random.key(0), mode="anneal")


@pytest.mark.parametrize("batch_size", [1, pytest.param(4, marks=pytest.mark.extended), 7])
def test_minibatches_partition_the_sets(rng, x64, batch_size):
    """Over one epoch the batches hold every set exactly once: their data terms sum to the
    full-data term, and each scale is N / (real sets in the batch)."""
    sets = random_sets(rng, num_sets=10, dim=2, num_classes=3, soft=True, weighted=True)
    z_theta = jnp.asarray(rng.normal(size=(4, 3)))
    mu, log_beta = jnp.asarray(rng.normal(size=(4, 2))), jnp.asarray(0.1)
    full = objective(Params(mu, log_beta, z_theta), sets, 0.0)
    cap = batch_capacity(sets, batch_size)
    order = epoch_order(sets, jax.random.permutation(jax.random.key(1), 10), batch_size, cap)
    total, scales = 0.0, []
    for b in range(-(-10 // batch_size)):
        batch, scale = make_batch(sets, order, jnp.int32(b), batch_size, cap)
        total += objective(Params(mu, log_beta, z_theta), batch, 0.0)
        scales.append(float(scale))
    np.testing.assert_allclose(float(total), float(full), rtol=1e-12)
    expected = [10 / min(batch_size, 10 - b * batch_size) for b in range(len(scales))]
    np.testing.assert_allclose(scales, expected)


def test_minibatch_steps_are_adam_steps_and_skip_padding_batches():
    """The one loop of optimizer steps: each step is optax's update on the batch's gradient
    (checked against the steps written out), a batch of zero weight leaves everything as it
    is with ``skip_empty``, and what ``batch_of`` carries reaches the next step."""
    import optax

    from dpp.networks.training import Bucket
    from dpp.solvers.minibatch import minibatch_steps

    def loss(x, batch, offset):
        return jnp.sum(batch.weights * jnp.sum((x[None, :] - batch.x - offset) ** 2, axis=1))

    rows = jnp.arange(6, dtype=jnp.float32)[:, None] * jnp.ones((6, 2))
    weights = jnp.array([1.0, 2.0, 0.0, 0.0, 1.0, 0.5])  # the second batch is padding
    data = Bucket(rows, jnp.ones((6, 1), bool), jnp.zeros((6, 1)), weights)
    optimizer = optax.adam(0.1)
    x0 = jnp.array([0.5, -1.0])

    def batch_of(step, offset):
        sl = jax.tree.map(lambda a: jax.lax.dynamic_slice_in_dim(a, 2 * step, 2), data)
        return (sl, offset), offset + 1.0

    for skip in (False, True):
        x, state, carried = minibatch_steps(
            loss, optimizer, x0, optimizer.init(x0), jnp.arange(3), batch_of, 0.0, skip
        )
        want, want_state = x0, optimizer.init(x0)
        for step in range(3):
            batch = jax.tree.map(lambda a, s=step: a[2 * s : 2 * s + 2], data)
            if skip and float(jnp.sum(batch.weights)) == 0:
                continue  # Adam's moments and count would move on a zero gradient
            grads = jax.grad(loss)(want, batch, float(step))
            updates, want_state = optimizer.update(grads, want_state, want)
            want = optax.apply_updates(want, updates)
        np.testing.assert_allclose(np.asarray(x), np.asarray(want), rtol=1e-6)
        assert float(carried) == 3.0
        assert int(state[0].count) == (2 if skip else 3)


def test_adam_settings_need_capacity(small_problem):
    train, _ = small_problem
    from dpp.solvers.minibatch import minimize_minibatch

    with pytest.raises(ValueError, match="capacity is not set"):
        minimize_minibatch(
            lambda x, b, s: 0.0, jnp.zeros(2), train, AdamSettings(), jax.random.key(0)
        )
    assert (
        dataclasses.replace(AdamSettings(batch_size=4), capacity=batch_capacity(train, 4)).capacity
        >= 4
    )


@pytest.mark.extended  # 6 s
def test_L_recomputed_after_every_round_is_the_history_and_never_falls():
    """Issue 46: not only the first and last values. The fit stopped after each round (one
    program, the round cap traced) gives parameters whose L, recomputed from them, is the
    history's value at that round; and those values never fall."""
    from dpp.datasets.generated import make_generated

    train = make_generated(num_sets=40, dim=4, min_size=2, max_size=10, seed=0).sets
    centres = kmeans_centres(np.asarray(train.vectors), 3, seed=0)
    settings = FitSettings(
        l2=1e-2,
        max_rounds=4,
        tol=0.0,
        prototype_solver=LBFGSSettings(max_iter=5),  # short steps: every round moves
        theta_solver=LBFGSSettings(max_iter=100),
    )
    full = fit_dpp(train, centres, settings, jax.random.key(0))
    assert full.report.rounds == 4
    recomputed = []
    for r in range(5):
        model = fit_dpp(train, centres, settings, jax.random.key(0), round_cap=r)
        internal = model.internal_sets(train)
        recomputed.append(float(objective(model.params, internal, 1e-2, settings.prior)))
        np.testing.assert_allclose(model.history, full.history[: r + 1], rtol=1e-6)
    np.testing.assert_allclose(recomputed, full.history, rtol=1e-5)
    assert np.all(np.diff(recomputed) >= -1e-5 * np.abs(recomputed[:-1]))
    assert np.all(np.diff(recomputed) > 0)  # every round moved L here: the test is not vacuous


def test_the_accept_rule_keeps_the_current_point_against_a_worse_or_nan_candidate(small_problem):
    """A step is kept only if it raises a finite L: a worse candidate, a NaN one and an equal
    one leave the parameters and the value as they were; a better one is taken."""
    from dpp.solvers.coordinate_ascent import accept_if_higher

    train, centres = small_problem
    settings = FitSettings(l2=1e-2)
    log_beta = init_log_beta(np.asarray(train.vectors), centres)
    current = Params(jnp.asarray(centres, jnp.float32), log_beta, jnp.zeros((3, 2)))
    value = objective(current, train, settings.l2, settings.prior)
    theta = jnp.asarray(np.random.default_rng(0).normal(size=(3, 2)) * 20.0, jnp.float32)
    worse = current._replace(theta=theta)
    worse_value = objective(worse, train, settings.l2, settings.prior)
    nan = current._replace(mu=current.mu.at[0, 0].set(jnp.nan))
    assert float(worse_value) < float(value)
    for candidate in (worse, nan, current):
        params, kept, accepted = accept_if_higher(candidate, current, value, train, settings)
        assert not bool(accepted) and float(kept) == float(value)
        for a, b in zip(jax.tree.leaves(params), jax.tree.leaves(current), strict=True):
            np.testing.assert_array_equal(a, b)
    params, kept, accepted = accept_if_higher(current, worse, worse_value, train, settings)
    assert bool(accepted) and float(kept) == float(value)
    np.testing.assert_array_equal(params.theta, current.theta)
