"""Issue 9: the scikit-learn estimators, model selection, save/load and your own sets files."""

import json
import warnings
import zipfile

import numpy as np
import pandas as pd
import pytest
from conftest import expects
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning, NotFittedError
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV, cross_val_score
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import FunctionTransformer
from test_experiment import FAST, _compose

import dpp
from dpp.datasets.sets_file import load_sets_file
from dpp.datasets.synthetic import make_synthetic
from dpp.errors import ConfigError, DataError, FitWarning, ModelFileError
from dpp.estimators import (
    ClassPriorClassifier,
    DPPClassifier,
    DPPClassifierCV,
    InfoLossClassifier,
    StandardPrototypeClassifier,
    as_sets,
)
from dpp.estimators.io import load
from dpp.experiment.runner import run
from dpp.experiment.splits import split_indices
from dpp.sets import RaggedSets

#: QUICK fits stop at their round cap by design: its FitWarning is expected in this module.
pytestmark = expects("round_cap")

#: Small and quick: few rounds and solver iterations (compilation dominates these fits).
QUICK = {
    "max_rounds": 3,
    "validation_fraction": 0.0,  # rounds by tol (quick; early stopping is tested on its own)
    "optimizer_options": {"max_iter": 10, "theta_max_iter": 100},
}


def _sets(rng, n, dim=3, offset=0.0, names=("cat", "dog"), size=None):
    """Two classes of sets of 2-9 vectors (or all of ``size``), told apart by the mean of their
    first feature. Training sets of one size make equal folds share their compiled programs."""
    X, y = [], []
    for i in range(n):
        c = i % 2
        m = int(rng.integers(2, 10)) if size is None else size
        shift = np.zeros(dim)
        shift[0] = 1.2 if c else -1.2
        X.append(rng.normal(size=(m, dim)) + shift + offset)
        y.append(names[c])
    return X, np.array(y)


@pytest.fixture(scope="module")
def problem():
    rng = np.random.default_rng(9)
    X, y = _sets(rng, 60, size=4)
    X_test, y_test = _sets(rng, 40)
    return X, y, X_test, y_test


@pytest.fixture(scope="module")
def fitted(problem):
    X, y, _, _ = problem
    return DPPClassifier(n_prototypes=3, **QUICK).fit(X, y)


def test_fit_predict_with_string_labels(fitted, problem):
    _, _, X_test, y_test = problem
    assert list(fitted.classes_) == ["cat", "dog"]
    proba = fitted.predict_proba(X_test)
    assert proba.shape == (40, 2) and np.allclose(proba.sum(axis=1), 1.0)
    assert set(fitted.predict(X_test)) <= {"cat", "dog"}
    assert fitted.score(X_test, y_test) >= 0.8  # the classes differ by 2.4 s.d. in one feature
    assert fitted.prototypes_.shape == (3, 3) and fitted.theta_.shape == (3, 2)
    assert np.isscalar(fitted.beta_) and fitted.beta_ > 0
    assert fitted.n_features_in_ == 3 and fitted.n_iter_ == fitted.fit_report_.rounds
    assert fitted.converged_ == (fitted.fit_report_.status == "converged")
    np.testing.assert_allclose(
        np.log(proba), fitted.predict_log_proba(X_test), rtol=1e-6, atol=1e-7
    )


def test_the_prototypes_in_input_units_are_computed_when_read_and_a_refit_renews_them(problem):
    """Issue 83: a fit never inverts its preprocessing map (a dense SVD in thousands of
    dimensions, which a selection's fold fits paid in every candidate); ``prototypes_``, read,
    is the inverse map of the fitted prototypes, and a refit on other data gives its own."""
    X, y, _, _ = problem
    est = DPPClassifier(n_prototypes=3, **QUICK)
    assert not hasattr(est, "prototypes_")
    est.fit(X, y)
    assert "_input_prototypes" not in vars(est)  # the fit itself left the map un-inverted
    expected = est.preprocess_.inverse(np.asarray(est.model_.prototypes, np.float64))
    np.testing.assert_array_equal(est.prototypes_, expected)
    assert est.prototypes_ is est.prototypes_  # computed once, then kept
    first = est.prototypes_
    est.fit([x * 3.0 + 1.0 for x in X], y)  # the same fit in internal units, other input units
    np.testing.assert_allclose(est.prototypes_, first * 3.0 + 1.0, rtol=1e-3, atol=1e-3)
    assert not np.allclose(est.prototypes_, first)


