"""Issue 8, observations 1-4: fits that are right or loudly wrong, on data nobody tuned for.

Each test reproduces an observed failure (beta running away, NaN predictions, float32
cancellation, a status that lies) and asserts the property that rules it out.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dpp.baselines.standard import fit_standard
from dpp.datasets.generated import make_generated
from dpp.datasets.synthetic import make_synthetic
from dpp.encoding import LOG_BETA_MAX, encode_soft, soft_assignment, squared_distances
from dpp.errors import NonFiniteResultError
from dpp.experiment.splits import split_indices
from dpp.init import init_log_beta, kmeans_centres
from dpp.likelihood import Params, objective
from dpp.metrics import evaluate
from dpp.model import FitReport, FittedModel, fit_dpp
from dpp.model.fitted import SATURATED_CODE, SATURATED_FRACTION
from dpp.sets import RaggedSets, one_hot
from dpp.solvers.coordinate_ascent import FitSettings, prototype_step, theta_step
from dpp.solvers.lbfgs import LBFGSSettings
from dpp.units import Affine, Normalizer, pseudo_inverse

#: The CLI's solver defaults (configs/optimizer/lbfgs_optax.yaml, configs/model/dpp.yaml).
CLI = dict(max_rounds=30, tol=1e-5, theta_solver=LBFGSSettings(max_iter=500))


def _halves(sets: RaggedSets, seed: int = 0):
    order = np.random.default_rng(seed).permutation(sets.num_sets)
    half = sets.num_sets // 2
    return sets.subset(np.sort(order[:half])), sets.subset(np.sort(order[half:]))


@pytest.fixture(scope="module")
def mil_regime():
    """Multiple-instance regime of observation 1: 230 dimensions, bags of 2-13, 180 training
    bags, K = 16 k-means centres."""
    data = make_generated(num_sets=200, dim=230, min_size=2, max_size=13, seed=3)
    order = np.random.default_rng(3).permutation(200)
    train = data.sets.subset(np.sort(order[:180]))
    return train, kmeans_centres(np.asarray(train.vectors), 16, seed=3)


# ------------------------------------------------------------------ observation 1: beta runaway
@pytest.mark.parametrize("l2", [0.1, pytest.param(1.0, marks=pytest.mark.slow)])
def test_beta_does_not_run_away_in_high_dimensions(mil_regime, l2):
    """Was: beta ended 1e3 to 1e8 times beta_0 after 2 rounds, reported converged, at an L far
    below the standard prototype's. Now beta stays within 1e4 of beta_0, L is at least the
    standard prototype's from the same centres and lambda, and a saturated fit says so."""
    train, centres = mil_regime
    model = fit_dpp(train, centres, FitSettings(l2=l2, **CLI), jax.random.key(0))
    standard = fit_standard(train, centres, l2, CLI["theta_solver"])
    assert model.report.prototypes.beta / model.report.prototypes.beta_init < 1e4
    assert model.history[-1] >= standard.history[-1]
    saturated = model.report.prototypes.saturated_fraction >= SATURATED_FRACTION
    assert (model.report.status == "saturated") == saturated, model.report.reason
    assert not (saturated and model.report.converged)


def test_first_step_is_balanced_and_bounded(mil_regime):
    """The cause of observation 1: at the k-means start the log-beta gradient dwarfs the
    prototypes' (230 dimensions), so a quasi-Newton step is almost pure log beta. In the step's
    coordinates the two are commensurate, and one step moves beta by at most its limit."""
    train, centres = mil_regime
    settings = FitSettings(l2=0.1, **CLI)
    mu = jnp.asarray(centres, jnp.float32)
    params = jax.jit(theta_step, static_argnames="settings")(
        Params(mu, init_log_beta(np.asarray(train.vectors), centres), jnp.zeros((16, 2))),
        train,
        settings,
    )
    grads = jax.grad(lambda p: -objective(p, train, 0.1))(params)
    raw_ratio = abs(float(grads.log_beta)) / float(jnp.linalg.norm(grads.mu))
    whitened = float(jnp.linalg.norm(grads.mu)) / float(jnp.exp(0.5 * params.log_beta))
    assert raw_ratio > 3  # the imbalance that made the first step pure log beta
    assert abs(float(grads.log_beta)) / whitened < 3  # balanced in the step's coordinates
    step = jax.jit(prototype_step, static_argnames="settings")
    stepped = step(params, train, settings, jax.random.key(0))
    change = abs(float(stepped.log_beta - params.log_beta))
    assert change <= np.log(settings.beta_step_limit) + 1e-5


