"""Issue 8, observations 5 and 6: runs that die are recorded, bad settings fail first and clearly.

The signal tests run ``experiments/run.py`` in a subprocess, as a scheduler would.
"""

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest
from test_experiment import FAST, _compose

from dpp.errors import ConfigError, DataError, NonFiniteResultError, RunInterrupted
from dpp.estimators import StandardPrototypeClassifier
from dpp.experiment.reporting import Recorder, run_state
from dpp.experiment.runner import run

REPO = Path(__file__).resolve().parents[1]


def _results(path: Path) -> dict:
    return json.loads((path / "results.json").read_text())


# ------------------------------------------------------------------ observation 6: bad settings
@pytest.mark.parametrize(
    "override, message",
    [
        ("trials=0", "trials must be a positive integer, got 0"),
        ("seed=abc", "seed must be an integer >= 0, got 'abc'"),
        ("model.n_prototypes=0", "model.n_prototypes must be a positive integer, got 0"),
        ("model.l2=-1", "model.l2 must be a finite number >= 0"),
        ("model.beta_scale=0", "model.beta_scale must be a finite number > 0"),
        ("model.mode=anneal", "model.mode must be one of coordinate_ascent, joint"),
        ("optimizer.max_iter=0", "optimizer.max_iter must be a positive integer"),
        ("l2_selection.folds=1", "l2_selection.folds must be an integer >= 2"),
        ("dataset.split.train_fraction=1.5", "dataset.split.train_fraction must be"),
        ("figures=[nope]", "figures[0] must be one of"),
        ("model.pooling=sum", "model.pooling must be one of mean, max, gem; got 'sum'"),
        ("n_jobs=0", "n_jobs must be null or an int other than 0 (-1: every core), got 0"),
        ("n_jobs=1.5", "n_jobs must be null or an int other than 0 (-1: every core), got 1.5"),
    ],
)
def test_bad_settings_fail_before_any_data_is_read(tmp_path, override, message):
    # the data directory does not exist: a config error must come first
    cfg = _compose(["dataset=mpeg7", f"data_dir={tmp_path / 'nowhere'}", override])
    with pytest.raises(ConfigError) as err:
        run(cfg, output_dir=tmp_path / "run")
    assert message in str(err.value)
    assert not (tmp_path / "run" / "results.json").exists()


def test_the_paper_model_has_no_embedding_since_0_2():
    """``model=dpp`` lost 0.1's deprecated ``embedding``: Hydra refuses the key, naming it
    (DPP on a learned embedding is ``model=embedded_dpp``)."""
    from hydra.errors import ConfigCompositionException

    with pytest.raises(ConfigCompositionException, match="model.embedding"):
        _compose(["model.embedding=[64]"])
    assert "embedding" in _compose(["model=embedded_dpp"]).model