def test_prediction_needs_no_labels_and_names_a_dimension_mismatch(fitted, problem):
    _, _, X_test, _ = problem
    unlabelled = RaggedSets.from_list(X_test)
    assert unlabelled.labels is None
    np.testing.assert_array_equal(fitted.predict_proba(unlabelled), fitted.predict_proba(X_test))
    with pytest.raises(ValueError, match="D = 4 features per vector but .* fitted on D = 3"):
        fitted.predict([np.zeros((2, 4))])


def test_the_input_forms_give_the_same_sets(fitted, problem):
    _, _, X_test, _ = problem
    sizes = np.array([len(x) for x in X_test])
    flat = np.concatenate(X_test)
    ids = np.repeat(np.arange(len(X_test)) * 7 + 3, sizes)  # any integers
    order = np.random.default_rng(0).permutation(len(ids))  # in any order
    expected = fitted.predict_proba(X_test)
    for form in (
        (flat[order], ids[order]),
        RaggedSets.from_lengths(flat, sizes),
        RaggedSets.from_offsets(flat, np.concatenate([[0], np.cumsum(sizes)])),
    ):
        # float32 sums in another order within a set (the pair form reorders vectors)
        np.testing.assert_allclose(fitted.predict_proba(form), expected, rtol=1e-5, atol=1e-7)
    with pytest.raises(ValueError, match="lengths sum to"):
        RaggedSets.from_lengths(flat, sizes[:-1])
    with pytest.raises(ValueError, match="set 1 has length 0"):
        RaggedSets.from_lengths(flat[:3], np.array([3, 0]))


def test_soft_labels_and_sample_weights(fitted, problem):
    X, y, X_test, y_test = problem
    hard = (y == "dog").astype(float)
    soft = np.stack([1 - 0.8 * hard - 0.1, 0.8 * hard + 0.1], axis=1)
    clf = DPPClassifier(n_prototypes=3, **QUICK).fit(X, soft)
    assert list(clf.classes_) == [0, 1]
    assert clf.score(X_test, (y_test == "dog").astype(int)) >= 0.8
    # soft labels 0.1/0.9 are predicted less confidently than hard ones
    confidence = clf.predict_proba(X_test).max(axis=1).mean()
    assert confidence < fitted.predict_proba(X_test).max(axis=1).mean()
    with pytest.raises(ValueError, match="sum to"):
        DPPClassifier(n_prototypes=3, **QUICK).fit(X, soft * 0.5)
    # a set of weight 0 does not count: the fit equals the fit without it
    weights = np.ones(len(X))
    weights[0] = 0.0
    a = StandardPrototypeClassifier(n_prototypes=3).fit(X, y, sample_weight=weights)
    b = StandardPrototypeClassifier(n_prototypes=3, init=a.model_.prototypes).fit(X[1:], y[1:])
    np.testing.assert_allclose(a.theta_, b.theta_, atol=1e-4)


def test_clone_and_params_round_trip():
    clf = DPPClassifier(n_prototypes=5, l2=0.3, beta_prior="lognormal", optimizer="adam")
    twin = clone(clf)
    assert twin.get_params() == clf.get_params() and twin is not clf
    clf.set_params(**{"l2": 1.5, "n_prototypes": 2})
    assert (clf.l2, clf.n_prototypes) == (1.5, 2)
    for cls in (DPPClassifier, StandardPrototypeClassifier, InfoLossClassifier):
        assert clone(cls()).get_params() == cls().get_params()
    with pytest.raises(ValueError, match="n_prototypes must be a positive integer, got 0"):
        DPPClassifier(n_prototypes=0).fit([np.zeros((2, 2))] * 2, [0, 1])
    with pytest.raises(ValueError, match="optimizer lbfgs_optax has no option epochs"):
        DPPClassifier(optimizer_options={"epochs": 3}).check_params()