@pytest.mark.parametrize(
    "backend", [pytest.param("lbfgs_jaxopt", marks=pytest.mark.slow), "bfgs_jaxopt"]
)
def test_every_backend_keeps_beta_bounded_per_step(backend):
    """The step limit holds for jaxopt's backends too (optax is covered above, Adam in
    ``test_runs.py``)."""
    data = make_generated(num_sets=60, dim=20, min_size=2, max_size=13, seed=0)
    train, _ = _halves(data.sets)
    centres = kmeans_centres(np.asarray(train.vectors), 4, seed=0)
    solver = LBFGSSettings(backend=backend, max_iter=20)
    settings = FitSettings(l2=1.0, max_rounds=3, prototype_solver=solver, theta_solver=solver)
    model = fit_dpp(train, centres, settings, jax.random.key(0))
    rounds = model.report.rounds
    assert (
        model.report.prototypes.beta / model.report.prototypes.beta_init
        <= settings.beta_step_limit**rounds * 1.001
    )


# ------------------------------------------------------------------ observation 2: NaN predictions
def test_far_vectors_and_huge_beta_give_finite_one_hot_codes():
    """Was: beta * d^2 = inf gave NaN rows (argmax NaN = class 0). Now finite for every beta."""
    mu = jnp.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    x = jnp.array([[1e4, 0.0], [0.9, 0.1], [0.0, 0.0], [1e18, -3e17]])
    for log_beta in (jnp.array(0.0), jnp.array(200.0), jnp.array([1.0, 100.0, 500.0])):
        f = soft_assignment(x, mu, log_beta)
        assert bool(jnp.all(jnp.isfinite(f)))
        np.testing.assert_allclose(np.asarray(jnp.sum(f, axis=1)), 1.0, rtol=1e-6)
    f = soft_assignment(x[:3], mu, jnp.array(200.0))  # (the 4th row's distances tie in float32)
    np.testing.assert_array_equal(np.argmax(np.asarray(f), axis=1), [1, 1, 0])
    # gradients at a capped beta stay finite (a vector at 1e18, whose distances tie in float32,
    # has a true gradient beyond float32's range: the forward pass above is what is guaranteed)
    sets = RaggedSets.from_list([np.asarray(x[:2]), np.asarray(x[2:3])], one_hot([0, 1], 2))
    grads = jax.grad(lambda m, b: jnp.sum(encode_soft(sets, m, b)[:, 0]), argnums=(0, 1))(
        mu, jnp.array(LOG_BETA_MAX + 10.0)
    )
    assert all(bool(jnp.all(jnp.isfinite(g))) for g in grads)


def test_evaluate_refuses_nan_predictions():
    log_probs = np.log(np.array([[0.2, 0.8], [np.nan, np.nan]]))
    with pytest.raises(NonFiniteResultError, match="1 of 2 sets"):
        evaluate(log_probs, np.eye(2))


