"""Issue 56: what a newcomer meets first (the selection's progress, messages, scripts)."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import expects

import dpp
from dpp.estimators import RAW_VECTORS

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.extended  # a selection compiled
@pytest.mark.filterwarnings("ignore::dpp.errors.FitWarning")  # two values, two rounds
def test_the_selections_progress_bar_knows_its_total_from_the_start(monkeypatch):
    """The grid's fits and the refit are the bar's total before the first fit; without values
    added past an edge it never grows, and it ends full."""
    import dpp.estimators.cv as cv

    bars = []

    def recording(total, desc, enabled, unit="fit"):
        made = cv_bar(total, desc, enabled, unit)
        bars.append((total, made))
        return made

    cv_bar = cv.bar
    monkeypatch.setattr(cv, "bar", recording)
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(int(rng.integers(3, 8)), 3)) + (i % 2) for i in range(24)]
    y = np.arange(24) % 2
    search = dpp.DPPClassifierCV(
        dpp.DPPClassifier(n_prototypes=2, max_rounds=2), l2s=(1e-2, 1.0), pooling=["mean"],
        embedding=(None,), cv=2, max_extensions=0, verbose=True,
    ).fit(X, y)  # fmt: skip
    ((start, made),) = bars
    assert start == 1 * 2 * 2 + 1  # one pooling x 2 folds x 2 values, and the refit
    assert made.total == start and made.n == start
    assert search.best_estimator_ is not None


def test_the_prediction_script_prints_no_deprecation_warning():
    """scripts/predict.py imported a moved module name: every run, --help too, warned."""
    out = subprocess.run(
        [sys.executable, "-W", "error::DeprecationWarning", str(ROOT / "scripts" / "predict.py"),
         "--help"], capture_output=True, text=True, cwd=ROOT,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "DeprecationWarning" not in out.stderr


def test_the_readmes_first_command_installs_what_the_main_job_needs_and_no_extra():
    """Issue 56: the main job's install takes no extra; the test command installs the test
    extra itself (the same two commands open the docs' first page)."""
    for page in (ROOT / "README.md", ROOT / "docs" / "index.md"):
        block = page.read_text().split("```bash\n", 1)[1].split("```", 1)[0].splitlines()
        first, second = block[0], block[1]
        assert "pip install -e . &&" in first and "[" not in first, (page, first)
        assert first.rstrip().endswith("python experiments/run.py")
        assert "pip install -e '.[test]'" in second and second.endswith("python -m pytest -n 2")


@pytest.mark.extended  # a subprocess run of the CLI: the default tier keeps near 5 minutes
def test_help_says_what_dpp_is_its_groups_and_where_the_docs_are():
    """Issue 56: --help opens with what dpp is; it lists every option of the user-facing groups
    (and only those that exist), not the internal dpp_defaults groups; it names the docs."""
    out = subprocess.run(
        [sys.executable, "experiments/run.py", "--help"], capture_output=True, text=True,
        cwd=ROOT, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert text.startswith("dpp: Discriminative Probabilistic Prototype learning")
    assert "docs/index.md" in text and "dpp_defaults" not in text
    groups = text.split("== Groups ==")[1].split("== Examples ==")[0]
    listed = {}
    for line in groups.replace(",\n", ", ").splitlines():
        if ":" in line:
            group, options = line.split(":", 1)
            listed[group.strip()] = {o.split("(")[0].strip() for o in options.split(",")}
    for group, options in listed.items():
        files = {p.stem for p in (ROOT / "configs" / group).glob("*.yaml")}
        assert options == files, (group, options ^ files)


@pytest.mark.extended  # a subprocess run of the page script: the default tier keeps near 5 minutes
def test_the_benchmark_page_is_what_the_committed_records_give():
    """docs/benchmarks.md is generated from benchmarks/*/suite.json, never typed (issue 52)."""
    out = subprocess.run(
        [sys.executable, "benchmarks/page.py", "--check"], capture_output=True,
        text=True, cwd=ROOT, timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr


def test_small_data_folds_hold_every_set_out_once_where_a_share_would_be_too_few():
    """Issue 56: under 10 held-out sets (46 sets at 0.2) early stopping holds out every set once,
    in round(1 / fraction) stratified folds; from 46 sets the share is enough; under 10 sets
    in all there are too few even so."""
    from dpp.selection import MIN_VALIDATION_SETS, round_folds

    labels = np.eye(2)[np.arange(30) % 2]
    folds = round_folds(labels, 0.2, seed=0)
    assert len(folds) == 5
    held = np.sort(np.concatenate([v for _, v in folds]))
    np.testing.assert_array_equal(held, np.arange(30))  # a partition: each set once
    for fit, val in folds:
        assert np.intersect1d(fit, val).size == 0 and fit.size + val.size == 30
        assert np.bincount(labels[val].argmax(1)).tolist() == [3, 3]  # stratified
    assert len(round_folds(labels[:18], 0.5, seed=0)) == 2  # 9 would be held out
    assert round_folds(np.eye(2)[np.arange(46) % 2], 0.2, seed=0) is None  # 10 held out
    assert round_folds(labels[: MIN_VALIDATION_SETS - 1], 0.2, seed=0) is None
    assert round_folds(labels, 0.0, seed=0) is None  # early stopping off


@pytest.mark.extended  # 12 s: Adam fits alone and together (the default tier's 5 minutes)
@expects("epoch_cap")  # 2 epochs
def test_adam_fits_widen_a_share_too_small_to_ten_held_out_sets():
    """The Adam-trained fits' hold-out (``widen``): a share under 10 sets becomes exactly 10,
    stratified, where at least 10 are left to fit (20-45 sets at 0.2); under 20 sets it is
    skipped as before, and a share of 10 or more is as without it. The embedded DPP widens by
    default, the networks do not."""
    from dpp.selection import MIN_VALIDATION_SETS, hold_out, holdout_split

    for n in (20, 33, 45):
        labels = np.eye(2)[np.arange(n) % 2]
        split = hold_out(labels, 0.2, 0, "trained for max_epochs", widen=True)
        assert split.skipped is None and split.validation.size == MIN_VALIDATION_SETS
        assert np.union1d(split.fit, split.validation).tolist() == list(range(n))
        assert np.bincount(labels[split.validation].argmax(1)).tolist() == [5, 5]
        plain = hold_out(labels, 0.2, 0, "stopping by tol")
        assert plain.fit is None and "(< 10)" in plain.skipped
    few = hold_out(np.eye(2)[np.arange(19) % 2], 0.2, 0, "trained for max_epochs", widen=True)
    assert few.fit is None and few.skipped.startswith("early stopping skipped: 4 validation")
    labels = np.eye(2)[np.arange(60) % 2]
    for widen in (False, True):  # 12 held out: the share, as ever
        split = hold_out(labels, 0.2, 3, "", widen=widen)
        np.testing.assert_array_equal(split.validation, holdout_split(labels, 0.2, 3)[1])
    assert hold_out(labels, 0.0, 0, "", widen=True).fit is None  # early stopping off
    # the embedded DPP widens by default (its benchmark), the networks do not (theirs)
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(3, 2)) + (i % 2) for i in range(30)]
    y = np.arange(30) % 2
    small = {"n_prototypes": 2, "embedding": (4,), "max_epochs": 2, "weight_decay": 5e-3}
    est = dpp.EmbeddedDPPClassifier(**small).fit(X, y)
    early = est.fit_report_.early_stopping
    assert early.skipped is None and early.validation_sets == MIN_VALIDATION_SETS
    # batched as a selection's folds are (fit_together), each widened fit ends where it does
    # alone, bit for bit: the same held-out sets, epochs and probabilities
    from dpp.estimators.adam import fit_together
    from dpp.estimators.inputs import labelled_sets

    parts = [labelled_sets(X, y)[0], labelled_sets(X[2:], y[2:])[0]]
    batched = fit_together([dpp.EmbeddedDPPClassifier(**small) for _ in parts], parts)
    for one, part in zip(batched, parts, strict=True):
        alone = dpp.EmbeddedDPPClassifier(**small).fit(part)
        assert one.fit_report_.early_stopping == alone.fit_report_.early_stopping
        assert one.fit_report_.early_stopping.validation_sets == MIN_VALIDATION_SETS
        np.testing.assert_array_equal(one.predict_log_proba(X), alone.predict_log_proba(X))
    from dpp.estimators.io import EMBEDDED_ADDED

    assert EMBEDDED_ADDED["widen_validation"] is False  # older files
    assert "widen_validation" not in dpp.AttentionMILClassifier().get_params()  # 0.3: gone
    assert "widen_validation" not in dpp.DeepSetsClassifier().get_params()


@pytest.mark.filterwarnings("ignore::dpp.errors.FitWarning")
def test_a_small_fit_chooses_its_rounds_on_the_folds_in_one_program():
    """30 training sets: the folds' pooled validation curve chooses the rounds (its first best),
    the refit stops there, every fold and the refit run one compiled program, and verbose says
    what was done instead of a held-out share."""
    from dpp.datasets.generated import make_generated
    from dpp.experiment.compilation import CompileCounter

    data = make_generated(num_sets=30, dim=4, min_size=2, max_size=9, seed=2)
    est = dpp.DPPClassifier(n_prototypes=3, max_rounds=4, tol=0.0, patience=2, random_state=0)
    with CompileCounter() as counter:
        est.fit(data.sets)
    early = est.fit_report_.early_stopping
    assert (early.source, early.folds, early.validation_sets) == ("cross_validation", 5, 30)
    assert early.skipped is None and early.validation_fraction == 0.2
    history = np.array(early.validation_history, dtype=float)
    assert history.size == early.monitored + 1 and np.all(np.isfinite(history))
    assert early.best == int(np.argmax(history))
    assert est.fit_report_.rounds <= early.best
    assert counter.programs("coordinate_ascent") <= 1, counter.names
    again = dpp.FitReport.from_dict("dpp", est.fit_report_.to_dict())
    assert again.early_stopping == early  # the model file keeps the folds


def test_a_verbose_small_fit_says_its_rounds_came_from_folds(capsys):
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(4, 3)) + (i % 2) for i in range(20)]
    dpp.DPPClassifier(n_prototypes=2, max_rounds=2, verbose=True).fit(X, np.arange(20) % 2)
    err = capsys.readouterr().err
    assert "early stopping by 5 folds: a held-out share of 4 sets would be too few" in err


