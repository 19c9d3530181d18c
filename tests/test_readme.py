"""Issue 20, item 7 and issue 35: the printed outputs of the README and the docs come from running
their code blocks; the modules they name exist."""

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))

from readme_examples import examples  # noqa: E402


@pytest.mark.extended
def test_the_readme_examples_print_what_the_readme_shows():
    proc = subprocess.run(
        [sys.executable, "scripts/readme_examples.py"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "output as printed in the README" in proc.stdout
    assert "output as printed in docs/" in proc.stdout


def test_no_tracked_file_is_one_git_ignores():
    """Issue 36: a committed study.db (ignored as *.db) was modified by the README's Optuna
    command on a fresh clone; nothing a run writes may be tracked."""
    proc = subprocess.run(
        ["git", "ls-files", "--cached", "--ignored", "--exclude-standard"],
        cwd=REPO, capture_output=True, text=True, check=False,
    )  # fmt: skip
    if proc.returncode != 0:
        pytest.skip(f"not a git checkout: {proc.stderr.strip()}")
    assert proc.stdout.split() == []


def test_the_checker_finds_a_drifted_output(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text('```python\nprint("new")\n```\n\nprints\n\n```\nold\n```\n')
    assert [e["output"] for e in examples(readme.read_text())] == ["old\n"]
    args = [sys.executable, "scripts/readme_examples.py", "--readme", str(readme)]
    proc = subprocess.run(args, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and "-old" in proc.stdout and "+new" in proc.stdout
    assert "does not say how long it takes" in proc.stdout
    assert subprocess.run([*args, "--update"], cwd=REPO, capture_output=True).returncode == 0
    assert "```\nnew\n```" in readme.read_text()
    assert "prints in about 1 s on 2 cores\n" in readme.read_text()  # the time measured
    assert subprocess.run(args, cwd=REPO, capture_output=True).returncode == 0


def test_the_checker_fails_an_example_that_prints_a_warning_it_does_not_expect(tmp_path):
    """Issue 56: a documented example shows everything it prints; a warning on stderr fails
    the check unless the code names it in an ``# expected warning:`` comment."""
    from readme_examples import unexpected_warnings

    warn = 'import warnings\nwarnings.warn("careful", UserWarning)\nprint("ok")\n'
    readme = tmp_path / "README.md"
    readme.write_text(f"```python\n{warn}```\n\nprints in about 1 s on 2 cores\n\n```\nok\n```\n")
    args = [sys.executable, "scripts/readme_examples.py", "--readme", str(readme)]
    proc = subprocess.run(args, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and "UserWarning: careful" in proc.stdout
    assert unexpected_warnings("<string>:2: UserWarning: careful\n", warn) == [
        "<string>:2: UserWarning: careful"
    ]
    expected = "# expected warning: UserWarning\n" + warn
    assert unexpected_warnings("<string>:3: UserWarning: careful\n", expected) == []


def test_import_dpp_gives_every_module_the_readme_names():
    import re

    import dpp

    pages = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    text = "\n".join(page.read_text() for page in pages)
    files = set(re.findall(r"`dpp/([a-z_/]+)\.py", text))
    dotted = set(re.findall(r"\bdpp\.([a-z_]+(?:\.[a-z_]+)*)\.[A-Z]", text))  # dpp.mod.Class
    assert files and "experiment.compilation" in dotted
    for name in sorted((files | dotted) - set(dpp.OPTIONAL_MODULES)):
        obj = dpp
        for part in name.replace("/", ".").split("."):
            obj = getattr(obj, part, None)
            assert obj is not None, f"import dpp does not give dpp.{name}"


#: The README's row labels of the default run's table, by method.
_SYNTHETIC_ROWS = {
    "dpp": "DPP",
    "standard": "standard prototype",
    "pooling": "pooled mean + max, logistic regression",
    "bag_of_words": "k-means bag-of-words, logistic regression",
}


@pytest.mark.extended  # a run of the default experiment (about 10 s)
def test_the_readme_table_of_the_default_run_is_what_the_run_gives(tmp_path):
    """Issue 36: every figure in the README comes from a command a test runs; the default
    run's table (`python experiments/run.py experiment=synthetic`, the paper's fit: rounds by
    tol) is checked here, row by row."""
    import json

    args = ["experiment=synthetic", f"hydra.run.dir={tmp_path}", "verbose=false"]
    proc = subprocess.run(
        [sys.executable, "experiments/run.py", *args],
        cwd=REPO, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    records = json.loads((tmp_path / "results.json").read_text())["trials"]
    text = (REPO / "README.md").read_text()
    for r in records:
        row = (
            f"| {_SYNTHETIC_ROWS[r['method']]} | {100 * r['accuracy']:.2f} | "
            f"{r['test_log_likelihood']:.4f} |"
        )
        assert row in text, f"the README lacks the default run's row {row!r}"
