"""One path (issue 19): the command line fits the same estimators a Python user fits.

A run's saved models must equal, to float rounding, what ``DPPClassifier`` and
``DPPClassifierCV`` give on the same training sets with the same settings and seed: the same
preprocessing (standardisation and PCA fitted on the training vectors), the same k-means
centres, the same choice of ``l2`` (and of DPP's rounds).
"""

import json

import numpy as np
import pytest
from test_estimators import QUICK
from test_experiment import FAST, _compose

from dpp.datasets.synthetic import make_synthetic
from dpp.estimators import (
    BagOfWordsClassifier,
    DPPClassifier,
    DPPClassifierCV,
    StandardPrototypeClassifier,
)
from dpp.estimators.io import load
from dpp.experiment.runner import run
from dpp.experiment.splits import split_indices
from dpp.init import kmeans_centres
from dpp.units import Affine

GRID = [0.01, 1.0]
SETTINGS = {"n_prototypes": 2, "standardize": True, "pca_components": 2, "random_state": 0}
CLI = [
    *FAST,
    "dataset.standardize=true",
    "dataset.pca_components=2",
    "l2_selection.folds=2",
    f"l2_selection.grid=[{GRID[0]},{GRID[1]}]",
    "~baselines.pooling",
    "~baselines.bag_of_words",
    "figures=[]",
]


@pytest.fixture(scope="module")
def split():
    """Trial 0's training and test sets of the synthetic run (40 sets, seed 0)."""
    data = make_synthetic(num_sets=40, min_size=1, max_size=20, seed=0)
    labels = np.asarray(data.sets.labels)
    train, test = split_indices(labels, "stratified", seed=0, train_fraction=0.2)
    return data.sets.subset(train), np.argmax(labels[train], axis=1), data.sets.subset(test)


def _same(saved_path, estimator, test):
    saved = load(saved_path)
    np.testing.assert_allclose(
        estimator.predict_proba(test), saved.predict_proba(test), rtol=1e-5, atol=1e-7
    )
    np.testing.assert_allclose(estimator.prototypes_, saved.prototypes_, rtol=1e-5, atol=1e-6)
    assert estimator.fit_report_.rounds == saved.fit_report_.rounds


@pytest.mark.extended  # an end-to-end CLI run (over 10 s): the default tier keeps near 5 minutes
def test_cli_with_shared_lambda_equals_the_estimators(tmp_path, split):
    X, y, test = split
    results = run(_compose([*CLI, "l2_selection.kind=cv"]), output_dir=tmp_path)
    records = {r["method"]: r for r in results["trials"]}
    # what a Python user writes: the standard prototype's Theta-step cross-validated on the
    # k-means centres of the training vectors, both prefit (the folds share the centres and so
    # the units they are in), then every method at that l2
    units = Affine.fit(X.vectors, standardize=True, pca_components=2)
    centres = kmeans_centres(np.asarray(units.sets(X).vectors), 2, 0, 1, 300)
    standard = StandardPrototypeClassifier(
        init=centres, preprocess=units, **SETTINGS, **QUICK_THETA
    )
    search = DPPClassifierCV(standard, l2s=GRID, cv=2, select_rounds=False).fit(X, y)
    l2 = search.best_params_["l2"]
    assert records["dpp"]["l2"] == records["standard"]["l2"] == l2
    assert records["dpp"]["l2_position"] == search.best_position_
    assert records["dpp"]["l2_cv_scores"] == pytest.approx(
        search.cv_results_["mean_test_score"].tolist(), rel=1e-6
    )
    dpp = DPPClassifier(l2=l2, **SETTINGS, **QUICK).fit(X, y)
    _same(tmp_path / "models" / "dpp.npz", dpp, test)
    _same(tmp_path / "models" / "standard.npz", search.best_estimator_, test)


@pytest.mark.extended  # 7-21 s of fits or CLI runs: the default tier keeps to 5 minutes
def test_cli_with_dpp_cv_equals_dpp_classifier_cv(tmp_path, split):
    X, y, test = split
    overrides = [*CLI, "l2_selection.kind=dpp_cv", "~baselines.standard"]
    (record,) = run(_compose(overrides), output_dir=tmp_path)["trials"]
    # l2_selection.pooling_grid: null is the estimator's own pooling (pooling=None)
    base = DPPClassifier(**SETTINGS, **QUICK)  # the experiment's: the paper's model alone
    search = DPPClassifierCV(base, l2s=GRID, cv=2, pooling=None, embedding=(None,))
    search.fit(X, y)
    assert record["best_params"] == search.best_params_
    assert record["cv_rounds"] == search.best_rounds_
    _same(tmp_path / "models" / "dpp.npz", search, test)
    header = json.loads(str(np.load(tmp_path / "models" / "dpp.npz")["header"]))
    assert header["params"]["standardize"] and header["params"]["pca_components"] == 2


#: The Theta-step's options of ``QUICK`` (the standard prototype has no rounds).
QUICK_THETA = {"optimizer_options": QUICK["optimizer_options"]}


@pytest.mark.extended  # an end-to-end CLI run (over 10 s): the default tier keeps near 5 minutes
def test_pooled_baselines_take_the_trials_pca_map(tmp_path, split):
    """The pooled baselines have no ``pca_components``: the trial hands them its map prefit, so
    the bag-of-words codes the k-means centres of the projected vectors it is given."""
    overrides = [*FAST, "dataset.standardize=true", "dataset.pca_components=1", "figures=[]"]
    results = run(_compose(overrides), output_dir=tmp_path)
    assert results["status"] == "complete"
    records = {r["method"]: r for r in results["trials"]}
    X, y, test = split
    units = Affine.fit(X.vectors, standardize=True, pca_components=1)
    centres = kmeans_centres(np.asarray(units.sets(X).vectors), 2, 0, 1, 300)
    bow = BagOfWordsClassifier(n_prototypes=2, init=centres, preprocess=units, cv=5)
    bow.fit(X, y)
    labels = np.argmax(np.asarray(test.labels), axis=1)
    assert records["bag_of_words"]["accuracy"] == pytest.approx(
        np.mean(bow.predict(test) == labels)
    )
