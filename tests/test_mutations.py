"""The mutation check (issue 46): every deliberate bug of ``scripts/mutation_check.py`` is
caught by the tests named for it, and those tests pass without it."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.extended  # nine mutations, then the tests that caught them unmutated: 6-9 minutes
def test_every_mutation_is_caught(tmp_path):
    proc = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "mutation_check.py"), "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=1500,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads((tmp_path / "mutation_check.json").read_text())
    assert report["missed"] == [] and len(report["results"]) >= 8
    assert all(r["caught"] and r["exit_code"] == 1 for r in report["results"])  # failures,
    # not collection or import errors (exit 2-4)
    assert all(r["failed"] for r in report["results"])  # named, and run again unmutated
