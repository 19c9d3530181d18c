"""Issue 42: the ensemble (members' probabilities averaged) and the corrected selection rule."""

import json
import warnings
import zipfile

import numpy as np
import pytest
from conftest import expects
from sklearn.base import clone

import dpp
from dpp.errors import ModelFileError
from dpp.estimators.ensemble import SetEnsembleClassifier, seed_members

_RNG = np.random.default_rng(11)
X = [_RNG.normal(size=(_RNG.integers(2, 8), 4)) + (i % 3) for i in range(36)]
Y = np.asarray(["a", "b", "c"])[np.arange(36) % 3]
PROBE = [_RNG.normal(size=(m, 4)) + 1.0 for m in (1, 3, 6)]


def _members():
    return [
        ("mean", dpp.DPPClassifier(n_prototypes=3, max_rounds=2, pooling="mean")),
        ("max", dpp.DPPClassifier(n_prototypes=3, max_rounds=1, pooling="max")),
        ("pooling", dpp.PoolingClassifier(Cs=[1.0], max_extensions=0)),
    ]


@pytest.fixture(scope="module")
def fitted():
    return SetEnsembleClassifier(_members(), weights=[1.0, 2.0, 1.0]).fit(X, Y)


def test_predicts_the_renormalised_product_of_its_members_fitted_alone(fitted):
    """Issue 53: softmax(sum_m w_m log p_m) of the members, each as it fits alone."""
    from scipy.special import softmax

    alone = [np.log(est.fit(X, Y).predict_proba(PROBE)) for _, est in _members()]
    expected = softmax((alone[0] + 2 * alone[1] + alone[2]) / 4, axis=1)
    np.testing.assert_allclose(fitted.predict_proba(PROBE), expected, rtol=1e-5)
    np.testing.assert_allclose(fitted.predict_proba(PROBE).sum(1), 1.0, rtol=1e-12)
    assert list(fitted.classes_) == ["a", "b", "c"]
    assert fitted.predict(PROBE).tolist() == list(fitted.classes_[np.argmax(expected, axis=1)])
    # a product of experts is sharper than their mixture where they agree
    mixture = (np.exp(alone[0]) + 2 * np.exp(alone[1]) + np.exp(alone[2])) / 4
    assert not np.allclose(fitted.predict_proba(PROBE), mixture)


def test_log_proba_evidence_sums_to_the_ensembles_own_class_scores(fitted):
    """Exact evidence from an ensemble: the members' weighted mean instance scores plus the
    mean intercept have the ensemble's log-probabilities as their log-softmax."""
    from scipy.special import log_softmax

    product = fitted
    scores = product.instance_scores(PROBE)
    assert [s.shape for s in scores] == [(m, 3) for m in (1, 3, 6)]
    totals = np.stack([s.sum(0) for s in scores]) + product.intercept_
    np.testing.assert_allclose(
        log_softmax(totals, axis=1), product.predict_log_proba(PROBE), atol=1e-5
    )
    members = [e.instance_scores(PROBE) for e in fitted.estimators_]
    np.testing.assert_allclose(
        scores[2], (members[0][2] + 2 * members[1][2] + members[2][2]) / 4, rtol=1e-12
    )


def test_soft_assignments_are_the_members_codes_side_by_side():
    members = _members()[:2]
    both = SetEnsembleClassifier(members).fit(X, Y)
    codes = both.soft_assignments(PROBE)
    alone = [e.soft_assignments(PROBE) for e in both.estimators_]
    assert [c.shape for c in codes] == [(m, 6) for m in (1, 3, 6)]
    np.testing.assert_array_equal(codes[1], np.concatenate([alone[0][1], alone[1][1]], axis=1))
    assert np.allclose(both.transform(PROBE[2:])[0, :3], codes[2][:, :3].mean(0), atol=1e-6)


