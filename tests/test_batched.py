"""Many fits as one program: batched Theta-steps equal the fits they stand for."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import expects
from sklearn.base import clone

from dpp import DPPClassifierCV, StandardPrototypeClassifier
from dpp.datasets.generated import make_generated
from dpp.likelihood import classifier_objective
from dpp.metrics import weighted_score
from dpp.selection import cv_splits
from dpp.solvers import options as solver_options
from dpp.solvers.coordinate_ascent import fit_classifier, fit_classifier_paths


def _problem(dim: int, offset: float, seed: int):
    sets = make_generated(num_sets=60, dim=dim, min_size=2, max_size=9, seed=seed).sets
    vectors = np.asarray(sets.vectors) * 3.0 + offset
    rng = np.random.default_rng(seed)
    weights = rng.uniform(0.5, 2.0, sets.num_sets)
    return sets.with_vectors(vectors), weights


@pytest.mark.parametrize(("dim", "offset", "seed"), [(3, 0.0, 0), (17, 1e3, 1)])
def test_standard_cv_batched_equals_fits_one_by_one(dim, offset, seed):
    """DPPClassifierCV over the standard prototype (one batched program of folds x l2) gives
    each candidate the score of ``clone(estimator).set_params(l2=l2 * share).fit(part)``."""
    sets, weights = _problem(dim, offset, seed)
    base = StandardPrototypeClassifier(n_prototypes=6, random_state=seed)
    l2s = [1e-3, 1e-1, 10.0]
    search = DPPClassifierCV(base, l2s=l2s, cv=4, max_extensions=0, select_rounds=False)
    search.fit(sets, sample_weight=weights)
    labelled = sets.__class__.from_flat(
        np.asarray(sets.vectors), np.asarray(sets.set_ids), np.asarray(sets.labels), weights
    )
    folds = cv_splits(4, np.asarray(sets.labels), seed)
    for l2 in l2s:
        expected = []
        for fit_idx, val_idx in folds:
            part, held = labelled.subset(np.sort(fit_idx)), labelled.subset(np.sort(val_idx))
            share = weights[fit_idx].sum() / weights.sum()
            est = clone(base).set_params(l2=l2 * share).fit(part)
            log_p = est.predict_log_proba(held)
            expected.append(weighted_score(log_p, held.labels, held.weights))
        index = search.cv_results_["params"].index({"n_prototypes": 6, "l2": l2})
        got = [search.cv_results_[f"split{f}_test_score"][index] for f in range(4)]
        # both stop at the Theta-step's gradient tolerance: the held-out scores agree to it
        np.testing.assert_allclose(got, expected, rtol=1e-3, atol=1e-5, err_msg=f"l2={l2}")


def test_classifier_paths_equal_fit_classifier_across_chunks():
    """Folds fitted along an l2 path, in chunks of a tiny memory budget, equal the one-by-one
    Theta-steps from 0 (a convex problem: the warm starts change nothing beyond the solver's
    tolerance), including a fold that leaves most sets out and a fit with no penalty."""
    rng = np.random.default_rng(3)
    n, k, c, folds = 40, 5, 3, 3
    z = rng.dirichlet(np.ones(k), size=(folds, n)).astype(np.float32)
    labels = np.eye(c, dtype=np.float32)[rng.integers(0, c, n)]
    masks = (rng.random((folds, n)) > np.array([[0.2], [0.5], [0.9]])).astype(np.float32)
    masks[:, 0] = 1.0
    l2 = np.outer([1.0, 0.8, 0.5], [1.0, 1e-2, 0.0])
    solver = solver_options.theta_solver(solver_options.DEFAULT_OPTIMIZER, None)
    thetas, iterations = fit_classifier_paths(
        z, labels, masks, l2, solver=solver, max_batch_bytes=1
    )
    assert thetas.shape == (folds, 3, k, c) and np.all(iterations > 0)
    for f in range(folds):
        for j in range(3):
            theta0 = np.zeros((k, c), np.float32)
            one = np.asarray(
                fit_classifier(z[f], labels, masks[f], theta0, float(l2[f, j]), solver)
            )
            if l2[f, j] > 0:  # unique maximiser
                np.testing.assert_allclose(thetas[f, j], one, rtol=1e-3, atol=1e-3)
            objective = [
                float(classifier_objective(t, z[f], labels, masks[f], l2[f, j]))
                for t in (thetas[f, j], one)
            ]
            np.testing.assert_allclose(objective[0], objective[1], rtol=1e-5, atol=1e-5)
            if l2[f, j] > 0:  # without a penalty, only the objective is determined
                predicted = [np.argmax(z[f] @ t, axis=1) for t in (thetas[f, j], one)]
                np.testing.assert_array_equal(predicted[0], predicted[1])


def test_on_the_cpu_each_fold_of_the_paths_is_its_fits_alone_bit_for_bit():
    """On the CPU the folds run in turn (``lax.map``): a fold's maximisers and iteration counts
    are those of the fold fitted alone, to the bit, whichever folds ran beside it."""
    from dpp.solvers.coordinate_ascent import vectorise_members

    if vectorise_members():
        pytest.skip("an accelerator vectorises the folds (within the solver's tolerance)")
    rng = np.random.default_rng(5)
    folds, n, k, c = 3, 90, 5, 3
    z = rng.random((folds, n, k)).astype(np.float32)
    labels = np.eye(c, dtype=np.float32)[rng.integers(0, c, n)]
    weights = (rng.random((folds, n)) > 0.2).astype(np.float32)
    l2 = np.tile(np.array([1.0, 0.1, 0.01], np.float32), (folds, 1))
    together, iterations = fit_classifier_paths(z, labels, weights, l2)
    for f in range(folds):
        alone, count = fit_classifier_paths(z[f : f + 1], labels, weights[f : f + 1], l2[f : f + 1])
        np.testing.assert_array_equal(alone[0], together[f])
        np.testing.assert_array_equal(count[0], iterations[f])


def test_classifier_paths_refuse_bad_shapes_and_empty_folds():
    z = np.zeros((2, 10, 3), np.float32)
    labels = np.eye(2, dtype=np.float32)[np.arange(10) % 2]
    with pytest.raises(ValueError, match=r"must be \[F, N, K\]"):
        fit_classifier_paths(z, labels, np.ones((3, 10)), np.ones((2, 1)))
    masks = np.ones((2, 10))
    masks[1] = 0.0
    with pytest.raises(ValueError, match="positive weight"):
        fit_classifier_paths(z, labels, masks, np.ones((2, 1)))


@expects("chosen_at_cap")  # Theta-step cap of 2: the choice and its refit end max_rounds
def test_theta_step_at_its_iteration_cap_is_logged(caplog):
    """A batched Theta-step that stops at max_iter is scored, and says so in the log."""
    sets, _ = _problem(3, 0.0, 0)
    base = StandardPrototypeClassifier(
        n_prototypes=6, optimizer_options={"theta_max_iter": 2}, random_state=0
    )
    search = DPPClassifierCV(base, l2s=[1e-3], cv=3, max_extensions=0, select_rounds=False)
    with caplog.at_level("WARNING", logger="dpp.estimators.cv"):
        search.fit(sets)
    capped = [r for r in caplog.records if "stopped at max_iter=2" in r.getMessage()]
    assert len(capped) == 3  # every fold
