"""Issue 80: a Gaussian prior on the prototypes around their k-means start (``mu_prior_scale``)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import expected_fit_warnings

import dpp
from dpp.likelihood import Params, objective
from dpp.sets import RaggedSets
from dpp.solvers.coordinate_ascent import (
    FitSettings,
    coordinate_ascent,
    fit_objective,
    prototype_log_prior,
)


def _bags(seed=0, n=40, d=5):
    rng = np.random.default_rng(seed)
    X = [rng.normal(size=(rng.integers(3, 12), d)) + (i % 2) * 0.6 for i in range(n)]
    return X, np.arange(n) % 2


def _fit(scale, rounds=4, seed=0):
    X, y = _bags(seed)
    with expected_fit_warnings("round_cap"):
        return dpp.DPPClassifier(  # one program a kind of prior: the rounds a traced cap
            n_prototypes=3, mu_prior_scale=scale, validation_fraction=0, round_cap=rounds,
            max_rounds=4,
        ).fit(X, y)  # fmt: skip


def test_the_log_prior_and_its_gradient_are_the_gaussians_closed_forms():
    rng = np.random.default_rng(1)
    mu, anchor = (jnp.asarray(rng.normal(size=(4, 3))) for _ in range(2))
    settings = FitSettings(mu_prior_scale=0.7)
    value = prototype_log_prior(mu, anchor, settings)
    np.testing.assert_allclose(value, -0.5 * np.sum((mu - anchor) ** 2) / 0.49, rtol=1e-6)
    grad = jax.grad(prototype_log_prior)(mu, anchor, settings)
    np.testing.assert_allclose(grad, -(mu - anchor) / 0.49, rtol=1e-5, atol=1e-7)
    assert float(prototype_log_prior(mu, anchor, FitSettings())) == 0.0


def test_without_a_prior_the_fit_objective_is_the_likelihoods_objective_to_the_bit():
    X, y = _bags()
    sets = RaggedSets.from_list(X, np.eye(2)[y])
    params = Params(
        jnp.asarray(np.random.default_rng(2).normal(size=(3, 5)), jnp.float32),
        jnp.float32(0.3),
        jnp.zeros((3, 2), jnp.float32),
    )
    settings = FitSettings(l2=0.1)
    assert fit_objective(params, sets, settings, params.mu + 1) == objective(params, sets, 0.1)
    prior = FitSettings(l2=0.1, mu_prior_scale=2.0)
    with pytest.raises(ValueError, match="anchor"):
        fit_objective(params, sets, prior)
    with_prior = fit_objective(params, sets, prior, params.mu + 1)
    np.testing.assert_allclose(with_prior, objective(params, sets, 0.1) - 0.5 * 15 / 4.0, rtol=1e-6)


def test_the_posterior_ascends_round_after_round():
    X, y = _bags(3)
    sets = RaggedSets.from_list(X, np.eye(2)[y])
    rng = np.random.default_rng(3)
    params0 = Params(
        jnp.asarray(rng.normal(size=(3, 5)), jnp.float32), jnp.float32(0.0), jnp.zeros((3, 2))
    )
    settings = FitSettings(l2=1e-2, mu_prior_scale=0.5, max_rounds=6, tol=0.0)
    result = coordinate_ascent(params0, sets, settings, jax.random.key(0))
    history = np.asarray(result.history)[: int(result.num_rounds) + 1]
    assert np.all(np.diff(history) >= 0), history
    end = fit_objective(result.params, sets, settings, params0.mu)
    np.testing.assert_allclose(history[-1], end, rtol=1e-5)


def test_the_scale_runs_from_the_k_means_start_to_the_paper_model():
    start = _fit(None, rounds=0).prototypes_
    tight, loose = (np.sqrt(np.mean((_fit(s).prototypes_ - start) ** 2)) for s in (0.01, 3.0))
    assert tight < 1e-3 < 0.1 < loose, (tight, loose)
    # a scale far beyond the data's spread is the paper's model: one round, since float32
    # rounding (two programs) grows round after round into prototypes far out along directions
    paper, wide = _fit(None, rounds=1), _fit(1e6, rounds=1)
    X, _ = _bags()
    np.testing.assert_allclose(wide.history_, paper.history_, rtol=1e-5)
    np.testing.assert_allclose(wide.prototypes_, paper.prototypes_, rtol=1e-3, atol=1e-4)
    np.testing.assert_allclose(wide.predict_proba(X), paper.predict_proba(X), atol=1e-3)


def test_the_scale_is_checked_and_saved(tmp_path):
    X, y = _bags()
    for bad in (0.0, -1.0, float("nan")):
        with pytest.raises(ValueError, match="mu_prior_scale"):
            dpp.DPPClassifier(mu_prior_scale=bad).fit(X, y)
    model = _fit(0.5, rounds=2)
    loaded = dpp.load(model.save(tmp_path / "prior.npz"))
    assert loaded.mu_prior_scale == 0.5
    np.testing.assert_array_equal(loaded.predict_proba(X[:5]), model.predict_proba(X[:5]))


@pytest.mark.extended  # a selection compiled (16 s): the default tier keeps to 5 minutes
def test_a_selection_chooses_each_members_scale_among_its_candidates_as_its_l2():
    X, y = _bags(4, n=36)
    search = dpp.DPPClassifierCV(
        dpp.DPPClassifier(n_prototypes=3, max_rounds=3),
        l2s=(1e-2,),
        pooling=("mean",),
        embedding=None,
        cv=2,
        max_extensions=0,
        mu_prior_scales=(None, 0.3),
        verbose=False,
    ).fit(X, y)
    table = search.cv_results_
    assert list(table["param_mu_prior_scale"]) == [None, 0.3]
    best = int(np.argmax(table["mean_test_score"]))
    assert search.best_params_["mu_prior_scale"] == table["param_mu_prior_scale"][best]
    assert search.best_score_ == pytest.approx(table["mean_test_score"][best])
    refit = search.estimator.__class__(**search.estimator.get_params())
    refit.set_params(**search.best_params_).fit(X, y)
    np.testing.assert_allclose(refit.predict_proba(X), search.predict_proba(X), atol=1e-6)
    with pytest.raises(ValueError, match="mu_prior_scales"):
        dpp.DPPClassifierCV(mu_prior_scales=()).fit(X, y)
    with pytest.raises(ValueError, match="StandardPrototypeClassifier has none"):
        dpp.DPPClassifierCV(dpp.StandardPrototypeClassifier(), mu_prior_scales=(0.3,)).fit(X, y)