@pytest.mark.extended  # 15 s: the default tier stays near 5 minutes
def test_grid_search_over_l2_and_n_prototypes_on_a_list_of_sets(problem):
    X, y, X_test, y_test = problem
    search = GridSearchCV(
        DPPClassifier(**QUICK), {"l2": [1e-2, 1.0], "n_prototypes": [2, 3]}, cv=2
    ).fit(X, y)
    assert search.best_params_["n_prototypes"] in (2, 3)
    assert len(search.cv_results_["params"]) == 4
    assert search.score(X_test, y_test) >= 0.8
    scores = cross_val_score(StandardPrototypeClassifier(n_prototypes=3), X, y, cv=2)
    assert scores.shape == (2,) and np.all(scores > 0.6)


@pytest.mark.extended  # 8-10 s: the default tier keeps to its 5 minutes
def test_pipeline_downstream_logistic_regression_on_transform(problem):
    X, y, X_test, y_test = problem
    pipe = Pipeline(
        [("bow", DPPClassifier(n_prototypes=3, **QUICK)), ("lr", LogisticRegression())]
    ).fit(X, y)
    z = pipe.named_steps["bow"].transform(X_test)
    assert z.shape == (40, 3) and np.allclose(z.sum(axis=1), 1.0)  # codes on the simplex
    assert pipe.score(X_test, y_test) >= 0.8
    last = Pipeline([("identity", FunctionTransformer()), ("dpp", StandardPrototypeClassifier())])
    assert last.fit(X, y).score(X_test, y_test) >= 0.8


def test_preprocessing_inside_makes_raw_offset_sets_work(problem):
    X, y, X_test, y_test = problem
    offset = 1e4
    clf = DPPClassifier(n_prototypes=3, standardize=True, pca_components=3, **QUICK)
    clf.fit([x + offset for x in X], y)
    raw = [x + offset for x in X_test]
    assert clf.score(raw, y_test) >= 0.8
    assert clf.prototypes_.shape == (3, 3)
    assert np.all(np.abs(clf.prototypes_.mean(axis=0) - offset) < 5)  # back in input units


def test_save_load_round_trip_and_refusals(fitted, problem, tmp_path):
    _, _, X_test, _ = problem
    path = tmp_path / "model.npz"
    fitted.save(path)
    loaded = load(path)
    assert type(loaded) is DPPClassifier and loaded.get_params() == fitted.get_params()
    np.testing.assert_array_equal(loaded.predict_proba(X_test), fitted.predict_proba(X_test))
    assert list(loaded.classes_) == ["cat", "dog"] and loaded.fit_report_.status
    # a file from a newer format version
    with np.load(path, allow_pickle=False) as data:
        arrays = {k: data[k] for k in data.files}
    header = json.loads(str(arrays["header"]))
    header["format_version"] = 99
    arrays["header"] = np.asarray(json.dumps(header))
    newer = tmp_path / "newer.npz"
    np.savez(newer, **arrays)
    with pytest.raises(ModelFileError, match="format version 99, newer than"):
        load(newer)
    # a damaged file: cut short, or an array missing
    cut = tmp_path / "cut.npz"
    cut.write_bytes(path.read_bytes()[:200])
    with pytest.raises(ModelFileError, match="not a readable dpp model file"):
        load(cut)
    del arrays["theta"]
    arrays["header"] = np.asarray(json.dumps({**header, "format_version": 1}))
    damaged = tmp_path / "damaged.npz"
    np.savez(damaged, **arrays)
    with pytest.raises(ModelFileError, match="missing array.*theta"):
        load(damaged)
    with pytest.raises(FileNotFoundError, match="no model file"):
        load(tmp_path / "none.npz")
    assert zipfile.is_zipfile(path)  # a plain .npz, readable without dpp