@pytest.mark.extended  # twenty plain fits: about 40 s
@pytest.mark.filterwarnings("ignore::dpp.errors.FitWarning")  # rounds by tol saturate
def test_a_plain_fit_on_the_issues_small_data_does_not_saturate():
    """Issue 56's case: 45 sets of 5-30 vectors in 5-D, a set positive when a few shifted
    vectors are in it. A plain DPPClassifier() ended saturated (99 % one-hot codes) at 0.76
    test accuracy; with its rounds chosen on folds it does not saturate on any of five draws,
    and scores higher than rounds run to tol."""
    from dpp.datasets.suite import make_witness
    from dpp.model.fitted import SATURATED_FRACTION

    gains = []
    for seed in range(5):
        sets = make_witness(num_sets=90, dim=5, min_size=5, max_size=30, seed=seed).sets
        train, test = sets.subset(np.arange(45)), sets.subset(np.arange(45, 90))
        y = np.asarray(test.labels).argmax(1)
        plain = dpp.DPPClassifier(random_state=0).fit(train)
        assert plain.fit_report_.status != "saturated", plain.fit_report_.reason
        assert plain.fit_report_.prototypes.saturated_fraction < SATURATED_FRACTION
        tol = dpp.DPPClassifier(validation_fraction=0.0, random_state=0).fit(train)
        gains.append(plain.score(test, y) - tol.score(test, y))
    assert np.mean(gains) > 0, gains


