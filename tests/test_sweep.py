"""Issue 11, item 1: sweeps on Hydra's own engines, and the sweep table.

The launcher tests run ``experiments/run.py -m`` in a subprocess on a small synthetic problem,
as a user would; ``scripts/collect.py`` then tabulates the multirun directory.
"""

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from test_experiment import _compose

from dpp.errors import ConfigError
from dpp.experiment import run
from dpp.sweep import collect, write_sweep

REPO = Path(__file__).resolve().parents[1]
#: a small synthetic run: quiet, two rounds, no figures
SMALL = [
    "verbose=false", "model.max_rounds=2", "optimizer.max_iter=10", "dataset.loader.num_sets=40",
    "figures=[]", "compilation_cache=null",
]  # fmt: skip


def _multirun(tmp_path, *overrides, timeout=300):
    proc = subprocess.run(
        [sys.executable, "experiments/run.py", "-m", *SMALL, *overrides,
         f"hydra.sweep.dir={tmp_path}"],
        cwd=REPO, capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def _jobs(sweep_dir: Path) -> list[Path]:
    return sorted(p for p in sweep_dir.iterdir() if p.is_dir() and not p.name.startswith("."))


@pytest.mark.parametrize("launcher", ["joblib", "submitit_local"])
def test_launcher_runs_jobs_into_folders_named_by_overrides_and_collect_tables_them(
    tmp_path, launcher
):
    _multirun(tmp_path, f"hydra/launcher={launcher}", "model.l2=1e-3,1e-1")
    jobs = _jobs(tmp_path)
    names = [j.name for j in jobs]
    assert len(jobs) == 2, names
    assert names[0].startswith("0_") and "model.l2=0.001" in names[0]
    assert names[1].startswith("1_") and "model.l2=0.1" in names[1]
    for job in jobs:
        results = json.loads((job / "results.json").read_text())
        assert results["status"] == "complete"
        assert [r["method"] for r in results["trials"]] == ["dpp", "standard"]
    paths = write_sweep(tmp_path)
    table = pd.read_csv(paths["csv"])
    assert table["job"].tolist() == [0, 1]
    assert table["model.l2"].tolist() == [0.001, 0.1]
    assert (table["status"] == "complete").all()
    # the table's accuracy is the run's own
    first = json.loads((jobs[0] / "results.json").read_text())["trials"]
    dpp_acc = next(r["accuracy"] for r in first if r["method"] == "dpp")
    assert table["dpp accuracy"][0] == pytest.approx(dpp_acc)
    markdown = paths["md"].read_text()
    assert markdown.count("| complete |") == 2 and "model.l2" in markdown
    assert paths["png"].stat().st_size > 1000


def test_optuna_sweeper_maximises_the_validation_metric_the_run_returns(tmp_path):
    proc = _multirun(
        tmp_path, "hparams_search=optuna", "hydra.sweeper.n_trials=2", "model.n_prototypes=2"
    )
    values = []
    for job in _jobs(tmp_path):
        results = json.loads((job / "results.json").read_text())
        assert results["validation"]["metric"] == "validation_log_likelihood"
        values.append(results["validation"]["value"])
        assert "model.beta_scale=" in job.name and "model.l2=" in job.name
    assert len(values) == 2 and all(math.isfinite(v) for v in values)
    best = (tmp_path / "optimization_results.yaml").read_text()
    assert f"best_value: {max(values)}" in best, best
    assert "Best value" in proc.stderr + proc.stdout


def test_validation_metric_comes_from_the_training_sets_only(tmp_path):
    cfg = _compose(
        [*SMALL, "trials=2", "validation.metric=validation_accuracy", "validation.fraction=0.25"]
    )
    results = run(cfg, output_dir=tmp_path)
    dpp_rows = [r for r in results["trials"] if r["method"] == "dpp"]
    for r in dpp_rows:
        # 25 % of the 8 training sets, never the 32 test sets
        assert r["validation_sets"] == math.ceil(0.25 * r["num_train"]) == 2
        assert 0.0 <= r["validation_accuracy"] <= 1.0
    expected = np.mean([r["validation_accuracy"] for r in dpp_rows])
    assert results["validation"] == {
        "metric": "validation_accuracy",
        "value": pytest.approx(expected),
        "fraction": 0.25,
    }
    assert all("validation_accuracy" not in r for r in results["trials"] if r["method"] != "dpp")


def test_cv_score_metric_needs_a_dpp_cv_selection(tmp_path):
    with pytest.raises(ConfigError, match="validation.metric=cv_score needs l2_selection"):
        run(_compose([*SMALL, "validation.metric=cv_score"]), output_dir=tmp_path)
    with pytest.raises(ConfigError, match="validation.metric must be one of"):
        run(_compose([*SMALL, "validation.metric=test_accuracy"]), output_dir=tmp_path)


def test_collect_reports_failed_killed_and_unstarted_jobs(tmp_path):
    def job(name, overrides, results=None):
        folder = tmp_path / name
        (folder / ".hydra").mkdir(parents=True)
        (folder / ".hydra" / "overrides.yaml").write_text("".join(f"- {o}\n" for o in overrides))
        if results is not None:
            (folder / "results.json").write_text(json.dumps(results))

    record = {"trial": 0, "method": "dpp", "accuracy": 0.9, "test_log_likelihood": -0.3}
    job("0_model.l2=0.1", ["model.l2=0.1"], {"status": "complete", "trials": [record]})
    job(
        "1_model.l2=1",
        ["model.l2=1"],
        {"status": "failed", "error": "NonFiniteResultError: x", "trials": []},
    )
    # "running" with a pid that is gone: killed
    job("2_model.l2=10", ["model.l2=10"], {"status": "running", "pid": 2**22 + 7, "trials": []})
    job("3_model.l2=100", ["model.l2=100"])
    table = collect(tmp_path)
    assert table["status"].tolist() == ["complete", "failed", "killed", "no results"]
    assert table["model.l2"].tolist() == [0.1, 1, 10, 100]
    paths = write_sweep(tmp_path)
    markdown = paths["md"].read_text()
    assert "NonFiniteResultError: x" in markdown and "| no results |" in markdown
    assert "best dpp accuracy = 0.9 (job 0: model.l2=0.1)" in markdown


def test_collect_names_the_folder_it_looked_in(tmp_path):
    proc = subprocess.run(
        [sys.executable, "scripts/collect.py", str(tmp_path)],
        cwd=REPO, capture_output=True, text=True,
    )  # fmt: skip
    assert proc.returncode == 2
    assert f"no Hydra jobs (*/.hydra/overrides.yaml) under {tmp_path}" in proc.stderr


def test_cv_score_is_the_best_mean_cv_score_of_the_primary_method(tmp_path):
    cfg = _compose(
        [*SMALL, "l2_selection.kind=dpp_cv", "l2_selection.grid=[0.01,1.0]",
         "l2_selection.folds=2", "validation.metric=cv_score"]
    )  # fmt: skip
    results = run(cfg, output_dir=tmp_path)
    dpp_record = next(r for r in results["trials"] if r["method"] == "dpp")
    assert dpp_record["cv_score"] == max(dpp_record["l2_cv_scores"])
    assert results["validation"] == {"metric": "cv_score", "value": dpp_record["cv_score"]}
