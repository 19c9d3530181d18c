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
    assert standard.status is None and fitted[2].n_iter_ == 1
    assert infoloss.infoloss is not None and infoloss.rounds == fitted[3].n_iter_
    assert prior.prior is not None and abs(sum(prior.prior) - 1) < 1e-9
    assert pooled.selection.C == fitted[5].C_ and pooled.status in ("converged", "max_rounds")


def test_the_model_file_writes_and_reads_the_report(fitted, tmp_path):
    for i, est in enumerate(fitted):
        loaded = dpp.load(est.save(tmp_path / f"{i}.npz"))
        assert loaded.fit_report_ == est.fit_report_


def test_fit_info_is_a_deprecated_read_only_view(fitted):
    est = fitted[0]
    with pytest.warns(DeprecationWarning, match="fit_report_"):
        view = est.fit_info_
    assert dict(view) == est.fit_report_.to_dict()
    with pytest.raises(TypeError):
        view["status"] = "converged"


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
    for field, value in (("early_stopping", [1, 2]), ("steps", 3)):  # not objects: refused
        header["info"] = {**fitted[0].fit_report_.to_dict(), field: value}
        members["header"] = np.asarray(json.dumps(header))
        np.savez(tmp_path / "bad.npz", **members)
        with pytest.raises(ModelFileError, match=f"info is not a fit report.*{field}"):
            dpp.load(tmp_path / "bad.npz")
