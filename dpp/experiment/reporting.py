"""Run outputs: ``results.json`` (schema in README.md), ``results.csv`` and ``table.md``.

Writers here only read the per-trial records, so a table can always be rebuilt from
``results.json`` alone (:func:`load_results`).

A run is recognisable from its files alone: ``results.json`` holds its ``status``
(``running``, ``complete``, ``failed`` or ``interrupted``), the ``pid``, ``host`` and
``started_at`` of the process, and a :class:`Heartbeat` thread rewrites ``heartbeat.json`` every
few seconds while the process lives. :func:`run_state` turns a ``running`` status whose process is
gone (same host) or whose heartbeat is stale into ``killed``.
"""

from __future__ import annotations

import csv
import json
import math
import os
import signal
import socket
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from dpp.errors import RunInterrupted
from dpp.model_file import jsonable  # re-exported: its old home

SCHEMA_VERSION = 1

#: Metrics summarised per method, in table order (those present in the records are used).
SUMMARY_METRICS = (
    "accuracy", "balanced_accuracy", "test_log_likelihood", "kl_bits", "fit_seconds",
    "compile_seconds",
)  # fmt: skip
_LABELS = {
    "accuracy": "accuracy (%)",
    "balanced_accuracy": "balanced acc. (%)",
    "test_log_likelihood": "test log-lik. / set",
    "kl_bits": "KL (bits)",
    "fit_seconds": "fit (s)",
    "compile_seconds": "compile (s)",
}
_PERCENT = {"accuracy", "balanced_accuracy"}


def describe(values: Sequence[float]) -> dict:
    """Mean, sample standard deviation (ddof = 1), standard error and count.

    ``std`` and ``stderr`` are ``None`` for fewer than two values.
    """
    x = np.asarray(values, dtype=np.float64)
    n = int(x.size)
    std = float(np.std(x, ddof=1)) if n > 1 else None
    return {
        "mean": float(np.mean(x)) if n else None,
        "std": std,
        "stderr": std / math.sqrt(n) if std is not None else None,
        "n": n,
    }


def summarize(records: Sequence[dict]) -> dict:
    """Per-method summary ``{method: {metric: describe(values)}}`` in order of appearance."""
    summary: dict[str, dict] = {}
    for method in dict.fromkeys(r["method"] for r in records):
        rows = [r for r in records if r["method"] == method]
        summary[method] = {
            m: describe([r[m] for r in rows]) for m in SUMMARY_METRICS if all(m in r for r in rows)
        }
    return summary


def _fmt(stat: dict, metric: str, spread: str) -> str:
    factor = 100.0 if metric in _PERCENT else 1.0
    digits = 2 if metric in _PERCENT or metric in ("fit_seconds", "compile_seconds") else 4
    mean = stat["mean"] * factor
    if spread == "std":
        width = stat["std"]
    else:
        width = None if stat["stderr"] is None else 2.0 * stat["stderr"]
    if width is None:
        return f"{mean:.{digits}f}"
    return f"{mean:.{digits}f} ± {width * factor:.{digits}f}"


def markdown_table(summary: dict, spread: str = "std") -> str:
    """A markdown table of the summary, one row per method.

    Args:
        summary: output of :func:`summarize`.
        spread: ``"std"`` (one standard deviation) or ``"stderr2"`` (two standard errors).

    Returns:
        The table as text, with a caption line saying what ``±`` means.
    """
    metrics = [m for m in SUMMARY_METRICS if any(m in s for s in summary.values())]
    head = "| method | trials | " + " | ".join(_LABELS[m] for m in metrics) + " |"
    rule = "|---|---|" + "---|" * len(metrics)
    rows = []
    for method, stats in summary.items():
        n = max((s["n"] for s in stats.values()), default=0)
        cells = [_fmt(stats[m], m, spread) if m in stats else "" for m in metrics]
        rows.append(f"| {method} | {n} | " + " | ".join(cells) + " |")
    meaning = "one standard deviation" if spread == "std" else "two standard errors"
    caption = f"± is {meaning} across trials."
    if all(s["n"] < 2 for stats in summary.values() for s in stats.values()):
        caption = "One trial, so no spread (± needs two or more)."
    return "\n".join([head, rule, *rows]) + f"\n\n{caption}\n"