@expects("grid_edge")  # two values, no extension
def test_dpp_classifier_cv_chooses_by_cv_of_dpp(problem):
    X, y, X_test, y_test = problem
    search = DPPClassifierCV(
        DPPClassifier(**QUICK), l2s=[2e-2, 20.0], n_prototypes=[3], cv=2, max_extensions=0,
        pooling=None, embedding=(None,),  # the estimator's own (mean), no network
    )  # fmt: skip
    search.fit(X, y)
    scores = search.cv_results_["mean_test_score"]
    splits = np.stack([search.cv_results_[f"split{f}_test_score"] for f in range(2)], axis=1)
    np.testing.assert_allclose(scores, splits.mean(axis=1), rtol=1e-12)
    # mean validation log-likelihood per set: the best beats the class prior's by a margin
    assert search.prior_score_ == pytest.approx(np.log(0.5), rel=0.05)
    assert scores.max() > search.prior_score_ + 0.1 and search.beats_prior_
    best = int(np.argmax(scores))
    # the chosen candidate, and how its refit stops: after the rounds chosen on the folds
    assert search.best_params_ == {
        **search.cv_results_["params"][best],
        "validation_fraction": 0.0,
        "round_cap": search.best_rounds_,
    }
    assert search.best_estimator_.l2 == search.best_params_["l2"]
    assert search.best_estimator_.round_cap == search.best_rounds_
    assert search.score(X_test, y_test) >= 0.8
    assert search.prototypes_.shape == (3, 3)  # the refitted estimator's attributes


def test_warm_start_starts_from_the_previous_solution(problem):
    X, y, _, _ = problem
    # rounds by tol (early stopping, the default, may keep round 0 on this easy problem)
    fitted = DPPClassifier(n_prototypes=3, **QUICK).fit(X, y)
    warm = clone(fitted).set_params(warm_start=True)
    warm.model_ = fitted.model_  # as after a fit on the same sets
    warm.fit(X, y)
    # the start is the previous solution: L after the first Theta-step is at least its final L,
    # far above the k-means start of a cold fit
    assert warm.history_[0] >= fitted.history_[-1] - 1e-6 * abs(fitted.history_[-1])
    assert fitted.history_[0] < fitted.history_[-1] - 1e-3


# ------------------------------------------------------------------ your own sets files
def _write_files(tmp_path):
    rng = np.random.default_rng(3)
    X, y = _sets(rng, 40, names=("neg", "pos"))
    ids = np.arange(1000, 1040)[rng.permutation(40)]  # any integers
    sizes = [len(x) for x in X]
    flat, set_ids = np.concatenate(X), np.repeat(ids, sizes)
    rows = rng.permutation(len(flat))  # rows in any order
    labels = y[np.argsort(ids)]  # label n belongs to the n-th smallest id
    npz = tmp_path / "sets.npz"
    np.savez(npz, vectors=flat[rows], set_ids=set_ids[rows], labels=labels)
    table = pd.DataFrame(flat[rows], columns=["f0", "f1", "f2"])
    table["set_id"], table["label"] = set_ids[rows], np.repeat(y, sizes)[rows]
    csv = tmp_path / "sets.csv"
    table.to_csv(csv, index=False)
    return npz, csv, table


def test_a_headerless_csv_is_read_as_label_bag_id_features(tmp_path):
    """Issue 83: the field's long format (MUSK's files as ``mil`` ships them) holds the same
    sets as a named table; a file it cannot be is refused naming what is wrong."""
    _, csv, table = _write_files(tmp_path)
    named = load_sets_file(str(csv))
    bare = tmp_path / "bare.csv"
    table[["label", "set_id", "f0", "f1", "f2"]].to_csv(bare, index=False, header=False)
    read = load_sets_file(str(bare), header=False)
    np.testing.assert_array_equal(np.asarray(read.sets.vectors), np.asarray(named.sets.vectors))
    np.testing.assert_array_equal(np.asarray(read.sets.labels), np.asarray(named.sets.labels))
    assert read.feature_names == ("x0", "x1", "x2") and read.class_names == named.class_names
    table[["label", "set_id"]].to_csv(tmp_path / "two.csv", index=False, header=False)
    with pytest.raises(DataError, match="two.csv: a headerless CSV needs .* it has 2 column"):
        load_sets_file(str(tmp_path / "two.csv"), header=False)
    with pytest.raises(DataError, match="header=False reads a CSV of columns label, set id"):
        load_sets_file(str(bare), set_column="bag", header=False)


