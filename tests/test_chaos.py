"""Issue 20: a run killed with SIGKILL at random moments and resumed each time, as the README
writes the resume command (no ``trials=``), ends with the results of an uninterrupted run."""

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from test_experiment import FAST

from dpp.experiment.reporting import run_state
from dpp.experiment.run_folder import holds_run

REPO = Path(__file__).resolve().parents[1]
# quiet fits: compiled programs are cached; the pooled baselines are left out (time)
LAUNCH = [*FAST, "trials=3", "verbose=false", "~baselines.pooling", "~baselines.bag_of_words"]


def _without_timings(tree):
    """The records with every wall-clock field (``*seconds*``) removed."""
    if isinstance(tree, dict):
        return {k: _without_timings(v) for k, v in tree.items() if "seconds" not in k}
    if isinstance(tree, list):
        return [_without_timings(v) for v in tree]
    return tree


def _command(out: Path, *overrides: str) -> list[str]:
    return [sys.executable, "experiments/run.py", f"hydra.run.dir={out}", *overrides]


def _results(out: Path) -> dict:
    return json.loads((out / "results.json").read_text())


def _records(out: Path) -> int:
    try:
        return len(_results(out)["trials"])
    except (FileNotFoundError, json.JSONDecodeError, KeyError):
        return -1


def _assert_same_run(reference: Path, out: Path) -> None:
    """The run in ``out`` is complete and holds the uninterrupted run's records and models."""
    expected, results = _results(reference), _results(out)
    assert results["status"] == "complete" and results["num_trials"] == 3, out
    assert _without_timings(results["trials"]) == _without_timings(expected["trials"]), out
    for name in ("dpp", "standard"):
        with (
            np.load(reference / "models" / f"{name}.npz") as a,
            np.load(out / "models" / f"{name}.npz") as b,
        ):
            for key in ("mu", "theta"):
                np.testing.assert_array_equal(a[key], b[key])
    assert (out / "figure1.png").is_file()
    assert "- trials=3\n" in (out / ".hydra" / "overrides.yaml").read_text()


@pytest.mark.extended
def test_sigkill_at_random_moments_and_resume_gives_the_uninterrupted_results(tmp_path):
    reference = tmp_path / "reference"
    subprocess.run(_command(reference, *LAUNCH), cwd=REPO, check=True, capture_output=True)
    expected = _results(reference)
    assert expected["status"] == "complete" and expected["num_trials"] == 3

    # each launch is killed at a random moment, 0.6 to 1.5 times the time the first launch took
    # to record its first fit (measured here, so that the moments fall inside the work on a
    # loaded machine as on an idle one): late in start-up, in k-means, a fit, or the writing of
    # results, models and figures. A launch that ends on its own must have completed the run
    # (exit 0): its moment came too late, as when the first launch was measured on a machine
    # more loaded than now. That run is checked, the kills go on in a fresh folder and its first
    # launch measures again, so that five kills happen however the load changes.
    rng, kills, launches, first_record = np.random.default_rng(20), 0, 0, None
    folders = [tmp_path / "chaos0"]
    while kills < 5 and launches < 30:
        launches += 1
        out = folders[-1]
        # the README's resume command once the folder holds a run; the first command before
        args = ["resume=true"] if holds_run(out) else [*LAUNCH, "resume=true"]
        before, start = _records(out), time.monotonic()
        log = tmp_path / f"launch{launches}.err"
        with log.open("w") as err:
            proc = subprocess.Popen(
                _command(out, *args), cwd=REPO, stdout=subprocess.DEVNULL, stderr=err
            )
        moment = None if first_record is None else rng.uniform(0.6, 1.5) * first_record
        while proc.poll() is None and time.monotonic() - start < 240:
            elapsed = time.monotonic() - start
            if moment is None and _records(out) > max(before, 0):  # first launch: measure, kill
                first_record = elapsed
                moment = elapsed + rng.uniform(0.0, 0.5)
            if moment is not None and elapsed >= moment:
                break
            time.sleep(0.02)
        killed = proc.poll() is None
        if killed:
            proc.send_signal(signal.SIGKILL)
            kills += 1
        returncode = proc.wait(timeout=60)
        assert killed or returncode == 0, log.read_text()[-2000:]
        if (out / "results.json").is_file():
            assert run_state(out)[0] in ("killed", "complete"), run_state(out)
        if not killed:
            _assert_same_run(reference, out)
            folders.append(tmp_path / f"chaos{len(folders)}")
            first_record = None
    assert kills == 5, f"{kills} kills in {launches} launches"
    out = folders[-1]
    args = ["resume=true"] if holds_run(out) else [*LAUNCH, "resume=true"]
    done = subprocess.run(_command(out, *args), cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    _assert_same_run(reference, out)
