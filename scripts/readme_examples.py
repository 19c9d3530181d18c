"""Runs the Python examples of the README and the docs and checks (or rewrites) what they print.

    python scripts/readme_examples.py            # run every example; exit 1 if a printed output
                                                 # differs from the page's (a diff is shown)
    python scripts/readme_examples.py --update   # write the outputs into the pages
    python scripts/readme_examples.py --readme docs/own-sets.md   # one page
    python scripts/readme_examples.py --isa none # this processor's rounding alone (a quarter
                                                 # of the time)
    python scripts/readme_examples.py --jobs 1   # checking, one run at a time (default 2)

An example is a ```python block; its expected output is the plain ``` block that follows when
the paragraph between them starts with "prints". Each example runs in a fresh interpreter in a
temporary directory (files it saves land there), and again with XLA compiling for other
instruction sets (``--isa``; AVX2, AVX and SSE 4.2 by default, less the one this processor's
code already is), so a page's outputs neither drift from the code nor depend on the processor
(tests/test_readme.py runs the check). An
example also fails the check when

* another processor's rounding changes what it prints (a tie, e.g. a round that early
  stopping chooses by a last bit): print what holds (a status, rounded figures) or choose data
  that does not sit on one;
* it prints a warning (any ``...Warning:`` line on stderr: a ``FitWarning``, a
  ``DeprecationWarning``) that its code does not name in a ``# expected warning: Category``
  comment: a documented example shows everything it prints;
* its "prints" paragraph does not say how long it takes (``prints in 41-52 s on 2 cores (AMD
  EPYC, cold)``; ``--update`` writes the range of the runs' times and the processor's name,
  on whatever machine runs it: run it on 2 cores). The examples run with the persistent
  compilation cache off, so the time is a first run's.
"""

import argparse
import difflib
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
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
#: The time an example states: ``prints in 41-52 s on 2 cores (AMD EPYC, cold)``.
_TIME = re.compile(
    r"prints(?: in (?:about )?(?P<seconds>\d+(?:-\d+)? s) on 2 cores(?: \([^)]*, cold\))?)?"
)  # an older page's "in about 30 s on 2 cores" is read too, and rewritten by --update
#: The instruction sets every example also runs for: XLA's code for a processor without
#: AVX-512 (most desktops, older servers), for one without AVX2, and for one with SSE 4.2 alone.
#: The one this processor's own code already is (AVX2 on one without AVX-512) is not run twice
#: (:func:`host_isa`).
ISAS = ("AVX2", "AVX", "SSE4_2")
#: The ``/proc/cpuinfo`` flag whose absence caps XLA's code at each instruction set.
_NEXT_FLAG = {"AVX2": "avx512f", "AVX": "avx2", "SSE4_2": "avx"}


def host_isa() -> str | None:
    """The cap of :data:`ISAS` that this processor's own code already is, or ``None``.

    ``AVX2`` on a processor with AVX2 and no AVX-512 (XLA compiles for the host, so capping it
    at AVX2 changes nothing), ``None`` with AVX-512 or where ``/proc/cpuinfo`` is not read.
    """
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return None
    line = next((x for x in text.splitlines() if x.startswith("flags")), None)
    if line is None:
        return None
    flags = set(line.split(":", 1)[1].split())
    for isa in ISAS:  # the widest cap whose next-wider set the host lacks
        below = {"AVX2": "avx2", "AVX": "avx", "SSE4_2": "sse4_2"}[isa]
        if below in flags and _NEXT_FLAG[isa] not in flags:
            return isa
    return None


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
                example["stated"] = stated["seconds"]
        found.append(example)
    return found


def run_example(code: str, isa: str | None = None) -> tuple[str, str, float]:
    """``(stdout, stderr, seconds)`` of ``code`` in a fresh interpreter and directory.

    ``isa`` caps the vector instructions XLA compiles for (``--xla_cpu_max_isa``: ``AVX2``,
    ``SSE4_2``, ...): the arithmetic of another processor, rounded differently.
    """
    with tempfile.TemporaryDirectory() as folder:
        start = time.perf_counter()
        env = {**os.environ, "DPP_COMPILATION_CACHE": "0"}  # a first contact's time: cold
        if isa is not None:
            env["XLA_FLAGS"] = f"{env.get('XLA_FLAGS', '')} --xla_cpu_max_isa={isa}".strip()
        proc = subprocess.run(
            [sys.executable, "-c", code], cwd=folder, capture_output=True, text=True,
            timeout=600, env=env,
        )  # fmt: skip
        seconds = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"the example failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    return proc.stdout, proc.stderr, seconds