def test_sets_files_npz_and_csv_hold_the_same_sets(tmp_path):
    npz, csv, table = _write_files(tmp_path)
    a, b = load_sets_file(str(npz)), load_sets_file(str(csv))
    table.to_parquet(tmp_path / "sets.parquet")
    c = load_sets_file(str(tmp_path / "sets.parquet"))
    np.testing.assert_array_equal(np.asarray(b.sets.vectors), np.asarray(c.sets.vectors))
    assert a.sets.num_sets == b.sets.num_sets == 40 and a.class_names == ("neg", "pos")
    np.testing.assert_array_equal(np.asarray(a.sets.labels), np.asarray(b.sets.labels))
    np.testing.assert_array_equal(np.asarray(a.sets.set_ids), np.asarray(b.sets.set_ids))
    np.testing.assert_allclose(np.asarray(a.sets.vectors), np.asarray(b.sets.vectors))
    bad = table.copy()
    bad.loc[bad.index[0], "label"] = "other" if bad["label"].iloc[0] == "neg" else "neg"
    bad.to_csv(tmp_path / "bad.csv", index=False)
    first_set = bad["set_id"].iloc[0]
    with pytest.raises(DataError) as err:
        load_sets_file(str(tmp_path / "bad.csv"))
    # issue 36: the set id and labels as written in the file, not np.int64(1000)
    assert f"bad.csv: set {first_set} has rows with different labels (row " in str(err.value)
    assert "np." not in str(err.value)
    table.iloc[:0].to_csv(tmp_path / "header.csv", index=False)
    with pytest.raises(DataError, match=r"header\.csv: the table has no rows \(columns: f0, f1"):
        load_sets_file(str(tmp_path / "header.csv"))
    table.assign(f1="x").to_csv(tmp_path / "text.csv", index=False)
    with pytest.raises(DataError, match="feature column 'f1' is not numeric"):
        load_sets_file(str(tmp_path / "text.csv"))
    with pytest.raises(DataError, match="no set-id column 'group'"):
        load_sets_file(str(csv), set_column="group")
    with pytest.raises(FileNotFoundError, match="no sets file at"):
        load_sets_file(str(tmp_path / "missing.npz"))


@pytest.mark.extended  # one of the longest end-to-end runs
def test_sets_file_runs_end_to_end_and_its_models_predict(tmp_path):
    npz, csv, _ = _write_files(tmp_path)
    with pytest.raises(ConfigError, match="dataset.path must be set"):
        run(_compose(FAST[:-1] + ["dataset=sets_file"]), output_dir=tmp_path / "none")
    results = {}
    for path in (npz, csv):
        cfg = _compose(FAST[:-1] + ["dataset=sets_file", f"dataset.path={path}"])
        results[path.suffix] = run(cfg, output_dir=tmp_path / path.suffix[1:])
    a, b = (results[s]["trials"] for s in (".npz", ".csv"))
    assert [r["accuracy"] for r in a] == [r["accuracy"] for r in b]
    # issue 36: your own sets get the estimators' K, and the records say so
    assert {r["K"] for r in a if "K" in r} == {DPPClassifier().n_prototypes}
    model = load(tmp_path / "csv" / "models" / "dpp.npz")
    assert list(model.classes_) == ["neg", "pos"]  # the dataset's class names
    data = load_sets_file(str(npz))
    test_acc = model.score(data.sets, np.array(data.class_names)[np.argmax(data.sets.labels, 1)])
    assert test_acc >= 0.8


