"""Issue 20: a run killed with SIGKILL at random moments and resumed each time, as the README
writes the resume command (no ``trials=``), ends with the results of an uninterrupted run."""

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from test_experiment import FAST

from dpp.reporting import run_state
from dpp.run_folder import holds_run

REPO = Path(__file__).resolve().parents[1]
LAUNCH = [*FAST, "trials=3", "verbose=false"]  # quiet fits: compiled programs are cached


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


def test_sigkill_at_random_moments_and_resume_gives_the_uninterrupted_results(tmp_path):
    reference = tmp_path / "reference"
    start = time.monotonic()
    subprocess.run(_command(reference, *LAUNCH), cwd=REPO, check=True, capture_output=True)
    duration = time.monotonic() - start
    expected = _results(reference)
    assert expected["status"] == "complete" and expected["num_trials"] == 3

    out, rng, kills = tmp_path / "chaos", np.random.default_rng(20), []
    for moment in rng.uniform(0.3, 1.0, size=5) * duration:
        # the README's resume command once the folder holds a run; the first command before
        args = ["resume=true"] if holds_run(out) else [*LAUNCH, "resume=true"]
        proc = subprocess.Popen(
            _command(out, *args), cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        try:
            proc.wait(timeout=moment)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=60)
        kills.append(proc.returncode)
        if holds_run(out) and (out / "results.json").is_file():
            assert run_state(out)[0] in ("killed", "complete")
    assert kills.count(-signal.SIGKILL) >= 3  # most launches were killed, not finished
    done = subprocess.run(_command(out, "resume=true"), cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]

    results = _results(out)
    assert results["status"] == "complete" and results["num_trials"] == 3
    assert _without_timings(results["trials"]) == _without_timings(expected["trials"])
    for name in ("dpp", "standard"):
        with (
            np.load(reference / "models" / f"{name}.npz") as a,
            np.load(out / "models" / f"{name}.npz") as b,
        ):
            for key in ("mu", "theta"):
                np.testing.assert_array_equal(a[key], b[key])
    assert (out / "figure1.png").is_file()
    assert "- trials=3\n" in (out / ".hydra" / "overrides.yaml").read_text()