def test_a_file_of_a_mean_of_probabilities_is_refused_naming_the_dpp_that_reads_it(
    fitted, tmp_path
):
    """Issue 79: 0.3 combines log-probabilities only; a file that records ``combine="proba"``
    (0.2's other choice) or none (0.1, which combined so) names dpp 0.2."""
    path = fitted.save(tmp_path / "product.npz")
    header = json.loads(str(np.load(path)["header"]))
    assert header["params"]["combine"] == "log_proba"  # what 0.2 reads as this ensemble
    for name, combine in (("proba", "proba"), ("legacy", None)):
        data = dict(np.load(path))
        changed = json.loads(str(data["header"]))
        changed["params"].pop("combine")
        if combine is not None:
            changed["params"]["combine"] = combine
        data["header"] = np.asarray(json.dumps(changed))
        np.savez(tmp_path / f"{name}.npz", **data)
        with pytest.raises(ModelFileError, match=r"params.combine is 'proba'.*dpp 0.2 reads"):
            dpp.load(tmp_path / f"{name}.npz")


def test_reports_every_member_status_and_the_worst(fitted):
    statuses = fitted.member_statuses_
    assert set(statuses) == {"mean", "max", "pooling"}
    assert statuses == {n: e.fit_report_.status for n, e in fitted.named_estimators_.items()}
    report = fitted.fit_report_
    for name, status in statuses.items():
        assert f"{name}: {status}" in report.reason
    unclean = [s for s in statuses.values() if s not in ("converged", "early_stopped", None)]
    if unclean:  # max_rounds=1 caps a member
        assert report.status in unclean and not report.clean
    else:
        assert report.clean


def test_status_is_the_worst_and_never_clean_over_a_failed_member():
    from dpp.estimators.ensemble import _report

    assert _report({"a": "converged", "b": "early_stopped"}).status == "early_stopped"
    assert _report({"a": "converged", "b": "converged"}).status == "converged"
    assert _report({"a": "early_stopped", "b": "failed", "c": "max_rounds"}).status == "failed"
    assert _report({"a": "max_rounds", "b": None}).status == "max_rounds"


def test_round_trip_predicts_the_same_to_the_bit(fitted, tmp_path):
    path = fitted.save(tmp_path / "ensemble.npz")
    loaded = dpp.load(path)
    assert isinstance(loaded, SetEnsembleClassifier)
    assert np.array_equal(loaded.predict_proba(PROBE), fitted.predict_proba(PROBE))
    assert loaded.member_statuses_ == fitted.member_statuses_
    assert loaded.fit_report_.status == fitted.fit_report_.status
    assert list(loaded.classes_) == ["a", "b", "c"]


def test_a_damaged_member_is_refused_by_name(fitted, tmp_path):
    path = fitted.save(tmp_path / "ensemble.npz")
    with zipfile.ZipFile(path) as z:
        header = json.loads(str(np.load(path)["header"]))
        names = z.namelist()
    assert "member0.theta.npy" in names
    data = dict(np.load(path))
    data["member1.theta"] = data["member1.theta"] + 1.0  # its digest no longer matches
    np.savez(tmp_path / "bad.npz", **data)
    with pytest.raises(ModelFileError, match="member1.theta"):
        dpp.load(tmp_path / "bad.npz")
    header["params"]["names"] = ["mean"]
    data = dict(np.load(path))
    data["header"] = np.asarray(json.dumps(header))
    np.savez(tmp_path / "names.npz", **data)
    with pytest.raises(ModelFileError, match="params.names"):
        dpp.load(tmp_path / "names.npz")


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({}, r"needs its members: .*pooling_members\(\)"),
        ({"estimators": []}, "non-empty list"),
        (
            {"estimators": [("a", dpp.PoolingClassifier()), ("a", dpp.PoolingClassifier())]},
            "distinct",
        ),
        ({"estimators": [("a", object())]}, "no predict_proba"),
        ({"estimators": [("a", dpp.PoolingClassifier())], "weights": [1.0, 1.0]}, "weights"),
        ({"estimators": [("a", dpp.PoolingClassifier())], "weights": [0.0]}, "weights"),
    ],
)
def test_bad_members_or_weights_are_refused_before_any_fit(kwargs, match):
    with pytest.raises(ValueError, match=match):
        SetEnsembleClassifier(**kwargs).fit(X, Y)