@pytest.mark.parametrize("scale", [2.0**-66, 2.0**20], ids=["1e-20", "1e6"])
def test_extreme_feature_scales_give_the_unit_scale_fit(scale):
    """Was: features scaled by 1e-20 gave NaN probabilities (squared distances underflow).
    DPP is invariant to an isotropic rescaling, and so is the fit: with a power-of-two scale
    (about 1.4e-20 and 1e6, exact in binary floating point) it is the same fit to the bit."""
    data = make_generated(num_sets=60, dim=5, max_size=8, seed=4)
    base_train, base_test = _halves(data.sets)
    train, test = _halves(data.sets.with_vectors(np.asarray(data.sets.vectors) * scale))
    centres = kmeans_centres(np.asarray(base_train.vectors), 4, seed=0)
    settings = FitSettings(l2=1e-2, max_rounds=5, theta_solver=LBFGSSettings(max_iter=200))
    reference = fit_dpp(base_train, centres, settings, jax.random.key(0))
    model = fit_dpp(train, centres * scale, settings, jax.random.key(0))
    probs = np.exp(np.asarray(model.log_predictive(test)))
    assert np.all(np.isfinite(probs))
    expected = np.exp(np.asarray(reference.log_predictive(base_test)))
    np.testing.assert_allclose(probs, expected, atol=1e-6)
    np.testing.assert_allclose(model.beta * scale**2, reference.beta, rtol=1e-5)


# ------------------------------------------------------------------ observation 3: cancellation
def test_squared_distances_keep_their_digits_far_from_the_origin():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(50, 4))
    mu = rng.normal(size=(3, 4))
    exact = ((x[:, None, :] - mu[None]) ** 2).sum(-1)
    offset = 1e6
    d2 = squared_distances(
        jnp.asarray(x + offset, jnp.float32), jnp.asarray(mu + offset, jnp.float32)
    )
    # float32 holds 1e6 + x to 0.0625, so the differences themselves carry about that error
    np.testing.assert_allclose(np.asarray(d2), exact, atol=0.5, rtol=0.1)


def test_offset_features_classify_like_centred_ones():
    """Was: 1e6 added to every feature gave 48 % accuracy, reported converged; 100 % centred."""
    accuracy = {}
    for offset in (0.0, 1e6):
        data = make_generated(num_sets=80, dim=4, max_size=20, offset=offset, seed=2)
        train, test = _halves(data.sets)
        centres = kmeans_centres(np.asarray(train.vectors), 4, seed=0)
        model = fit_dpp(train, centres, FitSettings(l2=1e-2, max_rounds=5), jax.random.key(0))
        accuracy[offset] = evaluate(model.log_predictive(test), np.asarray(test.labels))["accuracy"]
    assert accuracy[0.0] >= 0.9
    assert abs(accuracy[1e6] - accuracy[0.0]) <= 0.05


def test_normalizer_is_an_exact_reparameterisation(x64):
    rng = np.random.default_rng(1)
    sets = RaggedSets.from_list(
        [rng.normal(size=(m, 3)) * 7 + 40 for m in (2, 5, 1)],
        one_hot([0, 1, 1], 2),
        dtype=jnp.float64,
    )
    norm = Normalizer.fit(np.asarray(sets.vectors))
    mu = rng.normal(size=(4, 3)) * 7 + 40
    log_beta = jnp.array(-3.0)
    z = encode_soft(sets, jnp.asarray(mu), log_beta)
    z_internal = encode_soft(
        norm.sets(sets), jnp.asarray(norm.vectors(mu)), log_beta + norm.log_beta_offset()
    )
    np.testing.assert_allclose(np.asarray(z_internal), np.asarray(z), rtol=1e-10)
    np.testing.assert_allclose(norm.inverse_vectors(norm.vectors(mu)), mu, rtol=1e-12)


def test_fit_sets_is_fit_then_sets_to_the_bit():
    """The one-copy path of a fit gives the map and the mapped vectors of the two-step one."""
    rng = np.random.default_rng(2)
    for scale, offset in ((1.0, 0.0), (1e-3, 5e4), (300.0, -7.0)):
        sets = RaggedSets.from_list(
            [rng.standard_t(3, size=(m, 4)) * scale + offset for m in (3, 9, 1, 30)],
            one_hot([0, 1, 1, 0], 2),
        )
        two_step = Normalizer.fit(np.asarray(sets.vectors))
        norm, mapped = Normalizer.fit_sets(sets)
        np.testing.assert_array_equal(norm.shift, two_step.shift)
        assert norm.scale == two_step.scale
        x = np.asarray(sets.vectors, np.float64)  # the plain formula, temporaries and all
        np.testing.assert_array_equal(norm.shift, x.mean(axis=0))
        assert norm.scale == float(np.sqrt(np.mean(np.square(x - x.mean(axis=0)))))
        expected = np.asarray(two_step.sets(sets).vectors)
        np.testing.assert_array_equal(np.asarray(mapped.vectors), expected)
    constant = RaggedSets.from_list([np.ones((3, 2)), np.ones((2, 2))], one_hot([0, 1], 2))
    assert Normalizer.fit_sets(constant)[0].scale == 1.0