@pytest.mark.extended  # over 7 s cold: the default tier keeps to its 5 minutes
def test_cli_and_estimator_fit_the_same_model(tmp_path):
    run(_compose(FAST), output_dir=tmp_path)
    saved = load(tmp_path / "models" / "dpp.npz")
    data = make_synthetic(num_sets=40, min_size=1, max_size=20, seed=0)
    labels = np.asarray(data.sets.labels)
    train, test = split_indices(labels, "stratified", seed=0, train_fraction=0.2)
    # the synthetic dataset config does not standardise (the estimators' default does)
    clf = DPPClassifier(n_prototypes=2, l2=1e-2, random_state=0, standardize=False, **QUICK)
    clf.fit(data.sets.subset(train), np.argmax(labels[train], axis=1))
    np.testing.assert_allclose(
        clf.predict_proba(data.sets.subset(test)),
        saved.predict_proba(data.sets.subset(test)),
        rtol=1e-6,
    )
    assert clf.fit_report_.rounds == saved.fit_report_.rounds


def test_as_sets_refuses_a_flat_array():
    with pytest.raises(ValueError, match="X must be a list of"):
        as_sets(np.zeros((5, 3)))


@pytest.mark.extended  # an end-to-end CLI run (over 10 s): the default tier keeps near 5 minutes
def test_experiment_with_dpp_cv_reports_the_choice(tmp_path):
    overrides = ["l2_selection.kind=dpp_cv", "l2_selection.folds=2"]
    overrides += ["~baselines.standard", "~baselines.pooling", "~baselines.bag_of_words"]
    cfg = _compose(FAST + overrides + ["l2_selection.grid=[0.01,10.0]"])
    (record,) = run(cfg, output_dir=tmp_path)["trials"]
    assert record["method"] == "dpp" and record["l2_selection"] == "dpp_cv"
    # the grid, then one value a step beyond an edge per extension (at most 3 on each side)
    assert record["l2_grid"] == [10.0, 0.01] + record["l2_added"]
    assert len(record["l2_added"]) <= 6
    best = record["l2_grid"][int(np.argmax(record["l2_cv_scores"]))]
    assert record["l2"] == best == record["best_params"]["l2"]
    assert record["l2_position"] in ("interior", "strongest edge", "weakest edge")
    if record["l2_position"] != "interior":  # an edge only once its side is used up
        assert len(record["l2_added"]) >= 3


# ------------------------------------------------------------------ issue 20: statuses, errors
@pytest.mark.extended  # over 7 s cold: the default tier keeps to its 5 minutes
def test_an_unclean_fit_is_a_fit_warning_naming_the_candidate(problem):
    X, y, _, _ = problem
    assert issubclass(FitWarning, ConvergenceWarning)
    with pytest.warns(FitWarning) as caught:  # rounds by tol: capped at 1 while L rises
        clf = DPPClassifier(
            n_prototypes=3, l2=0.5, max_rounds=1, validation_fraction=0.0, random_state=1
        ).fit(X, y)
    (warning,) = [w for w in caught if w.category is FitWarning]
    message = str(warning.message)
    assert message.startswith(
        "DPPClassifier(l2=0.5, max_rounds=1, n_prototypes=3, random_state=1, "
        "validation_fraction=0.0)"
    )
    assert warning.filename == __file__  # the caller's line (issue 36)
    assert f"fit {clf.fit_report_.status}: {clf.fit_report_.reason}" in message
    assert clf.fit_report_.status == "max_rounds" and clf.converged_ is False
    with warnings.catch_warnings():  # a clean fit warns nothing
        warnings.simplefilter("error", FitWarning)
        DPPClassifier(n_prototypes=3, random_state=1).fit(X, y)


@pytest.mark.parametrize(
    "cls", [DPPClassifier, StandardPrototypeClassifier, InfoLossClassifier, ClassPriorClassifier]
)
def test_every_method_before_fit_raises_not_fitted_error(problem, cls):
    X, y, _, _ = problem
    estimator = cls()
    for call in (
        estimator.predict,
        estimator.predict_proba,
        estimator.predict_log_proba,
        estimator.transform,
        lambda X: estimator.score(X, y),
    ):
        with pytest.raises(NotFittedError):
            call(X)


