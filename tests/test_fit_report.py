"""Issue 35: the typed fit report (``dpp.FitReport``) of every estimator; its JSON round trip."""

import json
import warnings

import numpy as np
import pytest

import dpp
from dpp.errors import ModelFileError
from dpp.model import STATUSES, FitReport
from dpp.model_file import jsonable


@pytest.fixture(scope="module")
def fitted():
    rng = np.random.default_rng(3)
    X = [rng.normal(size=(rng.integers(2, 9), 3)) * 5 + 100 + (i % 3) for i in range(60)]
    y = np.arange(60) % 3
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dpp.FitWarning)
        return [
            dpp.DPPClassifier(n_prototypes=3, max_rounds=3, random_state=0).fit(X, y),
            dpp.DPPClassifier(n_prototypes=3, max_rounds=2, validation_fraction=0,
                              per_prototype_beta=True, random_state=0).fit(X, y),
            dpp.StandardPrototypeClassifier(n_prototypes=3).fit(X, y),
            dpp.InfoLossClassifier(n_prototypes=3).fit(X, y),
            dpp.ClassPriorClassifier().fit(X, y),
            dpp.PoolingClassifier(Cs=(1.0,), cv=2).fit(X, y),
        ]  # fmt: skip


def test_every_estimator_carries_a_typed_report_that_survives_json(fitted):
    for est in fitted:
        report = est.fit_report_
        assert isinstance(report, FitReport) and report.method == est.method
        assert report.status is None or report.status in STATUSES
        assert report.history == tuple(float(h) for h in est.history_)  # one history
        text = json.dumps(jsonable(report.to_dict()))
        assert FitReport.from_dict(report.method, json.loads(text), report.history) == report
    dpp_report, to_cap, standard, infoloss, prior, pooled = (e.fit_report_ for e in fitted)
    assert dpp_report.prototypes.saturated_fraction is not None
    assert dpp_report.early_stopping.source in ("validation_fraction", None)
    assert to_cap.early_stopping is None and len(to_cap.prototypes.beta) == 3
    assert len(to_cap.history) == to_cap.rounds + 1 and fitted[1].n_iter_ == to_cap.rounds
    assert standard.status == "converged" and fitted[2].n_iter_ == 1 and standard.rounds == 1
    assert prior.status == "converged" and fitted[4].n_iter_ == 1
    assert infoloss.status in ("converged", "max_rounds") and "rounds" in infoloss.reason
    assert infoloss.infoloss is not None and infoloss.rounds == fitted[3].n_iter_
    assert prior.prior is not None and abs(sum(prior.prior) - 1) < 1e-9
    assert pooled.selection.C == fitted[5].C_ and pooled.status in ("converged", "max_rounds")


def test_the_model_file_writes_and_reads_the_report(fitted, tmp_path):
    for i, est in enumerate(fitted):
        loaded = dpp.load(est.save(tmp_path / f"{i}.npz"))
        assert loaded.fit_report_ == est.fit_report_


def test_one_vocabulary_old_names_read_unknown_refused(fitted, tmp_path):
    old = FitReport.from_dict("pooling", {"status": "iteration_limit", "C": 1.0})
    assert old.status == "max_rounds"
    with pytest.raises(ValueError, match="status must be one of"):
        FitReport("dpp", status="finished")
    path = fitted[0].save(tmp_path / "m.npz")
    with np.load(path) as data:
        members = {k: data[k] for k in data.files}
    header = json.loads(str(members["header"]))
    header["info"]["status"] = "finished"
    members["header"] = np.asarray(json.dumps(header))
    np.savez(tmp_path / "bad.npz", **members)
    with pytest.raises(ModelFileError, match="info"):
        dpp.load(tmp_path / "bad.npz")
    info = fitted[0].fit_report_.to_dict()
    for field, value, named in (
        ("early_stopping", [1, 2], "early_stopping"),  # not objects: refused
        ("prototypes", {**info["prototypes"], "steps": 3}, "steps"),
        ("schema", 3, "schema 3"),  # a newer writer's
        ("steps", {}, "unknown key 'steps'"),  # a flat report's key in a versioned one
    ):
        header["info"] = {**info, field: value}
        members["header"] = np.asarray(json.dumps(header))
        np.savez(tmp_path / "bad.npz", **members)
        with pytest.raises(ModelFileError, match=f"info is not a fit report.*{named}"):
            dpp.load(tmp_path / "bad.npz")


def _flat(report: FitReport) -> dict:
    """The flat dict report the files before the schema version held (their ``to_dict``)."""
    d = {"status": report.status, "status_reason": report.reason or None}
    if report.prototypes is not None and report.unit == "round":
        d["converged"] = report.converged
    d["epochs" if report.unit == "epoch" else "rounds"] = report.rounds
    d["seconds"] = report.seconds
    for part in (report.prototypes, report.infoloss, report.selection):
        if part is not None:
            d.update(part.to_dict())
    if report.prior is not None:
        d["prior"] = list(report.prior)
    if report.early_stopping is not None:
        d["early_stopping"] = report.early_stopping.to_dict()
    return {k: v for k, v in d.items() if v is not None}