def test_seed_members_vary_the_seed_of_the_tuned_estimator():
    cv = dpp.DPPClassifierCV(dpp.DPPClassifier(n_prototypes=3, random_state=7), pooling=("mean",))
    members = seed_members(cv, (0, 4))
    assert [n for n, _ in members] == ["seed0", "seed4"]
    assert [m.estimator.random_state for _, m in members] == [0, 4]
    assert cv.estimator.random_state == 7  # the template is left alone
    plain = seed_members(dpp.DPPClassifier(), (2,))
    assert plain[0][1].random_state == 2


def _two_class(n=40, seed=3):
    rng = np.random.default_rng(seed)
    X = [rng.normal(size=(rng.integers(2, 9), 3)) + (i % 2) * 0.6 for i in range(n)]
    return X, np.where(np.arange(n) % 2, "dog", "cat")


@pytest.mark.extended
def test_the_raw_vector_ensemble_is_the_per_pooling_selections_to_the_bit(tmp_path):
    """``DPPClassifierCV(**RAW_VECTORS)`` (the default until issue 52's decision,
    ``rule="ensemble"``) is what the suite measured as ``dpp_ensemble``: three selections with
    one pooling each, their predictions combined (the mean of log-probabilities: exact
    per-vector evidence)."""
    X, y = _two_class(60)
    base = dpp.DPPClassifier(n_prototypes=3, max_rounds=4)
    grid = {"l2s": [1e-2, 1e-1], "cv": 3, "max_extensions": 1, "embedding": (None,)}
    cv = dpp.DPPClassifierCV(base, rule="ensemble", **grid).fit(X, y)
    alone = SetEnsembleClassifier(
        [(p, dpp.DPPClassifierCV(base, pooling=(p,), **grid)) for p in ("mean", "max", "gem")]
    ).fit(X, y)
    assert isinstance(cv.best_estimator_, SetEnsembleClassifier)
    for member, (name, sel) in zip(cv.members_, alone.named_estimators_.items(), strict=True):
        assert member["name"] == name
        assert member["params"] == sel.best_params_ and member["rounds"] == sel.best_rounds_
        assert member["score"] == pytest.approx(sel.best_score_, abs=1e-12)
    assert cv.best_params_["estimators"][1][1].get_params() == (
        clone(base).set_params(**cv.members_[1]["params"]).get_params()
    )
    assert cv.beats_prior_ == (cv.best_score_ > cv.prior_score_)
    np.testing.assert_array_equal(cv.predict_proba(X[:9]), alone.predict_proba(X[:9]))
    loaded = dpp.load(cv.save(tmp_path / "default.npz"))
    np.testing.assert_array_equal(loaded.predict_proba(X[:9]), cv.predict_proba(X[:9]))
    assert cv.transform(X[:4]).shape == (4, 9)  # three members' z side by side
    # the default combination decomposes: the members' mean scores, summing to the ensemble's
    from scipy.special import log_softmax

    scores = cv.instance_scores(X[:4])
    totals = np.stack([s.sum(0) for s in scores]) + cv.intercept_
    np.testing.assert_allclose(log_softmax(totals, 1), cv.predict_log_proba(X[:4]), atol=1e-5)
    assert [c.shape[1] for c in cv.soft_assignments(X[:2])] == [9, 9]


# two values, no extension; on an AMD EPYC without AVX-512 one fold fit of the chosen l2 ends
# saturated (float32 rounding differs from processor to processor)
@expects("grid_edge", "chosen_saturated")
def test_the_ensemble_rule_with_one_member_is_the_best_rule():
    X, y = _two_class(30)
    base = dpp.DPPClassifier(n_prototypes=2, max_rounds=2)
    grid = {"l2s": [1e-2, 1e-1], "cv": 2, "max_extensions": 0, "pooling": ("mean",)}
    grid["embedding"] = (None,)
    one = dpp.DPPClassifierCV(base, **grid).fit(X, y)
    best = dpp.DPPClassifierCV(base, rule="best", **grid).fit(X, y)
    assert isinstance(one.best_estimator_, dpp.DPPClassifier) and not hasattr(one, "members_")
    assert one.best_params_ == best.best_params_ and one.best_score_ == best.best_score_
    np.testing.assert_array_equal(one.predict_proba(X[:5]), best.predict_proba(X[:5]))