def write_results(out_dir: Path, header: dict, records: list[dict], status: str, **extra) -> dict:
    """Writes ``results.json``, ``results.csv`` and ``table.md`` from the records so far.

    Called after every (trial, method), so a run that fails keeps what it finished.

    Args:
        out_dir: run directory.
        header: run-level fields (experiment, dataset, methods, pid, host, ...).
        records: per-(trial, method) dicts.
        status: ``running``, ``complete``, ``failed`` or ``interrupted``.
        **extra: further top-level fields (``error``, ``warnings``, ``wall_seconds``, ...).

    Returns:
        The results dictionary written to ``results.json``.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    summary = summarize(records)
    results = {
        "schema_version": SCHEMA_VERSION,
        **header,
        "status": status,
        **extra,
        "summary": summary,
        "trials": records,
    }
    tmp = out_dir / "results.json.tmp"
    tmp.write_text(json.dumps(jsonable(results), indent=2))
    tmp.replace(out_dir / "results.json")
    _write_csv(out_dir / "results.csv", records)
    experiment, dataset = header.get("experiment", "dpp"), header.get("dataset", "")
    # "synthetic: synthetic" said one thing twice: the dataset only where it differs
    name = experiment if dataset in ("", experiment) else f"{experiment}: {dataset}"
    title = f"# {name}\n\n"
    table = title + _status_line(results) + (markdown_table(summary) if records else "")
    if results.get("warnings"):
        table += "\nWarnings:\n\n" + "".join(f"- {w}\n" for w in results["warnings"])
    (out_dir / "table.md").write_text(table)
    return results


def _status_line(results: dict) -> str:
    status = results["status"]
    if status == "complete":
        return ""
    trials = len({r["trial"] for r in results["trials"]})
    line = (
        f"**Status: {status}.** Partial results: {trials} of {results.get('num_trials', '?')} "
        f"trials (pid {results.get('pid', '?')} on {results.get('host', '?')}, started "
        f"{results.get('started_at', '?')})."
    )
    if results.get("error"):
        line += f" Error: {results['error']}"
    return line + "\n\n"


#: Seconds between heartbeats, and the age after which a ``running`` run counts as killed.
HEARTBEAT_SECONDS = 10.0
STALE_SECONDS = 120.0


class Heartbeat:
    """Rewrites ``heartbeat.json`` (pid, host, time) every few seconds while a run lives.

    A context manager: the daemon thread starts on entry and stops on exit. SIGKILL stops it
    with the process, so the file's age tells a reader that the run is dead.
    """

    def __init__(self, out_dir: Path, interval: float = HEARTBEAT_SECONDS):
        self.path = Path(out_dir) / "heartbeat.json"
        self.interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, daemon=True, name="dpp-heartbeat")

    def _write(self) -> None:
        record = {"pid": os.getpid(), "host": socket.gethostname(), "time": time.time()}
        tmp = self.path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(record))
        tmp.replace(self.path)

    def _beat(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self._write()
            except OSError:  # the directory went away; nothing to report to
                return

    def __enter__(self) -> Heartbeat:
        self._write()
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


def stop_status(err: BaseException) -> str:
    """``interrupted`` for SIGTERM/SIGINT (:class:`~dpp.errors.RunInterrupted`), else ``failed``."""
    return "interrupted" if isinstance(err, RunInterrupted | KeyboardInterrupt) else "failed"


class Recorder:
    """A run's records on disk after every one, and its status at the end: every run's loop.

    The experiments (``results.json``, :mod:`dpp.experiment.runner`) and the benchmark beside
    the package (``suite.json``, ``benchmarks/lab``) keep their records through one of these, so
    both keep each fit's record the moment it ends, mark a killed run by its heartbeat, and
    end ``complete``, ``failed`` or ``interrupted`` with what they finished.

    A context manager: on entry the :class:`Heartbeat` starts and the run file is written with
    status ``running``; :meth:`keep` appends a record and rewrites it; :meth:`finish` writes
    ``complete``; an exception leaving the block writes ``failed`` or ``interrupted`` with the
    error (and is raised on).

    Signals: inside the block (in the main thread) SIGTERM and SIGINT raise
    :class:`~dpp.errors.RunInterrupted` at once, and :meth:`check` (called by :meth:`keep` and
    :meth:`finish`) raises it again. Python runs a signal handler wherever the main thread is,
    a ``__del__`` or a weakref callback included, and an exception raised there is only
    printed: without the check, a run once finished all its trials after SIGTERM, exit code 0.
    The previous handlers are restored on leaving the block.

    Args:
        out: the run folder (``heartbeat.json``).
        write: ``(records, status, **extra) -> dict``: writes the run's files from the records
            so far, atomically, and returns what it wrote (``extra``: ``error``,
            ``wall_seconds``).
        records: records kept from an earlier run (resumed), grown in place.
    """

    def __init__(self, out: Path, write, records: list[dict] | None = None):
        self.out = Path(out)
        self.write = write
        self.records = [] if records is None else records
        self.start = time.perf_counter()
        #: called with each kept record (a tracker's ``log_record``)
        self.on_record = None
        #: called with the final results, complete or not (a tracker's ``finish``)
        self.on_end = None
        self._heartbeat = Heartbeat(self.out)
        #: the name of the signal received inside the block (``SIGTERM``, ``SIGINT``), if any
        self.received: str | None = None
        self._previous_handlers: dict = {}

    def keep(self, record: dict) -> None:
        """Appends ``record``, rewrites the run's files (status ``running``), then :meth:`check`."""
        self.records.append(record)
        self.write(self.records, "running")
        if self.on_record is not None:
            self.on_record(record)
        self.check()

    def check(self) -> None:
        """Raises :class:`~dpp.errors.RunInterrupted` if a signal came, swallowed or not.

        The run's loops call it between fits (:meth:`keep` and :meth:`finish` do).
        """
        if self.received is not None:
            raise RunInterrupted(self.received)

    def _interrupt(self, signum, frame):
        self.received = signal.Signals(signum).name
        raise RunInterrupted(self.received)

    def finish(self, then=None, **extra) -> dict:
        """Writes the run ``complete`` (with ``wall_seconds``) and returns what was written.

        Args:
            then: optional ``results -> None`` run before :attr:`on_end` (files drawn from
                the final results, which a tracker then logs).
            **extra: further top-level fields.
        """
        self.check()
        results = self.write(self.records, "complete", wall_seconds=self.seconds(), **extra)
        if then is not None:
            then(results)
        if self.on_end is not None:
            self.on_end(results)
        return results

    def seconds(self) -> float:
        """Seconds since the recorder was made."""
        return time.perf_counter() - self.start

    def __enter__(self) -> Recorder:
        self._heartbeat.__enter__()
        try:
            self.write(self.records, "running")
        except BaseException:  # no __exit__ follows a failed __enter__: stop the beat here
            self._heartbeat.__exit__()
            raise
        if threading.current_thread() is threading.main_thread():  # signals reach it alone
            self._previous_handlers = {
                sig: signal.signal(sig, self._interrupt) for sig in (signal.SIGTERM, signal.SIGINT)
            }
        return self

    def __exit__(self, exc_type, err, tb) -> bool:
        for sig, old in self._previous_handlers.items():
            signal.signal(sig, old)
        self._previous_handlers = {}
        try:
            if err is not None:
                results = self.write(
                    self.records, stop_status(err), error=f"{type(err).__name__}: {err}",
                    wall_seconds=self.seconds(),
                )  # fmt: skip
                if self.on_end is not None:
                    self.on_end(results)
        finally:
            self._heartbeat.__exit__(exc_type, err, tb)
        return False


