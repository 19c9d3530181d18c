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
from dpp.experiment.runner import run
from dpp.experiment.sweep import best_jobs, collect, sweep_metric, write_sweep

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


@pytest.mark.parametrize(
    "launcher",
    [
        pytest.param("joblib", marks=pytest.mark.extended),
        pytest.param("submitit_local", marks=pytest.mark.slow),
    ],
)  # joblib in the extended run that CI adds (35-40 s each); submitit_local with -m slow
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
        methods = ["dpp", "standard", "pooling", "bag_of_words"]
        assert [r["method"] for r in results["trials"]] == methods
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


def test_a_failed_trial_is_not_a_finished_one_toward_n_trials(tmp_path):
    """Issue 36: a study that holds one failed trial still runs every trial n_trials asks for."""
    import optuna

    from dpp.experiment.optuna_sweeper import finished_trials

    storage = f"sqlite:///{tmp_path / 'study.db'}"
    assert finished_trials("s", storage) == (0, 0, 0)
    study = optuna.create_study(study_name="s", storage=storage)
    study.optimize(lambda trial: trial.suggest_float("x", 0, 1), n_trials=1)
    with pytest.raises(RuntimeError):
        study.optimize(lambda trial: (_ for _ in ()).throw(RuntimeError("job")), n_trials=1)
    assert [t.state.name for t in study.trials] == ["COMPLETE", "FAIL"]
    assert finished_trials("s", storage) == (1, 0, 1)


@pytest.mark.extended
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
    assert "alembic" not in proc.stderr + proc.stdout  # issue 36: no migration noise


@pytest.mark.extended
def test_a_stored_optuna_study_survives_a_kill_and_grows_to_n_trials(tmp_path):
    """Issue 22: sqlite storage works (SQLAlchemy 1.4 pinned); n_trials is the study's size, so
    a sweep killed mid-way and launched again adds only the missing trials to the same study."""
    import signal
    import time

    import optuna

    storage = f"sqlite:///{tmp_path / 'study.db'}"
    common = ["hparams_search=optuna", f"hydra.sweeper.storage={storage}",
              "hydra.sweeper.study_name=grow"]  # fmt: skip

    def complete():
        try:
            study = optuna.load_study(study_name="grow", storage=storage)
        except KeyError:
            return 0
        return sum(t.state.name == "COMPLETE" for t in study.trials)

    args = [sys.executable, "experiments/run.py", "-m", *SMALL, *common,
            "hydra.sweeper.n_trials=4", f"hydra.sweep.dir={tmp_path / 'killed'}"]  # fmt: skip
    proc = subprocess.Popen(args, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 240
    while complete() < 1 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    killed_at = complete()
    assert 1 <= killed_at < 4, "the sweep was not killed mid-way"
    # launched again with a larger n_trials: only the missing trials run, in the same study
    grown = _multirun(tmp_path / "grown", *common, "hydra.sweeper.n_trials=4")
    assert f"holds {killed_at} finished trial(s)" in grown.stderr + grown.stdout
    study = optuna.load_study(study_name="grow", storage=storage)
    done = [t for t in study.trials if t.state.name == "COMPLETE"]
    assert len(done) == 4
    assert len({tuple(sorted(t.params.items())) for t in done}) == 4  # new points each time
    numbers = [int(j.name.split("_")[0]) for j in _jobs(tmp_path / "grown")]
    assert numbers == [
        t.number for t in study.trials if t.number >= len(study.trials) - len(numbers)
    ]
    assert study.best_value == max(t.value for t in done)


@pytest.mark.extended  # one of the longest end-to-end runs
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
    # no validation metric: the test metrics are shown, never used to choose a job
    assert "no objective (validation.metric is null), so no job is chosen" in markdown
    assert paths["png"].is_file()


def test_the_best_job_is_chosen_by_the_objective_and_ties_are_all_marked(tmp_path):
    def job(num, l2, objective, loglik):
        folder = tmp_path / f"{num}_model.l2={l2}"
        (folder / ".hydra").mkdir(parents=True)
        (folder / ".hydra" / "overrides.yaml").write_text(f"- model.l2={l2}\n")
        records = [
            {"trial": 0, "method": m, "accuracy": 0.9375, "test_log_likelihood": loglik + d}
            for m, d in (("dpp", 0.0), ("standard", -0.1))
        ]
        results = {
            "status": "complete",
            "trials": records,
            "validation": {"metric": "validation_log_likelihood", "value": objective},
        }
        (folder / "results.json").write_text(json.dumps(results))

    job(0, 0.001, -0.30, -0.373)
    job(1, 0.01, -0.25, -0.282)
    job(2, 0.1, -0.25, -0.290)
    frame = collect(tmp_path)
    assert sweep_metric(frame) == "validation_log_likelihood"
    assert [frame.loc[b, "job"] for b in best_jobs(frame, "validation_log_likelihood")] == [1, 2]
    paths = write_sweep(tmp_path)
    assert "best validation_log_likelihood = -0.25 (job 1: model.l2=0.01; job 2: model.l2=0.1)" in (
        paths["md"].read_text()
    )
    assert paths["png"].is_file()


@pytest.mark.extended  # a subprocess run of a script: the default tier keeps near 5 minutes
def test_collect_names_the_folder_it_looked_in(tmp_path):
    proc = subprocess.run(
        [sys.executable, "scripts/collect.py", str(tmp_path)],
        cwd=REPO, capture_output=True, text=True,
    )  # fmt: skip
    assert proc.returncode == 2
    assert f"no Hydra jobs (*/.hydra/overrides.yaml) under {tmp_path}" in proc.stderr


@pytest.mark.extended  # over 7 s cold: the default tier keeps to its 5 minutes
def test_cv_score_is_the_best_mean_cv_score_of_the_primary_method(tmp_path):
    cfg = _compose(
        [*SMALL, "l2_selection.kind=dpp_cv", "l2_selection.grid=[0.01,1.0]",
         "l2_selection.folds=2", "validation.metric=cv_score"]
    )  # fmt: skip
    results = run(cfg, output_dir=tmp_path)
    dpp_record = next(r for r in results["trials"] if r["method"] == "dpp")
    assert dpp_record["cv_score"] == max(dpp_record["l2_cv_scores"])
    assert results["validation"] == {"metric": "cv_score", "value": dpp_record["cv_score"]}