@pytest.mark.extended  # every kind fitted twice: 11 s
def test_random_state_none_is_a_fresh_seed_for_every_kind_of_estimator(monkeypatch):
    """Issue 45: ``random_state=None`` meant seed 0 for the networks, the pooled regressions
    and the CV folds but a fresh seed for the prototype estimators."""
    import dpp.estimators.base as base

    drawn = []
    real = base.resolve_seed

    def spy(random_state):
        seed = real(random_state)
        drawn.append((random_state, seed))
        return seed

    # the networks and the pooled regressions draw theirs in the shared prepare_sets (base)
    for module in ("dpp.estimators.base", "dpp.estimators.cv"):
        monkeypatch.setattr(f"{module}.resolve_seed", spy)
    X, y = _two_class(20)
    kinds = [
        dpp.DPPClassifier(n_prototypes=2, max_rounds=1, random_state=None),
        dpp.AttentionMILClassifier(max_epochs=1, embedding=(4,), random_state=None),
        dpp.PoolingClassifier(Cs=[1.0], max_extensions=0, random_state=None),
    ]
    for est in kinds:
        drawn.clear()
        est.fit(X, y)
        assert drawn and all(state is None for state, _ in drawn), type(est).__name__
    seeds = {real(None) for _ in range(5)}
    assert len(seeds) == 5  # fresh every time
    assert real(7) == 7 and real(np.int64(3)) == 3


def test_the_decision_ships_the_best_rule_worse_on_no_family():
    """``decide``: the largest mean gain over dpp_mean among the rules that no task family finds
    significantly worse; units pair within one run only."""
    from lab import decide

    rng = np.random.default_rng(0)
    records = []
    for run in ("a", "b"):
        for task in ("witness_d10_r10", "proportion_d10_c3"):
            for fold in range(12):
                base = rng.uniform(0.6, 0.8)
                witness = task.startswith("witness")
                gains = {  # broad: +3 points everywhere; risky: +10 on witness, -3 on proportion
                    "dpp_mean": 0.0, "broad": 0.03 + 0.001 * fold,
                    "risky": (0.10 if witness else -0.03) + 0.001 * fold,
                }  # fmt: skip
                for method, gain in gains.items():
                    records.append({"run": run, "task": task, "draw": 0, "fold": fold,
                                    "method": method, "accuracy": base + gain})  # fmt: skip
    result = decide(records, ["broad", "risky"])
    rows = result["rows"]
    assert rows["risky"]["mean"] > rows["broad"]["mean"]  # more on average...
    assert rows["risky"]["worse_on"] == ["proportion"] and not rows["risky"]["eligible"]
    assert rows["broad"]["eligible"] and result["chosen"] == "broad"
    assert rows["broad"]["units"] == 48  # 2 runs x 2 tasks x 12 folds, paired within a run
    # a candidate behind the reference on average, worse on no family, is never chosen
    noise = (0.01, -0.012, 0.008, -0.01)  # a mean of -0.001, within noise on every family
    behind = [{**r, "method": "behind", "accuracy": r["accuracy"] + noise[r["fold"] % 4]}
              for r in records if r["method"] == "dpp_mean"]  # fmt: skip
    result = decide(records + behind, ["behind"])
    assert result["rows"]["behind"]["eligible"] and result["rows"]["behind"]["mean"] < 0
    assert result["chosen"] is None
    # nor one ahead within noise: a gain that is not significant over all units is no gain
    base = [r for r in records if r["method"] == "dpp_mean"]
    jitter = np.random.default_rng(1).normal(0.0, 0.02, len(base))  # +0.1 points in 2 on average
    ahead = [{**r, "method": "ahead", "accuracy": r["accuracy"] + 0.001 + e}
             for r, e in zip(base, jitter - jitter.mean(), strict=True)]  # fmt: skip
    result = decide(records + ahead, ["ahead"])
    row = result["rows"]["ahead"]
    assert row["eligible"] and row["mean"] > 0 and row["p"] >= 0.05 and not row["gains"]
    assert result["chosen"] is None
    from lab.report import decision_table

    assert "Chosen: none (dpp_mean stays" in decision_table(records + ahead, ["ahead"])
    assert "ahead ahead within noise" in decision_table(records + ahead, ["ahead"])