def test_the_affine_map_is_its_matrix_product_to_the_bit():
    """Standardisation takes ``x * d`` for ``x @ diag(d)``: the same values; PCA the product."""
    rng = np.random.default_rng(4)
    x = (rng.standard_t(3, size=(500, 12)) * rng.uniform(1e-3, 1e3, 12) - 40).astype(np.float32)
    for standardize, pca in ((True, None), (True, 4), (False, 3)):
        affine = Affine.fit(x, standardize, pca)
        np.testing.assert_array_equal(
            affine(x), (np.asarray(x, np.float64) - affine.shift) @ affine.matrix
        )


def test_the_inverse_map_is_the_plain_pseudo_inverse_computed_once_per_matrix():
    """Issue 83 (web_recommendation_1's 5,863 features: an SVD a minute, in every fit of a
    selection): equal maps share one pseudo-inverse, the plain ``pinv``'s values to the bit."""
    rng = np.random.default_rng(5)
    x = (rng.normal(size=(300, 70)) * rng.uniform(0.1, 10, 70) + 3).astype(np.float32)
    mu = rng.normal(size=(4, 70))
    for standardize, pca in ((True, None), (True, 5), (False, 6)):
        first, again = Affine.fit(x, standardize, pca), Affine.fit(x.copy(), standardize, pca)
        assert first is not again
        z = first(mu)
        plain = z @ np.linalg.pinv(first.matrix) + first.shift
        np.testing.assert_array_equal(first.inverse(z), plain)
        assert pseudo_inverse(first.matrix) is pseudo_inverse(again.matrix)
        assert not pseudo_inverse(first.matrix).flags.writeable  # shared: nobody may edit it
    other = Affine.fit(x * 2.0, True, None)  # another matrix (half the scale) gets its own
    assert pseudo_inverse(other.matrix) is not pseudo_inverse(first.matrix)


# ------------------------------------------------------------------ observation 4: honest stops
def _demo_trial(trial: int):
    data = make_synthetic(100, 1, 20, seed=0)
    train_idx, _ = split_indices(
        np.asarray(data.sets.labels), kind="stratified", seed=trial, train_fraction=0.2
    )
    train = data.sets.subset(train_idx)
    return train, kmeans_centres(np.asarray(train.vectors), 2, seed=trial)


def test_converged_coordinate_ascent_ends_at_a_stationary_point():
    """Observation 4 asked whether coordinate ascent stops short of the joint fit. When it
    reports ``converged`` the gradient of L in every parameter is ~0: a stationary point (it
    can be another local optimum than the joint fit's, not a premature stop). Trial 0 ends
    ``saturated`` (99.1 % one-hot codes, on the 99 % line), so three trials are fitted and every
    ``converged`` one is checked."""
    statuses = []
    for trial in range(3):
        train, centres = _demo_trial(trial)
        model = fit_dpp(train, centres, FitSettings(l2=1e-2, **CLI), jax.random.key(0))
        statuses.append(model.report.status)
        if statuses[-1] != "converged":
            continue
        internal = model.internal_sets(train)
        grads = jax.grad(lambda p: -objective(p, internal, 1e-2) / train.num_sets)(model.params)  # noqa: B023
        whitened_mu = np.asarray(grads.mu) / np.sqrt(np.exp(float(model.log_beta)))
        assert np.linalg.norm(whitened_mu) < 1e-4
        assert abs(float(grads.log_beta)) < 1e-4
        assert np.linalg.norm(np.asarray(grads.theta)) < 1e-4
    assert "converged" in statuses, statuses