@pytest.mark.extended  # 7-21 s of fits or CLI runs: the default tier keeps to 5 minutes
def test_user_error_exits_2_with_one_line_and_no_traceback(tmp_path):
    proc = subprocess.run(
        [sys.executable, "experiments/run.py", "model.n_prototypes=0", f"hydra.run.dir={tmp_path}"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    output = proc.stdout + proc.stderr
    assert "model.n_prototypes must be a positive integer, got 0" in output
    assert "Traceback" not in output


@pytest.mark.extended  # 7-21 s of fits or CLI runs: the default tier keeps to 5 minutes
def test_baseline_alone_skips_the_figure_that_needs_dpp(tmp_path):
    """Was: `python experiments/run.py model=standard` (a README command) crashed on figure1."""
    cfg = _compose(["model=standard", "dataset.loader.num_sets=40", "optimizer.theta_max_iter=100"])
    results = run(cfg, output_dir=tmp_path)
    assert results["status"] == "complete"
    assert results["methods"] == ["standard", "pooling", "bag_of_words"]
    assert "figure1" in results["skipped_figures"]
    assert not (tmp_path / "figure1.png").exists()


@pytest.mark.extended  # an end-to-end CLI run (over 8 s): the default tier keeps near 5 minutes
def test_partition_map_without_a_spatial_split_is_skipped_up_front(tmp_path):
    results = run(_compose(FAST + ["figures=[partition_map]"]), output_dir=tmp_path)
    assert results["skipped_figures"] == {"partition_map": "needs a spatial_blocks split"}


@pytest.mark.extended  # an end-to-end CLI run (about 9 s): the default tier keeps near 5 minutes
def test_huge_beta_scale_is_finite_and_flagged(tmp_path):
    """Was: model.beta_scale=1e45 ended `complete` with test log-lik NaN in the table."""
    results = run(_compose(FAST + ["model.beta_scale=1e45"]), output_dir=tmp_path)
    record = results["trials"][0]
    assert np.isfinite(record["test_log_likelihood"])
    assert record["fit_status"] == "saturated"
    assert any("trial 0 dpp: saturated" in w for w in results["warnings"])
    assert "Warnings:" in (tmp_path / "table.md").read_text()


@pytest.mark.extended  # an end-to-end CLI run (over 7 s): the default tier keeps near 5 minutes
def test_adam_still_improving_is_a_warning_not_converged(tmp_path):
    """Was: Adam's non-convergence only showed as `converged: false` deep in results.json."""
    fast = [o for o in FAST if not o.startswith("optimizer.max_iter")]
    cfg = _compose(fast + ["optimizer=adam", "optimizer.epochs=1", "model.max_rounds=2"])
    results = run(cfg, output_dir=tmp_path)
    record = next(r for r in results["trials"] if r["method"] == "dpp")
    assert record["fit_status"] == "max_rounds" and record["info"]["status"] == "max_rounds"
    assert any(w.startswith("trial 0 dpp: max_rounds") for w in results["warnings"])


class BrokenStandard(StandardPrototypeClassifier):
    """A method plugged in by ``_target_`` whose classifier weights are NaN."""

    def _fit_model(self, sets, seed):
        model = super()._fit_model(sets, seed)
        return dataclasses.replace(model, theta=jnp.full(model.theta.shape, jnp.nan))


@pytest.mark.extended  # 7-21 s of fits or CLI runs: the default tier keeps to 5 minutes
def test_non_finite_predictions_fail_the_run_naming_method_and_trial(tmp_path):
    cfg = _compose(FAST + ["baselines.standard._target_=test_runs.BrokenStandard"])
    with pytest.raises(NonFiniteResultError, match="trial 0, method standard"):
        run(cfg, output_dir=tmp_path)
    on_disk = _results(tmp_path)
    assert on_disk["status"] == "failed" and "method standard" in on_disk["error"]
    assert [r["method"] for r in on_disk["trials"]] == ["dpp"]  # what finished is kept
    assert "**Status: failed.**" in (tmp_path / "table.md").read_text()


# ------------------------------------------------------------------ observation 5: killed runs
def test_a_run_never_overwrites_another(tmp_path):
    run(_compose(FAST), output_dir=tmp_path)
    with pytest.raises(ConfigError, match="already holds the results of a run"):
        run(_compose(FAST), output_dir=tmp_path)


def _start(out: Path, *overrides: str) -> subprocess.Popen:
    """The CLI run in the background; its output goes to ``<out>.log`` (for a failure's message)."""
    args = [sys.executable, "experiments/run.py", *FAST, "figures=[]", f"hydra.run.dir={out}"]
    with open(out.with_suffix(".log"), "w") as log:
        return subprocess.Popen([*args, *overrides], cwd=REPO, stdout=log, stderr=subprocess.STDOUT)


def _log_tail(out: Path, lines: int = 30) -> str:
    return "\n".join(out.with_suffix(".log").read_text().splitlines()[-lines:])


def _wait_for_records(out: Path, proc: subprocess.Popen, count: int, timeout=240.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"the run ended early with exit code {proc.returncode}")
        try:
            if len(_results(out)["trials"]) >= count:
                return
        except (FileNotFoundError, json.JSONDecodeError):
            pass
        time.sleep(0.2)
    proc.kill()
    raise AssertionError("the run recorded nothing in time")


@pytest.mark.extended
def test_sigterm_records_interrupted_and_resume_finishes_the_run(tmp_path):
    out = tmp_path / "run"
    # far more trials than it can finish before the signal (with 4, a loaded machine once saw
    # the run end before the signal came)
    proc = _start(out, "trials=50")
    _wait_for_records(out, proc, count=4)  # trial 0's four methods finished
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=120) == 143, _log_tail(out)
    interrupted = _results(out)
    assert interrupted["status"] == "interrupted" and "SIGTERM" in interrupted["error"]
    assert interrupted["pid"] == proc.pid
    assert run_state(out)[0] == "interrupted"
    assert "**Status: interrupted.**" in (out / "table.md").read_text()
    finished = {r["trial"] for r in interrupted["trials"]}

    trials = max(4, max(finished) + 1)  # fewer than 50, never below a finished trial
    results = run(
        _compose(FAST + [f"trials={trials}", "figures=[]", "resume=true"]), output_dir=out
    )
    assert results["status"] == "complete"
    assert sorted({r["trial"] for r in results["trials"]}) == list(range(trials))
    assert set(results["resumed_trials"]) <= finished
    kept = [r for r in interrupted["trials"] if r["trial"] in results["resumed_trials"]]
    assert kept == [r for r in results["trials"] if r["trial"] in results["resumed_trials"]]


@pytest.mark.extended  # two synthetic trials in-process: about 30 s
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_signal_raised_inside_a_finalizer_still_ends_the_run(tmp_path, monkeypatch):
    """CI once saw a SIGTERM'd run finish all 50 trials with exit code 0. Python runs a signal
    handler wherever the main thread is, a ``__del__`` included, and there its exception is only
    printed; the run must still stop (at the next record) and record ``interrupted``."""
    import dpp.experiment.runner as runner

    class SignalsWhileCollected:
        def __del__(self):
            os.kill(os.getpid(), signal.SIGTERM)
            for _ in range(100_000):  # bytecodes, between which the handler runs, here
                pass

    fit_trial = runner.run_trial

    def trial_then_a_signal(*args, **kwargs):
        done = fit_trial(*args, **kwargs)
        SignalsWhileCollected()  # collected at once: the handler's exception is swallowed
        return done

    monkeypatch.setattr(runner, "run_trial", trial_then_a_signal)
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(RunInterrupted, match="SIGTERM"):
        run(_compose(FAST + ["trials=2", "figures=[]"]), output_dir=tmp_path)
    assert signal.getsignal(signal.SIGTERM) is before  # the run's handler is gone
    results = _results(tmp_path)
    assert results["status"] == "interrupted" and "SIGTERM" in results["error"]
    assert {r["trial"] for r in results["trials"]} == {0}  # stopped after the signal's trial


@pytest.mark.extended  # three synthetic trials, then one more: about 15 s
def test_a_resume_keeps_every_finished_trial_and_runs_only_the_rest(tmp_path):
    """Issue 46: the resume test above accepts any subset of the finished trials; here every
    finished trial must be kept, unchanged, and only the new one fitted."""
    first = run(_compose(FAST + ["trials=2", "figures=[]"]), output_dir=tmp_path)
    assert first["status"] == "complete" and {r["trial"] for r in first["trials"]} == {0, 1}
    resumed = run(_compose(FAST + ["trials=3", "figures=[]", "resume=true"]), output_dir=tmp_path)
    assert resumed["status"] == "complete"
    assert resumed["resumed_trials"] == [0, 1]
    assert [r for r in resumed["trials"] if r["trial"] < 2] == first["trials"]
    assert sorted({r["trial"] for r in resumed["trials"]}) == [0, 1, 2]


@pytest.mark.extended  # one of the longest end-to-end runs
def test_sigkill_is_recognised_from_the_files(tmp_path):
    out = tmp_path / "run"
    proc = _start(out, "trials=50")
    _wait_for_records(out, proc, count=1)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    assert _results(out)["status"] == "running"  # what the files say, frozen
    status, why = run_state(out)
    assert status == "killed" and str(proc.pid) in why


def test_stale_heartbeat_from_another_host_reads_as_killed(tmp_path):
    run(_compose(FAST), output_dir=tmp_path)
    results = _results(tmp_path)
    results.update(status="running", host="elsewhere", pid=os.getpid())
    (tmp_path / "results.json").write_text(json.dumps(results))
    beat = json.loads((tmp_path / "heartbeat.json").read_text())
    assert run_state(tmp_path, now=beat["time"] + 5)[0] == "running"
    assert run_state(tmp_path, now=beat["time"] + 3600)[0] == "killed"


@pytest.mark.extended  # end-to-end CLI runs (over 10 s): the default tier keeps near 5 minutes
def test_resume_refuses_a_changed_config(tmp_path):
    run(_compose(FAST), output_dir=tmp_path)
    with pytest.raises(
        ConfigError,
        match=r"differs from the run .* in: baselines\.bag_of_words\.n_prototypes, "
        r"baselines\.standard\.n_prototypes, model\.n_prototypes$",
    ):
        run(_compose(FAST + ["model.n_prototypes=3", "resume=true"]), output_dir=tmp_path)


# ------------------------------------------------------------------ issue 20: run folders
def _cli(out: Path, *overrides: str) -> subprocess.CompletedProcess:
    args = [sys.executable, "experiments/run.py", f"hydra.run.dir={out}", *overrides]
    return subprocess.run(args, cwd=REPO, capture_output=True, text=True, timeout=300)


def _snapshot(folder: Path) -> dict:
    return {p.relative_to(folder): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def _one_line_error(proc: subprocess.CompletedProcess, message: str) -> None:
    assert proc.returncode == 2, proc.stderr[-2000:]
    output = proc.stdout + proc.stderr
    assert message in output and "Traceback" not in output
    assert [line for line in output.splitlines() if "ERROR" in line] == [
        line for line in output.splitlines() if message in line
    ]


@pytest.mark.extended
def test_refused_launches_change_nothing_in_the_run_folder(tmp_path):
    """Was: a refused run had already rewritten .hydra/config.yaml and appended to run.log."""
    out = tmp_path / "run"
    lean = ["~baselines.pooling", "~baselines.bag_of_words"]  # two methods are enough (time)
    first = _cli(out, *FAST, *lean, "trials=2", "figures=[]", "verbose=false")
    assert first.returncode == 0, first.stderr[-2000:]
    before = _snapshot(out)
    assert "- trials=2\n" in (out / ".hydra" / "overrides.yaml").read_text()
    refusals = [
        (["model.l2=5", "seed=7"], "already holds the results of a run"),
        (["resume=true", "model.l2=5"], "differs from the run in"),
        (["resume=true", "trials=1"], "would drop the finished trial(s) [1]"),
        (["resume=true", "experiment=synthetic_large"], "in: experiment (recorded None)"),
    ]
    for overrides, message in refusals:
        _one_line_error(_cli(out, *overrides), message)
        assert _snapshot(out) == before, overrides  # byte for byte
    # the README's resume command on this complete run: nothing to do, nothing changed (issue 36)
    resumed = _cli(out, "resume=true")
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert "is complete (2 of 2 trials recorded): nothing to resume" in resumed.stdout
    assert _snapshot(out) == before
    results = _results(out)
    assert results["num_trials"] == 2 and len(results["trials"]) == 2 * 2  # 2 trials, 2 methods


@pytest.mark.extended  # subprocess runs of the CLI
def test_refused_launches_are_one_line_and_leave_no_folder_behind(tmp_path):
    """Issue 36: Hydra makes the run folder first; every refused launch used to leave it, empty
    (9 of them after a round of bad inputs, on which scripts/status.py exited 2)."""
    _one_line_error(_cli(tmp_path / "a", "+foo=1"), "+foo=1: dpp reads no key 'foo'")
    _one_line_error(_cli(tmp_path / "b", "devices=3"), "devices=3 but JAX sees 1 cpu device(s)")
    _one_line_error(_cli(tmp_path / "c", "model.l2=-1"), "model.l2 must be a finite number >= 0")
    assert sorted(p.name for p in tmp_path.iterdir()) == []
    mine = tmp_path / "mine"  # a folder the user made before the launch is theirs: kept
    mine.mkdir()
    os.utime(mine, (time.time() - 60, time.time() - 60))
    _one_line_error(_cli(mine, "model.l2=-1"), "model.l2 must be a finite number >= 0")
    assert mine.is_dir() and not any(mine.iterdir())


def test_resuming_a_complete_run_changes_nothing_on_disk(tmp_path, caplog):
    """Issue 36: resume=true on a complete run rewrote results.json (wall_seconds 9.4 -> 0.59 s,
    started_at and pid replaced), losing the record of the original run."""
    first = run(_compose([*FAST, "figures=[]", "verbose=false"]), output_dir=tmp_path)
    before = _snapshot(tmp_path)
    with caplog.at_level("INFO", logger="dpp.experiment.runner"):
        again = run(_compose([*FAST, "figures=[]", "verbose=false", "resume=true"]), tmp_path)
    assert _snapshot(tmp_path) == before  # byte for byte
    assert again == first
    lines = [r.getMessage() for r in caplog.records if "nothing to resume" in r.getMessage()]
    assert lines == [f"{tmp_path} is complete (1 of 1 trials recorded): nothing to resume, "
                     "nothing changed"]  # fmt: skip


def test_k_beyond_the_training_vectors_is_a_config_error_before_k_means(tmp_path):
    cfg = _compose(FAST + ["model.n_prototypes=5000", "figures=[]"])
    with pytest.raises(ConfigError, match=r"model.n_prototypes=5000 but the training sets of "):
        run(cfg, output_dir=tmp_path)
    assert _results(tmp_path)["trials"] == []


def test_a_class_too_small_for_the_split_names_the_label_and_the_file(tmp_path):
    rng = np.random.default_rng(0)
    sizes = rng.integers(2, 6, size=21)
    path = tmp_path / "sets.npz"
    np.savez(
        path,
        vectors=rng.normal(size=(sizes.sum(), 3)),
        set_ids=np.repeat(np.arange(21), sizes),
        labels=np.array(["cat"] * 10 + ["dog"] * 10 + ["eel"]),
    )
    cfg = _compose(["dataset=sets_file", f"dataset.path={path}", "figures=[]"])
    with pytest.raises(DataError, match=rf"{path}: class 'eel' has 1 set\(s\); a stratified"):
        run(cfg, output_dir=tmp_path / "run")


@pytest.mark.extended  # a subprocess run of the CLI
def test_a_multirun_value_with_a_path_keeps_its_job_inside_the_sweep(tmp_path):
    sweep = tmp_path / "sweep"
    args = [sys.executable, "experiments/run.py", "-m", f"hydra.sweep.dir={sweep}", *FAST,
            "figures=[]", "verbose=false", "name=../../escaped"]  # fmt: skip
    proc = subprocess.run(args, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    jobs = [p.parent for p in sweep.rglob("results.json")]
    assert len(jobs) == 1 and jobs[0].parent == sweep and "name=.._.._escaped" in jobs[0].name
    assert not list(tmp_path.glob("escaped*")) and (jobs[0] / ".hydra" / "overrides.yaml").is_file()


def _heartbeats() -> set:
    import threading

    return {t for t in threading.enumerate() if t.name == "dpp-heartbeat" and t.is_alive()}


def test_the_recorder_writes_each_record_and_the_status_it_ended_with(tmp_path):
    """The one record loop of experiments and suites: ``running`` on entry and after every
    record, ``complete`` at the end, ``failed``/``interrupted`` with the error and the records
    so far, and no heartbeat left beating, even when the first write fails."""
    written = []
    others = _heartbeats()  # another test's, if any: not this test's business

    def _beating() -> bool:
        return bool(_heartbeats() - others)

    def write(records, status, **extra):
        written.append((list(records), status, extra))
        return {"status": status, "records": list(records), **extra}

    with Recorder(tmp_path, write) as recorder:
        assert written[-1][:2] == ([], "running") and _beating()
        recorder.keep({"trial": 0})
        assert written[-1][:2] == ([{"trial": 0}], "running")
        results = recorder.finish()
    assert results["status"] == "complete" and results["wall_seconds"] >= 0
    assert not _beating() and (tmp_path / "heartbeat.json").is_file()

    with pytest.raises(KeyboardInterrupt), Recorder(tmp_path, write, [{"trial": 0}]) as recorder:
        recorder.keep({"trial": 1})
        raise KeyboardInterrupt
    records, status, extra = written[-1]
    assert status == "interrupted" and records == [{"trial": 0}, {"trial": 1}]
    assert extra["error"] == "KeyboardInterrupt: " and not _beating()

    def refused(records, status, **extra):
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"), Recorder(tmp_path, refused):
        pass
    assert not _beating()
