"""Mutation check: deliberate bugs that the tests must catch, one at a time.

    python scripts/mutation_check.py [--only NAME ...] [--list]

Each mutation edits one file of a scratch copy of the ``dpp`` package (never the repository's)
and runs the tests that should catch it, with the scratch copy first on ``PYTHONPATH``. A
mutation is *caught* when those tests fail, *missed* when they pass. The tests that failed
(pytest's ``FAILED``/``ERROR`` lines; ``-x`` stops at the first) are then run on the unmutated
copy, all in one process, and must pass (else the check says so: a test failing without the
mutation would make it look caught). Prints one line per mutation and a summary, writes
``mutation_check.json`` beside the scratch copy's report (``--out``), and exits 1 if any
mutation was missed, 2 if a failing test also fails unmutated.

To add a mutation: append a :class:`Mutation` to :data:`MUTATIONS` with the file, an exact
snippet that occurs once in it, its replacement (the bug), and the tests (pytest node ids or
``-k`` expressions of a file) that should catch it; then run ``--only`` with its name and
check that it is caught for the right reason (the failing assertion, not an import error).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


@dataclasses.dataclass(frozen=True)
class Mutation:
    """One deliberate bug.

    Attributes:
        name: a short name (``--only``).
        what: the bug, in words.
        path: the file, relative to the ``dpp`` package.
        old: an exact snippet of it (occurs once).
        new: what replaces it.
        tests: pytest arguments that select the tests that must catch it.
    """

    name: str
    what: str
    path: str
    old: str
    new: str
    tests: tuple[str, ...]


MUTATIONS = (
    Mutation(
        "cv_pooling_as_mean",
        "DPPClassifierCV scores every pooling candidate with mean pooling",
        "estimators/search.py",
        "est = candidate(self.base, group, **starts)",
        "est = candidate(self.base, group, **starts)\n"
        "            if group.pooling is not None:\n"
        "                est.set_params(pooling='mean')",
        ("tests/test_pooling.py::test_every_pooling_and_k_candidates_fold_score_is_its_fit_alone",),
    ),
    Mutation(
        "cv_k_cache",
        "the per-K codes cache of DPPClassifierCV gives every K the first K's codes",
        "estimators/search.py",
        "codes, fitted = self.codes[k], self.thetas.setdefault(k, {})",
        "codes, fitted = next(iter(self.codes.values())), self.thetas.setdefault(k, {})",
        (
            "tests/test_pooling.py::"
            "test_every_k_candidate_of_the_standard_prototype_scores_its_own_codes",
        ),
    ),
    Mutation(
        "network_ignores_sample_weight",
        "the networks' training loss weighs every real set 1",
        "networks/training.py",
        "return -jnp.sum(batch.weights * ll) / jnp.sum(batch.weights) + model.penalty()",
        "real = (batch.weights > 0).astype(ll.dtype)\n"
        "        return -jnp.sum(real * ll) / jnp.sum(real) + model.penalty()",
        (
            "tests/test_references.py",
            "-k",
            "soft_labels and (attention_mil or deep_sets)",
        ),
    ),
    Mutation(
        "network_argmax_labels",
        "the networks fit the argmax of soft labels",
        "networks/training.py",
        "return jnp.sum(bucket.labels * jax.nn.log_softmax(logits, axis=1), axis=1)",
        "hard = jax.nn.one_hot(jnp.argmax(bucket.labels, axis=1), bucket.labels.shape[1])\n"
        "    return jnp.sum(hard * jax.nn.log_softmax(logits, axis=1), axis=1)",
        ("tests/test_references.py", "-k", "attention_mil or deep_sets or papers_formula"),
    ),
    Mutation(
        "model_file_swap",
        "loading a model file swaps two arrays of the same shape",
        "model_file.py",
        "    return header, arrays\n\n\ndef digest(",
        "    pairs = [(a, b) for a in sorted(arrays) for b in sorted(arrays)\n"
        "             if a < b and arrays[a].shape == arrays[b].shape]\n"
        "    if pairs:\n"
        "        a, b = pairs[0]\n"
        "        arrays[a], arrays[b] = arrays[b], arrays[a]\n"
        "    return header, arrays\n\n\ndef digest(",
        ("tests/test_model_files.py", "-k", "round_trip"),
    ),
    Mutation(
        "accept_worse_step",
        "coordinate ascent accepts a step that lowers L",
        "solvers/coordinate_ascent.py",
        "better = jnp.isfinite(value) & (value > current_value)",
        "better = jnp.isfinite(value)",
        ("tests/test_solvers.py", "-k", "accept_rule"),
    ),
    Mutation(
        "gem_p_is_one",
        "the generalised mean's exponent is fixed at 1 (the mean)",
        "pooling.py",
        "return 1.0 + jnp.minimum(jax.nn.softplus(self.rho), GEM_P_MAX - 1.0)",
        "return 1.0 + 0.0 * jnp.minimum(jax.nn.softplus(self.rho), GEM_P_MAX - 1.0)",
        ("tests/test_set_pooling.py",),
    ),
    Mutation(
        "instance_scores_off_by_one",
        "instance_scores gives each set's rows shifted by one vector",
        "estimators/inputs.py",
        "return np.split(np.asarray(rows), np.cumsum(sets.set_sizes())[:-1])",
        "return np.split(np.roll(np.asarray(rows), 1, axis=0), np.cumsum(sets.set_sizes())[:-1])",
        ("tests/test_instance_scores.py", "-k", "sum_back"),
    ),
    Mutation(
        "resume_drops_last_trial",
        "a resumed run drops the last finished trial (and fits it again)",
        "experiment/runner.py",
        'return sorted(kept, key=lambda r: r["trial"])',
        'last = max((r["trial"] for r in kept), default=-1)\n'
        '    return sorted((r for r in kept if r["trial"] != last), key=lambda r: r["trial"])',
        ("tests/test_runs.py", "-k", "keeps_every_finished_trial"),
    ),
)


def _env(scratch: Path) -> dict:
    """The environment of a test run: the scratch package first on the path, and the data and
    cache folders the repository's copy would use (the scratch copy is elsewhere)."""
    env = {**os.environ, "PYTHONPATH": str(scratch), "PYTHONDONTWRITEBYTECODE": "1"}
    data = REPO.parent / "shared" / "data"
    if "DPP_DATA_DIR" not in env and data.is_dir():
        env["DPP_DATA_DIR"] = str(data)
    env.setdefault("DPP_CACHE_DIR", str(REPO / ".cache"))
    return env