@pytest.mark.extended  # two selections on the README's sets: about 40 s
def test_a_selection_warns_about_what_it_returns_not_the_candidates_it_passed_over():
    """Issue 56 / 53: on the README's sets the l2 = 1 candidate saturates in some fold fits and
    loses; that is a row of cv_results_, not a warning. A chosen candidate that saturated is a
    warning naming it by its grid values (not the fold's l2 or the search's settings)."""
    import re
    import warnings

    rng = np.random.default_rng(0)
    X = [rng.normal(size=(rng.integers(2, 14), 5)) + (i % 2) for i in range(150)]
    y = np.where(np.arange(150) % 2, "dog", "cat")
    base = dpp.DPPClassifier(n_prototypes=4)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        search = dpp.DPPClassifierCV(base, pooling=("mean",), embedding=(None,)).fit(X, y)
    assert not [w for w in caught if w.category is dpp.FitWarning], [str(w.message) for w in caught]
    results = search.cv_results_
    statuses = dict(zip(results["param_l2"], results["fit_status"], strict=True))
    assert "saturated" in statuses[1.0] and search.best_params_["l2"] != 1.0
    with pytest.warns(dpp.FitWarning) as caught:
        dpp.DPPClassifierCV(
            base, l2s=(1.0,), pooling=("mean",), embedding=(None,), max_extensions=0
        ).fit(X, y)
    (message,) = [str(w.message) for w in caught if "chosen candidate" in str(w.message)]
    pattern = r"the chosen candidate \(n_prototypes=4, pooling='mean', l2=1\) ended saturated "
    assert re.search(pattern + r"in \d of 5 fold fits", message), message
    assert "validation_fraction" not in message and "0.8" not in message


def test_pooled_lr_on_separable_sets_says_why_its_c_lies_at_the_edge_instead_of_warning(caplog):
    """Issue 56: the README's run logged a warning that C = 1e5 lies at the weakest edge, on
    sets whose pooled means separate the classes: there no finite C is best, and the log says
    that. Where held-out sets are misclassified, the edge stays a FitWarning."""
    import logging
    import warnings

    rng = np.random.default_rng(0)
    X = [rng.normal(size=(5, 2)) + 3 * (i % 2) for i in range(20)]
    y = np.arange(20) % 2
    with warnings.catch_warnings(record=True) as caught, caplog.at_level(logging.INFO, "dpp"):
        warnings.simplefilter("always")
        clf = dpp.PoolingClassifier().fit(X, y)
    assert clf.C_position_ == "weakest edge" and not caught
    assert "separable in these features" in caplog.text
    flipped = np.where(np.arange(20) < 4, 1 - y, y)  # four sets mislabelled: not separable
    with pytest.warns(dpp.FitWarning, match="weakest edge"):
        dpp.PoolingClassifier(Cs=(1e-4, 1e-3), max_extensions=0).fit(X, flipped)