@pytest.mark.parametrize("labels", [[None] * 60, ["cat", None] * 30, [1.0] * 59 + [np.nan]])
def test_missing_labels_are_refused_by_name(problem, labels):
    X = problem[0]
    with pytest.raises(ValueError, match=r"y has no label \(None or NaN\) for \d+ of 60 sets"):
        DPPClassifier().fit(X, np.asarray(labels, dtype=object))


@expects("grid_edge")  # a short grid on an easy problem
def test_dpp_classifier_cv_takes_a_splitter_or_index_pairs_as_grid_search_does(problem):
    from sklearn.model_selection import KFold, StratifiedKFold

    X, y, _, _ = problem
    grid = {"l2s": [2e-2, 20.0], "n_prototypes": [3], "pooling": None, "embedding": (None,)}
    base = DPPClassifier(**QUICK)
    by_number = DPPClassifierCV(base, cv=3, **grid).fit(X, y)
    splitter = StratifiedKFold(3, shuffle=True, random_state=base.random_state)
    by_splitter = DPPClassifierCV(base, cv=splitter, **grid).fit(X, y)
    pairs = list(splitter.split(np.zeros(len(y)), y))
    by_pairs = DPPClassifierCV(base, cv=iter(pairs), **grid).fit(X, y)
    # an int is the same stratified split as the splitter; the pairs give the same folds
    for search in (by_splitter, by_pairs):
        np.testing.assert_allclose(
            search.cv_results_["mean_test_score"], by_number.cv_results_["mean_test_score"]
        )
    one = DPPClassifierCV(base, cv=[(np.arange(0, 30), np.arange(30, len(y)))], **grid)
    assert [key for key in one.fit(X, y).cv_results_ if key.startswith("split")] == [
        "split0_test_score", "split0_fit_status"
    ]  # fmt: skip
    two = DPPClassifierCV(base, cv=KFold(2), **grid).fit(X, y).cv_results_
    assert "split1_test_score" in two and "split2_test_score" not in two
    bad = {
        "cv=1": 1,
        "a set on both sides": [(np.arange(0, 30), np.arange(20, 40))],
        "outside [0, N)": [(np.arange(0, 30), np.array([len(y)]))],
        "boolean masks": [(np.ones(len(y), bool), np.zeros(len(y), bool))],
        "no pair": [],
        "a string": "five",
    }
    for name, cv in bad.items():
        with pytest.raises(ValueError, match="cv|folds") as raised:
            DPPClassifierCV(base, cv=cv, **grid).fit(X, y)
        assert raised.value.args, name


@pytest.mark.parametrize(
    "estimator, message",
    [
        (dpp.PoolingClassifier(), "PoolingClassifier chooses its C by its own cross-validation"),
        (dpp.BagOfWordsClassifier(), "BagOfWordsClassifier chooses its C"),
        (dpp.AttentionMILClassifier(), "choose AttentionMILClassifier's learning_rate and"),
        (dpp.DeepSetsClassifier(), "choose DeepSetsClassifier's learning_rate"),
        (LogisticRegression(), "tunes the prototype estimators .*; got LogisticRegression"),
    ],
)
def test_dpp_classifier_cv_refuses_what_it_cannot_tune_naming_what_does(
    problem, estimator, message
):
    """Issue 45: DPPClassifierCV(PoolingClassifier()) failed with AttributeError 'n_prototypes'
    although the docs said it wraps the baselines."""
    X, y, _, _ = problem
    with pytest.raises(TypeError, match=message):
        DPPClassifierCV(estimator).fit(X, y)


@pytest.mark.parametrize(
    "params, match",
    [
        ({"round_cap": 2}, r"round_cap=2 fixes the number of rounds.*validation_fraction=0"),
        ({"round_cap": 5, "max_rounds": 3, "validation_fraction": 0.0}, r"at most max_rounds=3"),
        ({"round_cap": -1, "validation_fraction": 0.0}, "round_cap"),
    ],
)
def test_a_round_cap_that_cannot_hold_is_refused_before_any_fit(problem, params, match):
    X, y, _, _ = problem
    with pytest.raises(ValueError, match=match):
        DPPClassifier(n_prototypes=2, **params).fit(X, y)