def _pytest(scratch: Path, args: tuple[str, ...], log: Path) -> tuple[int, float]:
    """Runs pytest on ``args`` with the scratch package first on the path: (exit code, s)."""
    env = _env(scratch)
    # -P: the working directory (the repository, with its own dpp/) not first on the path
    command = [sys.executable, "-P", "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
               "-p", "no:randomly", "-n", "0", "-m", "extended or not extended", *args]  # fmt: skip
    start = time.perf_counter()
    with open(log, "w") as out:
        code = subprocess.run(command, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT)
    return code.returncode, time.perf_counter() - start


def _failed_tests(log: Path) -> list[str]:
    """The node ids of pytest's ``FAILED`` and ``ERROR`` summary lines in ``log``."""
    ids = []
    for line in log.read_text().splitlines():
        for mark in ("FAILED ", "ERROR "):
            if line.startswith(mark):
                ids.append(line[len(mark) :].split(" - ", 1)[0].strip())
    return ids


def _imports_scratch(scratch: Path) -> bool:
    """Whether a process with the scratch copy on ``PYTHONPATH`` imports it (not the repo's)."""
    env = _env(scratch)
    out = subprocess.run(
        [sys.executable, "-P", "-c", "import dpp; print(dpp.__file__)"],
        cwd=REPO, env=env, capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    return Path(out).resolve().is_relative_to(scratch.resolve())


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", choices=[m.name for m in MUTATIONS])
    parser.add_argument("--list", action="store_true", help="list the mutations and exit")
    parser.add_argument("--out", type=Path, default=None, help="folder for the logs and JSON")
    args = parser.parse_args(argv)
    chosen = [m for m in MUTATIONS if not args.only or m.name in args.only]
    if args.list:
        for m in chosen:
            print(f"{m.name}: {m.what} ({m.path}; {' '.join(m.tests)})")
        return 0
    work = Path(tempfile.mkdtemp(prefix="dpp-mutation-"))
    out = args.out or work
    out.mkdir(parents=True, exist_ok=True)
    scratch = work / "scratch"
    ignore = shutil.ignore_patterns("__pycache__")
    for folder in ("dpp", "configs"):  # the package and what it reads beside it
        shutil.copytree(REPO / folder, scratch / folder, ignore=ignore)
    if not _imports_scratch(scratch):
        print("error: the scratch copy is not the one imported", file=sys.stderr)
        return 2
    started = time.perf_counter()
    results = []
    for m in chosen:
        target = scratch / "dpp" / m.path
        original = target.read_text()
        if original.count(m.old) != 1:
            count = original.count(m.old)
            print(f"error: {m.name}: its snippet occurs {count} times in dpp/{m.path} (the "
                  "code moved: update the mutation)", file=sys.stderr)  # fmt: skip
            return 2
        target.write_text(original.replace(m.old, m.new))
        try:
            code, seconds = _pytest(scratch, m.tests, out / f"{m.name}.log")
        finally:
            target.write_text(original)
        failing = _failed_tests(out / f"{m.name}.log")
        caught = code != 0
        results.append({"name": m.name, "what": m.what, "file": f"dpp/{m.path}",
                        "tests": list(m.tests), "caught": caught, "exit_code": code,
                        "failed": failing, "seconds": round(seconds, 1)})  # fmt: skip
        print(f"{'caught' if caught else 'MISSED'}  {m.name}: {m.what} ({seconds:.0f} s)")
    failing = list(dict.fromkeys(t for r in results for t in r["failed"]))
    if failing:  # the tests that caught a mutation pass without it
        code, seconds = _pytest(scratch, tuple(failing), out / "unmutated.log")
        if code != 0:
            print(f"error: without any mutation, {' '.join(failing)} fail(s) (exit {code}); "
                  f"see {out / 'unmutated.log'}")  # fmt: skip
            return 2
        print(f"unmutated: the {len(failing)} test(s) that caught them pass ({seconds:.0f} s)")
    missed = [r["name"] for r in results if not r["caught"]]
    total = time.perf_counter() - started
    (out / "mutation_check.json").write_text(
        json.dumps({"results": results, "missed": missed, "seconds": round(total, 1)}, indent=2)
    )
    print(f"{len(results) - len(missed)} of {len(results)} mutations caught in {total:.0f} s"
          f"{'; missed: ' + ', '.join(missed) if missed else ''} (logs in {out})")  # fmt: skip
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