def test_round_cap_is_reported_as_max_rounds_not_converged():
    train, centres = _demo_trial(0)
    model = fit_dpp(train, centres, FitSettings(l2=1e-2, max_rounds=1), jax.random.key(0))
    assert model.report.status == "max_rounds" and model.report.converged is False
    assert "round cap" in model.report.reason


def test_early_stopping_refits_for_the_best_validation_round():
    data = make_generated(num_sets=80, dim=3, max_size=10, seed=5)
    train, _ = _halves(data.sets)
    centres = kmeans_centres(np.asarray(train.vectors), 3, seed=0)
    settings = FitSettings(l2=1e-2, max_rounds=5, tol=0.0, patience=2)
    model = fit_dpp(train, centres, settings, jax.random.key(0), validation_fraction=0.25)
    early = model.report.early_stopping
    history = np.array(early.validation_history, dtype=float)
    assert early.validation_sets == 10
    assert early.best == int(np.argmax(history))  # the first best round
    assert early.monitored <= early.best + settings.patience
    assert model.report.rounds <= early.best
    # here the held-out log-likelihood is best at the k-means start (round 0: -0.628, then
    # -0.678 twice): the refit stops there, unsaturated, and says it was stopped early
    assert (early.best, early.monitored) == (0, 2)
    assert model.report.prototypes.saturated_fraction < SATURATED_FRACTION
    assert model.report.status == "early_stopped", model.report.reason


def test_fitted_model_names_both_dimensions_on_mismatch():
    train, centres = _demo_trial(1)
    model = fit_dpp(train, centres, FitSettings(max_rounds=1), jax.random.key(0))
    other = RaggedSets.from_list([np.zeros((2, 3))], one_hot([0], 2))
    with pytest.raises(ValueError, match="D = 3 .* D = 2"):
        model.log_predictive(other)


def test_non_finite_parameters_fail_loudly():
    model = FittedModel(
        "broken", jnp.zeros((2, 2)), jnp.array(0.0), jnp.full((2, 2), jnp.nan), np.zeros(0),
        FitReport("broken"),
    )  # fmt: skip
    train, _ = _demo_trial(0)
    log_probs = np.asarray(model.log_predictive(train))
    with pytest.raises(NonFiniteResultError):
        evaluate(log_probs, np.asarray(train.labels))


@pytest.mark.parametrize("held_out", ["none", "fraction", "sets"])
def test_the_reported_saturated_fraction_is_that_of_the_training_vectors(held_out):
    """Issue 81: the fraction is counted on the fit's padded device layout (no host copy);
    its first rows must be the training vectors, so it equals the fraction over them alone
    in every branch of the fit (the held-out sets after them, or padding only)."""
    data = make_generated(num_sets=48, dim=3, min_size=2, max_size=9, seed=5)
    train, other = data.sets.subset(np.arange(40)), data.sets.subset(np.arange(40, 48))
    centres = kmeans_centres(np.asarray(train.vectors), 4, seed=0)
    held = {"none": {}, "fraction": {"validation_fraction": 0.25}}
    held["sets"] = {"validation_sets": other}
    settings = FitSettings(max_rounds=2)
    model = fit_dpp(  # a large beta: codes near one-hot, a fraction between 0 and 1
        train, centres, settings, jax.random.key(0), beta_scale=30.0, **held[held_out]
    )
    internal = model.normalizer.vectors(np.asarray(train.vectors)).astype(np.float32)
    codes = soft_assignment(jnp.asarray(internal), model.mu, model.log_beta)
    expected = float(np.mean(np.max(np.asarray(codes), axis=1) > SATURATED_CODE))
    assert 0.0 < expected < 1.0
    assert model.report.prototypes.saturated_fraction == pytest.approx(expected, abs=1e-12)
