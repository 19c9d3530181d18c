"""Issue 56: what a newcomer meets first (the selection's progress, messages, scripts)."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import dpp

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.extended  # a selection compiled
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


def test_the_readmes_first_command_installs_what_the_main_job_needs_and_no_extra():
    """Issue 56: the main job's install takes no extra; the test command installs the test
    extra itself (the same two commands open the docs' first page)."""
    for page in (ROOT / "README.md", ROOT / "docs" / "index.md"):
        block = page.read_text().split("```bash\n", 1)[1].split("```", 1)[0].splitlines()
        first, second = block[0], block[1]
        assert "pip install -e . &&" in first and "[" not in first, (page, first)
        assert first.rstrip().endswith("python experiments/run.py")
        assert "pip install -e '.[test]'" in second and second.endswith("python -m pytest -n 2")


def test_help_says_what_dpp_is_its_groups_and_where_the_docs_are():
    """Issue 56: --help opens with what dpp is; it lists every option of the user-facing groups
    (and only those that exist), not the internal dpp_defaults groups; it names the docs."""
    out = subprocess.run(
        [sys.executable, "experiments/run.py", "--help"], capture_output=True, text=True,
        cwd=ROOT, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert text.startswith("dpp: Discriminative Probabilistic Prototype learning")
    assert "docs/index.md" in text and "dpp_defaults" not in text
    groups = text.split("== Groups ==")[1].split("== Examples ==")[0]
    listed = {}
    for line in groups.replace(",\n", ", ").splitlines():
        if ":" in line:
            group, options = line.split(":", 1)
            listed[group.strip()] = {o.split("(")[0].strip() for o in options.split(",")}
    for group, options in listed.items():
        files = {p.stem for p in (ROOT / "configs" / group).glob("*.yaml")}
        assert options == files, (group, options ^ files)


def test_the_benchmark_page_is_what_the_committed_records_give():
    """docs/benchmarks.md is generated from benchmarks/*/suite.json, never typed (issue 52)."""
    out = subprocess.run(
        [sys.executable, "scripts/benchmark_page.py", "--check"], capture_output=True,
        text=True, cwd=ROOT, timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