def test_a_grid_extended_past_its_edge_holds_the_values_a_user_writes():
    """Issue 53: an extension step of 10 below 1e-5 printed as 1.0000000000000002e-06."""
    from dpp.selection import choose_on_path

    choice = choose_on_path([1e-3, 1e-4, 1e-5], [0.0, 1.0, 2.0], lambda v: -np.log10(v), 3)
    assert choice.added == [1e-06, 1e-07, 1e-08]
    assert [repr(v) for v in choice.values[-3:]] == ["1e-06", "1e-07", "1e-08"]


@pytest.mark.extended  # a selection over three poolings compiled: about 40 s
@pytest.mark.filterwarnings("ignore::dpp.errors.FitWarning")
def test_an_attribute_the_default_ensemble_lacks_says_where_to_find_it():
    """Issue 53: a bare AttributeError named only the attribute."""
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(int(rng.integers(2, 6)), 3)) + (i % 2) for i in range(20)]
    y = np.arange(20) % 2
    base = dpp.DPPClassifier(n_prototypes=2, max_rounds=1)
    search = dpp.DPPClassifierCV(  # every pooling's winner kept: 'mean' among them
        base, l2s=(0.1,), cv=2, max_extensions=0, **RAW_VECTORS
    ).fit(X, y)
    where = r"named_estimators_\['mean'\]\.prototypes_.*rule='best'"
    with pytest.raises(AttributeError, match=where):
        search.prototypes_  # noqa: B018
    with pytest.raises(AttributeError, match="'DPPClassifierCV' object has no attribute 'weights'"):
        search.weights  # noqa: B018
    with pytest.raises(AttributeError, match=r"per-vector evidence: instance_scores\(X\)"):
        search.attention_weights  # noqa: B018
    assert search.classes_.tolist() == [0, 1]  # its own attributes, and the refit's, as before


def test_attention_weights_on_a_model_without_attention_names_its_per_vector_evidence():
    """Issue 53: ``attention_weights`` (attention MIL's reading) was a bare ``AttributeError``
    on the default model; every set classifier without it names what it has instead."""
    for est in (dpp.DPPClassifier(), dpp.DPPClassifierCV(), dpp.SetEnsembleClassifier([])):
        assert not hasattr(est, "attention_weights")
        with pytest.raises(AttributeError, match=r"instance_scores\(X\).* or instance_proba\(X\)"):
            est.attention_weights  # noqa: B018
    with pytest.raises(AttributeError, match="'DPPClassifier' object has no attribute 'weights'"):
        dpp.DPPClassifier().weights  # noqa: B018
    assert callable(dpp.AttentionMILClassifier().attention_weights)  # its own, untouched


@pytest.mark.extended  # 17 s: every set classifier fitted (the default tier's 5 minutes)
@pytest.mark.filterwarnings("ignore::dpp.errors.FitWarning")  # short fits, few sets
def test_log_loss_scoring_takes_every_set_classifiers_probabilities_without_a_warning():
    """scikit-learn's ``log_loss`` (``scoring="neg_log_loss"`` of a search) warns where a row
    of probabilities is off 1 by more than 1.5e-8; ``exp`` of float32-accurate
    log-probabilities was off by up to 6e-8, so every set classifier's search warned."""
    import warnings

    from sklearn.metrics import log_loss

    rng = np.random.default_rng(4)
    X = [rng.normal(size=(int(rng.integers(2, 9)), 4)) + (i % 2) for i in range(30)]
    y = np.arange(30) % 2
    quick = {"max_rounds": 2, "validation_fraction": 0.0}
    estimators = (
        dpp.DPPClassifier(n_prototypes=3, **quick),
        dpp.AttentionMILClassifier(max_epochs=2),
        dpp.PoolingClassifier(),
        dpp.SetEnsembleClassifier([("a", dpp.DPPClassifier(n_prototypes=2, **quick))]),
    )
    for est in estimators:
        proba = est.fit(X, y).predict_proba(X)
        assert np.abs(proba.sum(axis=1) - 1.0).max() <= 4 * np.finfo(np.float64).eps, est
        np.testing.assert_allclose(np.log(proba), est.predict_log_proba(X), atol=1e-6)
        with warnings.catch_warnings():
            warnings.simplefilter("error", UserWarning)
            log_loss(y, proba)