def test_every_estimator_names_its_parameters_and_the_shared_block_agrees():
    """Issue 45: explicit keyword parameters in every ``__init__`` (no signature rewriting, no
    ``locals()`` storing); a parameter of the shared block has its one default everywhere."""
    import inspect

    from dpp.estimators import ESTIMATORS, DPPClassifierCV
    from dpp.estimators.base import SHARED_PARAMETERS

    for cls in [*ESTIMATORS.values(), DPPClassifierCV, SetEnsembleClassifier]:
        init = cls.__init__
        assert "__signature__" not in vars(init), cls.__name__  # the source is the signature
        params = inspect.signature(init).parameters
        assert all(p.kind is not p.VAR_KEYWORD for p in params.values()), cls.__name__
        est = cls()
        names = [n for n in params if n != "self"]
        assert sorted(est.get_params(deep=False)) == sorted(names)
        assert {n: getattr(est, n) for n in names} == {n: params[n].default for n in names}
        for name, default in SHARED_PARAMETERS.items():
            if name == "verbose" and cls is DPPClassifierCV:
                # the selection's own: its progress bar, on where stderr is a terminal
                assert params[name].default == "auto"
            elif name in params:
                assert params[name].default == default, (cls.__name__, name)
        with pytest.raises(TypeError, match="unexpected keyword argument 'no_such'"):
            cls(no_such=1)
    prototype = [
        c for c in ESTIMATORS.values() if issubclass(c, dpp.estimators.PrototypeClassifier)
    ]
    # every prototype estimator takes the whole block, but the embedded DPP: trained by Adam
    # epochs from k-means in its embedding space, it has no optimizer, init or warm start; and
    # the class prior, a closed form, takes none of it (issue 55)
    embedded = {"init", "warm_start", "optimizer", "optimizer_options"}
    for cls in prototype:
        block = set(SHARED_PARAMETERS) - (embedded if cls is dpp.EmbeddedDPPClassifier else set())
        if cls is dpp.ClassPriorClassifier:
            assert not set(SHARED_PARAMETERS) & set(inspect.signature(cls.__init__).parameters)
            continue
        assert block <= set(inspect.signature(cls.__init__).parameters), cls.__name__


def test_the_peer_table_compares_task_means_on_the_units_every_method_finished():
    from lab import peer_table

    records = (
        [
            {"task": "t1", "draw": 0, "fold": f, "method": m, "accuracy": acc}
            for f in range(3)
            for m, acc in (("dpp", 0.8), ("net_a", 0.7), ("net_b", 0.9 if f < 2 else 0.1))
        ]
        + [  # net_b never finished fold 3: the units shared by all are folds 0-2
            {"task": "t1", "draw": 0, "fold": 3, "method": m, "accuracy": 0.0}
            for m in ("dpp", "net_a")
        ]
        + [
            {"task": "t2", "draw": 0, "fold": 0, "method": m, "accuracy": acc}
            for m, acc in (("dpp", 0.6), ("net_a", 0.6))
        ]
    )
    table = peer_table(records, "dpp", ["net_a", "net_b"])
    assert "| t1 | 3 | 80.0 | net_a 70.0 | +10.0 |" in table  # net_b: 63.3 on folds 0-2
    assert "| t2 | 1 | 60.0 | net_a 60.0 | +0.0 |" in table
    assert "on 2 of 2 tasks" in table


def _folds(y, k=3):
    from sklearn.model_selection import StratifiedKFold

    return list(StratifiedKFold(k, shuffle=True, random_state=0).split(np.zeros(len(y)), y))


