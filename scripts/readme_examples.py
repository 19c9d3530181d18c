"""Runs the Python examples of the README and the docs and checks (or rewrites) what they print.

    python scripts/readme_examples.py            # run every example; exit 1 if a printed output
                                                 # differs from the page's (a diff is shown)
    python scripts/readme_examples.py --update   # write the outputs into the pages
    python scripts/readme_examples.py --readme docs/own-sets.md   # one page

An example is a ```python block; its expected output is the plain ``` block that follows when
the paragraph between them starts with "prints". Each example runs in a fresh interpreter in a
temporary directory (files it saves land there), so the README's outputs cannot drift from the
code (tests/test_readme.py runs the check). An example also fails the check when

* it prints a warning (any ``...Warning:`` line on stderr: a ``FitWarning``, a
  ``DeprecationWarning``) that its code does not name in a ``# expected warning: Category``
  comment: a documented example shows everything it prints;
* its "prints" paragraph does not say how long it takes (``prints in about N s on 2 cores``;
  ``--update`` writes the time measured, on whatever machine runs it: run it on 2 cores). The
  examples run with the persistent compilation cache off, so the time is a first run's.
"""

import argparse
import difflib
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
#: Every page whose examples are run: the README and the documentation.
PAGES = (README, *sorted((REPO / "docs").glob("*.md")))
_BLOCK = re.compile(r"```python\n(?P<code>.*?)```\n(?P<between>.*?)(?=```)", re.S)
_OUTPUT = re.compile(r"```\n(?P<output>.*?)```", re.S)
#: A warning as Python prints it: ``file:line: Category: message``.
_WARNING = re.compile(r"^.*?:\d+: (?P<category>\w*Warning): (?P<message>.*)$", re.M)
_EXPECTED = re.compile(r"#\s*expected warning:\s*(?P<category>\w+)")
#: The time an example states: ``prints in about 45 s on 2 cores``.
_TIME = re.compile(r"prints(?: in about (?P<seconds>\d+) s on 2 cores)?")


def unexpected_warnings(stderr: str, code: str) -> list[str]:
    """The warnings on ``stderr`` whose category ``code`` does not expect, as printed."""
    expected = set(_EXPECTED.findall(code))
    return [m[0] for m in _WARNING.finditer(stderr) if m["category"] not in expected]


def examples(text: str) -> list[dict]:
    """The README's Python blocks: code, and the span and text of their printed output."""
    found = []
    for match in _BLOCK.finditer(text):
        example = {"code": match["code"], "line": text[: match.start()].count("\n") + 1}
        if match["between"].lstrip().startswith("prints"):
            output = _OUTPUT.match(text, match.end())
            if output is not None:
                example["output"] = output["output"]
                example["span"] = output.span("output")
                start = (
                    match.start("between") + len(match["between"]) - len(match["between"].lstrip())
                )
                stated = _TIME.match(text, start)
                example["time_span"] = stated.span()
                example["stated"] = stated["seconds"] and int(stated["seconds"])
        found.append(example)
    return found


def run_example(code: str) -> tuple[str, str, float]:
    """``(stdout, stderr, seconds)`` of ``code`` in a fresh interpreter and directory."""
    with tempfile.TemporaryDirectory() as folder:
        start = time.perf_counter()
        env = {**os.environ, "DPP_COMPILATION_CACHE": "0"}  # a first contact's time: cold
        proc = subprocess.run(
            [sys.executable, "-c", code], cwd=folder, capture_output=True, text=True,
            timeout=600, env=env,
        )  # fmt: skip
        seconds = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"the example failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    return proc.stdout, proc.stderr, seconds


def check_page(path: Path, update: bool) -> int:
    """Runs one page's examples; returns how many fail (an output, a warning, no stated time).

    With ``update``, the outputs and the times measured are written into the page (a warning
    still fails: it is fixed in the code, not in the page).
    """
    text = path.read_text()
    failed, warnings_printed, replacements = 0, 0, []
    path = path.resolve()
    if path == README:
        name = "the README"
    else:
        name = path.relative_to(REPO).as_posix() if path.is_relative_to(REPO) else str(path)
    for example in examples(text):
        stdout, stderr, seconds = run_example(example["code"])
        where = f"{path.name}:{example['line']}"
        warned = unexpected_warnings(stderr, example["code"])
        if warned:
            failed += 1
            warnings_printed += 1
            print(f"{where}: printed {len(warned)} warning(s) the page does not show:")
            print("\n".join(f"    {line}" for line in warned))
        if "output" not in example:
            print(f"{where}: ran in {seconds:.1f} s (no printed output to check)")
            continue
        measured = max(1, round(seconds))
        if update and example["stated"] != measured:
            replacements.append((example["time_span"], f"prints in about {measured} s on 2 cores"))
        elif example["stated"] is None:
            failed += 1
            print(f"{where}: the page does not say how long it takes (ran {seconds:.1f} s)")
        if stdout == example["output"]:
            stated = example["stated"]
            print(f"{where}: output as printed in {name} ({seconds:.1f} s; stated {stated} s)")
            continue
        failed += 1
        replacements.append((example["span"], stdout))
        print(f"{where}: the output differs from {name} ({seconds:.1f} s):")
        diff = difflib.unified_diff(
            example["output"].splitlines(), stdout.splitlines(), "README", "ran", lineterm=""
        )
        print("\n".join(diff))
    if update and replacements:
        for (start, end), new in sorted(replacements, reverse=True):
            text = text[:start] + new + text[end:]
        path.write_text(text)
        print(f"wrote {len(replacements)} output(s) and time(s) into {path}")
    return warnings_printed if update else failed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--update", action="store_true", help="write the outputs into the pages")
    parser.add_argument("--readme", type=Path, action="append", help="a page (default: all)")
    args = parser.parse_args()
    drifted = sum(check_page(page, args.update) for page in args.readme or PAGES)
    return 1 if drifted else 0


if __name__ == "__main__":
    sys.exit(main())