def test_a_report_is_versioned_and_nested_and_old_flat_files_still_load(fitted, tmp_path):
    """Issue 45: the JSON form was read back by guessing from which keys were present; it has a
    schema version and one key per sub-report, and a model file of the flat form loads with
    the same report and predictions."""
    X = [np.full((3, 3), 100.0 + i) for i in range(3)]
    for i, est in enumerate(fitted):
        info = est.fit_report_.to_dict()
        assert info["schema"] == dpp.model.report.SCHEMA_VERSION
        parts = {"early_stopping", "prototypes", "infoloss", "selection"}
        assert all(isinstance(info[k], dict) for k in parts & set(info))
        path = est.save(tmp_path / f"{i}.npz")
        with np.load(path) as data:
            members = {k: data[k] for k in data.files}
        header = json.loads(str(members["header"]))
        header["info"] = jsonable(_flat(est.fit_report_))
        members["header"] = np.asarray(json.dumps(header))
        np.savez(tmp_path / f"old{i}.npz", **members)
        old = dpp.load(tmp_path / f"old{i}.npz")
        assert old.fit_report_ == est.fit_report_
        np.testing.assert_array_equal(old.predict_proba(X), est.predict_proba(X))


@pytest.mark.extended  # a network and a selection compiled: about 13 s
def test_verbose_shows_progress_in_a_session_without_logging(capsys, caplog):
    """Issue 45: ``verbose=True`` logged at INFO, which a plain Python session drops: nothing
    showed. Where logging is not configured, the lines go to stderr (and a selection draws a
    progress bar there); where it is (the command line), to the log."""
    import logging

    from dpp.solvers.progress import say

    logger = logging.getLogger("dpp.solvers.progress")
    say(logger, "round %d", 1)  # a DPP fit's round log goes this way
    assert capsys.readouterr().err == "round 1\n"
    with caplog.at_level(logging.INFO, logger="dpp"):
        say(logger, "round %d", 2)
    assert capsys.readouterr().err == "" and "round 2" in caplog.text
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(4, 3)) + (i % 2) for i in range(40)]
    y = np.arange(40) % 2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dpp.FitWarning)
        dpp.DeepSetsClassifier(embedding=(4,), max_epochs=2, verbose=True).fit(X, y)
        err = capsys.readouterr().err
        assert "deep_sets: early stopping skipped: 8 validation sets" in err
        assert "deep_sets: max_epochs in" in err
        # widen_validation (the embedded DPP's): the share of 8 becomes 10 held out
        # (dpp.selection.hold_out)
        small = {"embedding": (4,), "max_epochs": 2, "verbose": True, "widen_validation": True}
        net = dpp.EmbeddedDPPClassifier(n_prototypes=2, **small).fit(X, y)
        assert "skipped" not in capsys.readouterr().err
        early = net.fit_report_.early_stopping
        assert early.skipped is None and early.validation_sets == 10
        net = dpp.EmbeddedDPPClassifier(n_prototypes=2, **small).fit(X[:19], y[:19])
        assert "early stopping skipped: 4 validation sets" in capsys.readouterr().err
        # issue 56: a verbose DPP fit says what it does instead (40 sets: 8 would be held out)
        dpp.DPPClassifier(n_prototypes=2, max_rounds=2, verbose=True).fit(X, y)
        err = capsys.readouterr().err
        assert "early stopping by 5 folds: a held-out share of 8 sets would be too few" in err
        dpp.DPPClassifier(n_prototypes=2, max_rounds=2, verbose=True).fit(X[:9], y[:9])
        err = capsys.readouterr().err
        assert "early stopping skipped: 2 validation sets (< 10); stopping by tol" in err
        base = dpp.StandardPrototypeClassifier(n_prototypes=2)
        grid = {"l2s": (1.0,), "cv": 2, "max_extensions": 0}
        dpp.DPPClassifierCV(base, verbose=True, **grid).fit(X, y)
        err = capsys.readouterr().err
        assert "DPPClassifierCV: chose {'n_prototypes': 2, 'l2': 1.0}" in err
        assert "against the class prior's -0.6931" in err
        dpp.DPPClassifierCV(base, **grid).fit(X, y)  # quiet by default
        assert capsys.readouterr().err == ""


def test_an_epoch_limit_is_max_epochs_and_old_files_read_so():
    """Issue 56: a fit trained by epochs that hit its cap said max_rounds; it says max_epochs,
    and a report written before (unit epoch, status max_rounds) reads as max_epochs. A round
    cap stays max_rounds."""
    from dpp.model import EarlyStopping, FitReport, epoch_status

    history = (-0.7, -0.6, -0.5, -0.4, -0.3, -0.2)
    rising = EarlyStopping("validation_fraction", 5, 5, 10, None, history, unit="epoch")
    assert epoch_status(rising, None, max_epochs=5)[0] == "max_epochs"
    assert epoch_status(None, "early stopping skipped", max_epochs=5)[0] == "max_epochs"
    old = {"schema": 2, "status": "max_rounds", "reason": "r", "rounds": 5, "unit": "epoch"}
    assert FitReport.from_dict("attention_mil", old).status == "max_epochs"
    rounds = {**old, "unit": "round"}
    assert FitReport.from_dict("dpp", rounds).status == "max_rounds"