@pytest.mark.extended  # five selections and their refits: about 60 s on 2 cores
@pytest.mark.parametrize(
    "rule, embedded", [("best", False), ("ensemble", False), ("ensemble", True)]
)  # ensemble with an embedded member: the default's
def test_the_search_contract_best_params_rebuild_best_estimator(rule, embedded):
    """Issue 53: scikit-learn's contract for every rule. ``best_params_`` rebuild
    ``best_estimator_`` (the chosen rounds are ``round_cap``; the ensemble's parameters are
    its members with their choices), and ``best_score_`` is the validation score of what
    ``best_estimator_`` is, fold by fold."""
    from dpp.metrics import weighted_score

    X, y = _two_class(48)
    folds = _folds(y)
    base = dpp.DPPClassifier(n_prototypes=3, max_rounds=4)
    grid = {"l2s": [1e-2, 1e-1], "cv": folds, "max_extensions": 1}
    grid["embedding"] = (None,)  # the paper's model alone; with the default's rule, a small
    if embedded:  # an embedded member on its own settings
        grid.update(embedding=(None, (8,)), embedding_seeds=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dpp.errors.FitWarning)
        cv = dpp.DPPClassifierCV(base, rule=rule, **grid).fit(X, y)
    params = cv.best_params_
    if embedded:
        assert "gem_embedded" in [m["name"] for m in cv.members_]

    def build():
        if "estimators" in params:
            return SetEnsembleClassifier(**params)
        if "embedding" in params:  # one member on an embedding kept
            return dpp.EmbeddedDPPClassifier.like(cv.estimator, **params)
        return clone(cv.estimator).set_params(**params)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dpp.errors.FitWarning)
        again = build().fit(X, y)
    np.testing.assert_allclose(again.predict_proba(X), cv.predict_proba(X), atol=1e-6)
    timing = ("mean_fit_time", "std_fit_time", "mean_score_time", "std_score_time")
    for key in (*timing, "rank_test_score"):
        assert cv.cv_results_[key].shape == (len(cv.cv_results_["params"]),), key
    assert np.all(cv.cv_results_["mean_fit_time"] > 0)
    if "estimators" not in params and "embedding" in params:  # it stops on its own 20 %
        assert params["validation_fraction"] == 0.2 and "round_cap" not in params
        return
    if "estimators" not in params:
        assert params["round_cap"] == cv.best_rounds_ and params["validation_fraction"] == 0.0
        return
    kept = [m["name"] for m in cv.members_ if m["kept"]]
    assert [n for n, _ in params["estimators"]] == kept
    assert kept[:3] == ["mean", "max", "gem"]
    # the ensemble's own score: its members refitted on each fold as the candidates were
    # (l2 times the fold's share of the sets), combined, scored on the held-out sets
    scores = []
    for fit_idx, held_idx in folds:
        share = len(fit_idx) / len(y)
        fold = SetEnsembleClassifier(
            [(n, clone(m).set_params(l2=m.l2 * share)) for n, m in params["estimators"]]
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", dpp.errors.FitWarning)
            fold.fit([X[i] for i in fit_idx], y[fit_idx])
        labels = (y[held_idx][:, None] == fold.classes_[None]).astype(float)
        log_p = fold.predict_log_proba([X[i] for i in held_idx])
        scores.append(weighted_score(log_p, labels, np.ones(len(held_idx)), "log_likelihood"))
    # float32 fits; the search's run on one padded layout for every fold (the same fit up to
    # the order of float32 sums, which four rounds of L-BFGS carry on: 3.9e-4 apart on an AMD
    # EPYC without AVX-512, under 2e-4 with it), an embedded member's folds batched (its fits
    # alone to 1e-3: tests/test_neural.py, test_a_batched_selection_equals_its_fits_one_by_one)
    assert cv.best_score_ == pytest.approx(np.mean(scores), abs=1e-3)
    assert all(cv.best_score_ != pytest.approx(m["score"], abs=1e-3) for m in cv.members_)
    assert cv.beats_prior_ == (cv.best_score_ > cv.prior_score_)