def finished_units(records: list[dict], unit, methods, keep=None) -> list[dict]:
    """The records of the units (trials, task folds) that every method finished, in order.

    A resumed run keeps these and fits the rest again (with the same seeds, so the same
    numbers): a unit that a kill cut short is run whole.

    Args:
        records: an earlier run's records.
        unit: ``record -> key`` of its unit (``trial``; ``(task, fold)``).
        methods: the methods every kept unit holds a record of.
        keep: optional ``key -> bool``: further conditions (trial 0's files on disk).
    """
    by_unit: dict = {}
    for record in records:
        by_unit.setdefault(unit(record), []).append(record)
    kept = []
    for key, rows in by_unit.items():
        if {r["method"] for r in rows} != set(methods):
            continue
        if keep is not None and not keep(key):
            continue
        kept += rows
    return kept


def process_identity() -> dict:
    """``pid``, ``host`` and ``started_at`` (ISO 8601, UTC) of this process's run."""
    return {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, owned by someone else
        return True
    return True


def run_state(run_dir: Path, now: float | None = None) -> tuple[str, str]:
    """The status of a run as its files tell it, and why.

    ``running`` is trusted only while the process is alive (checked by pid on the same host)
    and its heartbeat is fresh; otherwise the run was killed (SIGKILL, a node failure, a
    scheduler's time limit) and is reported as ``killed``.

    Args:
        run_dir: a run directory holding ``results.json``.
        now: current time (seconds since the epoch); default ``time.time()``.

    Returns:
        ``(status, explanation)``.

    Raises:
        FileNotFoundError: if ``results.json`` is missing.
    """
    results = load_results(run_dir)
    status = results.get("status", "?")
    trials = len({r["trial"] for r in results.get("trials", [])})
    done = f"{trials} of {results.get('num_trials', '?')} trials recorded"
    if status != "running":
        return status, done
    now = time.time() if now is None else now
    beat_path = Path(run_dir) / "heartbeat.json"
    beat = json.loads(beat_path.read_text()) if beat_path.is_file() else None
    pid, host = results.get("pid"), results.get("host")
    if pid is not None and host == socket.gethostname() and not _pid_alive(int(pid)):
        return "killed", f"process {pid} on {host} is gone; {done}"
    if beat is None or now - beat["time"] > STALE_SECONDS:
        age = "no heartbeat" if beat is None else f"last heartbeat {now - beat['time']:.0f} s ago"
        return "killed", f"{age} (process {pid} on {host}); {done}"
    return "running", f"process {pid} on {host} is alive; {done}"


def load_results(run_dir: Path) -> dict:
    """Reads ``results.json`` of a run directory.

    Raises:
        FileNotFoundError: naming the missing file.
    """
    path = Path(run_dir) / "results.json"
    if not path.is_file():
        raise FileNotFoundError(f"no results.json in {run_dir}")
    return json.loads(path.read_text())


def _write_csv(path: Path, records: list[dict]) -> None:
    scalar_keys = [
        k
        for k in dict.fromkeys(k for r in records for k in r)
        if all(np.isscalar(r.get(k, 0)) or r.get(k) is None for r in records)
    ]
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=scalar_keys, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(records)
