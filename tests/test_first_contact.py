"""Issue 56: what a newcomer meets first (the selection's progress, messages, scripts)."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import dpp

ROOT = Path(__file__).resolve().parents[1]


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
        cv=2, max_extensions=0, verbose=True,
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
