"""Issue 22: runs tracked with MLflow (tracking=mlflow), read back through MLflow's own client."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from test_experiment import FAST, _compose

from dpp.experiment.runner import run

mlflow = pytest.importorskip("mlflow")  # the `tracking` extra, installed with .[test]

REPO = Path(__file__).resolve().parents[1]
QUIET = [*FAST, "verbose=false", "compilation_cache=null"]


def _runs(store: Path, experiment="synthetic"):
    mlflow.set_tracking_uri(f"sqlite:///{store / 'mlflow.db'}")
    return mlflow.search_runs(experiment_names=[experiment])


@pytest.mark.extended  # one of the longest end-to-end runs
def test_a_run_logs_config_metrics_rounds_statuses_and_files(tmp_path):
    store = tmp_path / "mlruns"
    cfg = _compose([*QUIET, "trials=2", "tracking=mlflow", f"tracking.uri={store}"])
    results = run(cfg, output_dir=tmp_path / "run")
    (row,) = _runs(store).itertuples()
    frame = _runs(store)
    assert frame["status"][0] == "FINISHED" and frame["tags.dpp.status"][0] == "complete"
    assert frame["params.model.l2"][0] == "0.01" and frame["params.trials"][0] == "2"
    client = mlflow.tracking.MlflowClient()
    run_id = frame["run_id"][0]
    for method in ("dpp", "standard"):
        history = client.get_metric_history(run_id, f"{method}/accuracy")
        expected = [r["accuracy"] for r in results["trials"] if r["method"] == method]
        assert [m.step for m in history] == [0, 1]
        assert [m.value for m in history] == pytest.approx(expected)
    dpp0 = next(r for r in results["trials"] if r["method"] == "dpp" and r["trial"] == 0)
    rounds = client.get_metric_history(run_id, "dpp/train_L/trial0")
    assert [m.value for m in rounds] == pytest.approx(dpp0["objective_history"])
    betas = client.get_metric_history(run_id, "dpp/beta/trial0")
    assert len(betas) == len(rounds) and betas[-1].value == pytest.approx(
        dpp0["info"]["prototypes"]["beta"]
    )
    assert frame["tags.dpp/status/trial0"][0] == dpp0["fit_status"]
    artifacts = {a.path for a in client.list_artifacts(run_id)}
    assert {"results.json", "table.md", "figure1.png", "models", ".hydra"} <= artifacts | {".hydra"}
    assert {a.path for a in client.list_artifacts(run_id, "models")} == {
        f"models/{m}.npz" for m in ("dpp", "standard", "pooling", "bag_of_words")
    }  # every method's model (issue 36)
    # a resumed run continues the same MLflow run
    more = run(_compose([*QUIET, "trials=3", "resume=true", "tracking=mlflow",
                         f"tracking.uri={store}"]), output_dir=tmp_path / "run")  # fmt: skip
    assert more["status"] == "complete" and len(_runs(store)) == 1
    assert [m.step for m in client.get_metric_history(run_id, "dpp/accuracy")] == [0, 1, 2]


@pytest.mark.extended
def test_a_multirun_is_one_parent_run_with_a_child_per_job(tmp_path):
    store = tmp_path / "mlruns"
    args = [
        sys.executable,
        "experiments/run.py",
        "-m",
        *QUIET,
        "figures=[]",
        "tracking=mlflow",
        f"tracking.uri={store}",
        "model.l2=1e-3,1e-2",
        f"hydra.sweep.dir={tmp_path / 'sweep'}",
    ]
    proc = subprocess.run(args, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    frame = _runs(store)
    parent_id = json.loads((tmp_path / "sweep" / "tracking_parent.json").read_text())["run_id"]
    children = frame[frame["tags.mlflow.parentRunId"] == parent_id]
    assert len(frame) == 3 and len(children) == 2
    assert sorted(children["params.model.l2"]) == ["0.001", "0.01"]
    assert (frame["status"] == "FINISHED").all()
    client = mlflow.tracking.MlflowClient()
    assert "sweep.png" in {a.path for a in client.list_artifacts(parent_id)}
    jobs = sorted(p.name for p in (tmp_path / "sweep").iterdir() if p.is_dir())
    assert all("tracking" not in name for name in jobs)  # the key is left out of job names


def test_tracking_without_mlflow_is_refused_before_the_run_folder_is_written(tmp_path, monkeypatch):
    import importlib.util

    from dpp.errors import ConfigError

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "mlflow" else real(name, *a)
    )
    with pytest.raises(ConfigError, match=r"tracking=mlflow needs MLflow"):
        run(_compose([*QUIET, "tracking=mlflow"]), output_dir=tmp_path / "run")
    assert not (tmp_path / "run").exists()