def machine() -> str:
    """This processor's model name (``/proc/cpuinfo``, without its ``(R)`` marks), for the
    times a page states."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                name = re.sub(r"\([^)]*\)", "", line.split(":", 1)[1])  # Intel(R) Xeon(R)
                return re.sub(r"\s+", " ", name).strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _diff(expected: str, got: str, a: str, b: str) -> str:
    lines = difflib.unified_diff(expected.splitlines(), got.splitlines(), a, b, lineterm="")
    return "\n".join(lines)


def check_page(path: Path, update: bool, isas: tuple[str, ...] = ISAS, jobs: int = 2) -> int:
    """Runs one page's examples; returns how many fail (an output, a warning, no stated time,
    an output that another processor's rounding changes).

    Each example runs once as this processor compiles it, then once for each of ``isas``
    (XLA capped to that instruction set: the same arithmetic rounded as another processor
    rounds it); every run must print the same, so no printed figure sits on a tie (a round
    chosen by a validation score that a last bit decides). With ``update``, the outputs and
    the range of times measured are written into the page (a warning or a tie still fails:
    they are fixed in the code, not in the page). Checking, ``jobs`` runs go at once;
    updating, one at a time (the times written are a first contact's alone on the machine).
    """
    text = path.read_text()
    failed, not_fixable, replacements = 0, 0, []
    path = path.resolve()
    if path == README:
        name = "the README"
    else:
        name = path.relative_to(REPO).as_posix() if path.is_relative_to(REPO) else str(path)
    page_examples = examples(text)
    # every run of the page at once, two at a time when only checking (times are then not
    # written: a run beside another is slower than a first contact's)
    runs = [(i, None) for i in range(len(page_examples))]
    runs += [(i, isa) for i, e in enumerate(page_examples) if "output" in e for isa in isas]
    with ThreadPoolExecutor(1 if update else jobs) as pool:
        code = [e["code"] for e in page_examples]
        done = {(i, isa): pool.submit(run_example, code[i], isa) for i, isa in runs}
    for i, example in enumerate(page_examples):
        stdout, stderr, seconds = done[(i, None)].result()
        where = f"{path.name}:{example['line']}"
        warned = unexpected_warnings(stderr, example["code"])
        if warned:
            failed += 1
            not_fixable += 1
            print(f"{where}: printed {len(warned)} warning(s) the page does not show:")
            print("\n".join(f"    {line}" for line in warned))
        if "output" not in example:
            print(f"{where}: ran in {seconds:.1f} s (no printed output to check)")
            continue
        times = [seconds]
        for isa in isas:
            other, _, other_seconds = done[(i, isa)].result()
            times.append(other_seconds)
            if other != stdout:
                failed += 1
                not_fixable += 1
                print(
                    f"{where}: the output depends on the processor's rounding "
                    f"(a tie): compiled for {isa} it prints otherwise:"
                )
                print(_diff(stdout, other, "this processor", isa))
        stated = f"{max(1, round(min(times)))}-{max(1, round(max(times)))} s"
        if update and example["stated"] != stated:
            replacements.append(
                (example["time_span"], f"prints in {stated} on 2 cores ({machine()}, cold)")
            )
        elif example["stated"] is None:
            failed += 1
            print(f"{where}: the page does not say how long it takes (ran {seconds:.1f} s)")
        if stdout == example["output"]:
            print(
                f"{where}: output as printed in {name} (ran in {seconds:.1f} s; "
                f"stated {example['stated']})"
            )
            continue
        failed += 1
        replacements.append((example["span"], stdout))
        print(f"{where}: the output differs from {name} ({seconds:.1f} s):")
        print(_diff(example["output"], stdout, name, "ran"))
    if update and replacements:
        for (start, end), new in sorted(replacements, reverse=True):
            text = text[:start] + new + text[end:]
        path.write_text(text)
        print(f"wrote {len(replacements)} output(s) and time(s) into {path}")
    return not_fixable if update else failed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--update", action="store_true", help="write the outputs into the pages")
    parser.add_argument("--readme", type=Path, action="append", help="a page (default: all)")
    parser.add_argument(
        "--isa", action="append", metavar="ISA",
        help=f"an instruction set to run each example for too (default: {' '.join(ISAS)}); "
        "--isa none runs none",
    )  # fmt: skip
    parser.add_argument("--jobs", type=int, default=2, help="runs at once when checking (2)")
    args = parser.parse_args()
    if args.isa is None:
        isas = tuple(i for i in ISAS if i != host_isa())
        if len(isas) < len(ISAS):
            print(f"this processor's code is {host_isa()}'s: it runs once, not twice")
    else:
        isas = tuple(i for i in args.isa if i.lower() != "none")
    pages = args.readme or PAGES
    drifted = sum(check_page(page, args.update, isas, args.jobs) for page in pages)
    return 1 if drifted else 0


if __name__ == "__main__":
    sys.exit(main())
