"""The suite's runs: every method on every outer fold of a task, into a run folder."""

from __future__ import annotations

import json
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from dpp.errors import ConfigError, FitWarning
from dpp.experiment.reporting import Recorder, finished_units, process_identity
from dpp.metrics import evaluate
from dpp.solvers.cache import release_compiled_programs
from lab.methods import (
    METHODS,
    VARIANTS,
    make_method,
    method_parameters,
    same_parameters,
    selection_record,
)
from lab.report import evidence_figure, selection_note, suite_figure, summary_table
from lab.statistics import example_evidence, instance_metrics
from lab.tasks import (
    DRAW_STRIDE,
    GENERATED_TASKS,
    TASKS,
    cut_training,
    membership_rows,
    outer_folds,
    unit_of,
)


def run_task(
    name: str,
    folds: int = 5,
    seed: int = 0,
    methods=tuple(METHODS),
    log=print,
    on_record: Callable[[dict], None] | None = None,
    skip: frozenset = frozenset(),
    draws: int = 1,
    n_jobs: int | None = None,
    train_sets: int | None = None,
) -> list[dict]:
    """Every method on task ``name``, one record per (draw, fold, method).

    Args:
        name: a key of :data:`TASKS`.
        folds: outer folds of each draw (stratified, shuffled with ``seed + draw``).
        seed: seed of the folds and of every estimator (``seed + draw`` in draw ``draw``: the
            methods' own seeds vary with the data).
        methods: names from :data:`METHODS`.
        log: called with one line per fitted method.
        on_record: called with each record the moment its fit is scored (a run keeps it on
            disk then: :class:`dpp.experiment.reporting.Recorder`).
        skip: ``(draw, fold)`` units not to run (a resumed run's finished ones).
        draws: data draws (draw 0 is the task's original data).
        n_jobs: fits at once in each selection (:class:`~dpp.DPPClassifierCV`); the records do
            not depend on it.
        train_sets: fit on this many of each fold's training sets at most (a stratified draw,
            :func:`cut_training`): small data; ``None``: all of them.

    Returns:
        Records with ``task``, ``draw``, ``fold``, ``method``, the metrics of
        :func:`dpp.metrics.evaluate` on the held-out fold, ``fit_seconds`` and the selection.

    Raises:
        KeyError: an unknown task.
    """
    loader, k, _ = TASKS[name]
    records = []
    for draw, fold, dataset, train, test in outer_folds(loader, folds, seed, draws):
        release_compiled_programs()  # a long run never reaches the kernel's mapping limit
        if (draw, fold) in skip:
            continue
        sets = dataset.sets
        labels = np.asarray(sets.labels)
        if train_sets is not None:
            train = cut_training(train, labels, train_sets, seed + DRAW_STRIDE * draw + fold)
        fitted_sets, test_sets = sets.subset(train), sets.subset(test)
        for method in methods:
            estimator = make_method(method, k, seed + draw, n_jobs)
            t0 = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", FitWarning)  # statuses are recorded below
                estimator.fit(fitted_sets)
            seconds = time.perf_counter() - t0
            metrics = evaluate(estimator.predict_log_proba(test_sets), labels[test])
            record = {"task": name, "draw": draw, "fold": fold, "method": method, **metrics}
            record.update(fit_seconds=seconds, **selection_record(estimator))
            if dataset.instance_labels is not None:
                witnesses = membership_rows(dataset.instance_labels, sets, test)
                record.update(instance_metrics(estimator, test_sets, labels[test], witnesses))
                if (draw, fold) == (0, 0) and "test_sets" in dataset.info:  # evidence_figure
                    record.update(example_evidence(estimator, sets, labels, test))
            records.append(record)
            if on_record is not None:
                on_record(record)
            where = f"{name} draw {draw} fold {fold}" if draws > 1 else f"{name} fold {fold}"
            log(
                f"{where} {method:<12} accuracy {100 * metrics['accuracy']:.1f}%  "
                f"log-lik {metrics['test_log_likelihood']:.3f}  {seconds:.1f} s  "
                f"({selection_note(record)})"
            )
    return records


def check_suite(tasks, methods, folds: int, draws: int = 1) -> None:
    """Refuses unknown tasks or methods, fewer than 2 folds or 1 draw, naming the ``suite`` key.

    Raises:
        ConfigError: naming the key, the value and the choices.
    """
    for key, values, known in (("suite.tasks", tasks, TASKS), ("suite.methods", methods, METHODS)):
        unknown = [v for v in values if v not in known] if values else ["(none)"]
        if unknown:
            raise ConfigError(f"{key}: unknown {unknown}; choose from {list(known)}")
    if int(folds) < 2:
        raise ConfigError(f"suite.folds must be >= 2, got {folds}")
    if int(draws) < 1:
        raise ConfigError(f"suite.draws must be >= 1, got {draws}")


def run_suite(
    out: Path,
    tasks=GENERATED_TASKS,
    folds: int = 5,
    seed: int = 0,
    methods=tuple(METHODS),
    resume: bool = False,
    log=print,
    on_accepted: Callable[[], None] | None = None,
    draws: int = 1,
    n_jobs: int | None = None,
    train_sets: int | None = None,
) -> dict:
    """Runs the suite into ``out``: ``suite.json``, ``suite.csv``, ``suite.md``, ``suite.png``.

    The experiments' record loop (:class:`dpp.experiment.reporting.Recorder`): the files are
    rewritten after every fit, with ``status`` ``running``; at the end it is ``complete``, or
    ``failed``/``interrupted`` with the error, keeping every finished fit. ``suite.json`` holds
    the process's pid, host and start time and ``heartbeat.json`` is refreshed while it lives,
    so a ``running`` left by a killed process can be told apart. With ``resume`` the outer
    folds of a task that every method finished are kept
    (:func:`~dpp.experiment.reporting.finished_units`, as the experiments keep their trials)
    and the others run; a complete run that holds every task asked for is left as it is, and
    one line says so.

    Args:
        out: the run directory.
        tasks: names from :data:`TASKS`.
        folds: outer folds per task and draw.
        seed: seed of the folds and the estimators (``seed + draw`` in each draw).
        methods: names from :data:`METHODS`.
        resume: continue the suite recorded in ``out``.
        log: called with one line per fitted method.
        on_accepted: called once the folder is accepted, before anything is written (the
            CLI releases its log file and writes the config then).
        draws: data draws of every task (draw 0: each task's original data); a unit of the
            paired comparisons is one (task, draw, fold).
        n_jobs: fits at once in each selection (``DPPClassifierCV(n_jobs)``: ``None`` or 1 one
            at a time, -1 every core); not part of the run's identity (the records do not
            depend on it), so a resume may change it.
        train_sets: fit on this many of each fold's training sets at most (``None``: all);
            part of the run's identity (``train_sets`` in ``suite.json``).

    Returns:
        The content of ``suite.json``.

    Raises:
        ConfigError: unknown tasks or methods, fewer than 2 folds, a folder that holds a suite
            run without ``resume``, or one recorded with other ``folds``, ``seed`` or
            ``methods``, a method whose parameters changed since (``method_parameters`` in
            ``suite.json``: :func:`~lab.methods.method_parameters`) or by an
            older version.
    """
    tasks, methods = list(tasks), list(methods)
    check_suite(tasks, methods, folds, draws)
    out = Path(out)
    path = out / "suite.json"
    header = {"experiment": "suite", "tasks": tasks, "folds": int(folds), "seed": int(seed)}
    header["methods"] = methods
    header["draws"] = int(draws)
    if train_sets is not None:  # absent from the runs on every training set
        header["train_sets"] = int(train_sets)
    header["method_parameters"] = {m: method_parameters(m) for m in methods}
    variants = {m: VARIANTS[m] for m in methods if m in VARIANTS}
    if variants:  # absent from runs of registered methods only
        header["variants"] = variants
    previous = _previous(path, header, resume, log)
    records = [] if previous is None else _kept_records(previous, header)
    done = {unit_of(r) for r in records}
    units = [(d, f) for d in range(int(draws)) for f in range(int(folds))]
    every = {(t, d, f) for t in header["tasks"] for d, f in units}
    if previous is not None and previous.get("status") == "complete" and done >= every:
        tasks_done = len({t for t, _, _ in done})
        log(f"{out} is complete ({tasks_done} tasks recorded): nothing to resume, nothing changed")
        return previous
    out.mkdir(parents=True, exist_ok=True)
    if on_accepted is not None:
        on_accepted()
    header.update(process_identity())  # with heartbeat.json: a killed run's "running" is stale

    def write(records: list[dict], status: str, **extra) -> dict:
        results = {**header, "status": status, **extra, "records": records}
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(results, indent=1, default=float))
        tmp.replace(path)  # atomic: a kill never leaves half a file
        if records:
            pd.DataFrame(records).to_csv(out / "suite.csv", index=False)
            (out / "suite.md").write_text("# Suite of set tasks\n\n" + summary_table(records))
        return results

    with Recorder(out, write, records) as recorder:
        for task in header["tasks"]:
            finished = frozenset((d, f) for t, d, f in done if t == task)
            if len(finished) == int(folds) * int(draws):
                log(f"{task}: kept from the earlier run")
                continue
            if finished:
                log(
                    f"{task}: outer folds (draw, fold) {sorted(finished)} kept from the earlier run"
                )
            run_task(
                task, folds, seed, methods, log, recorder.keep, finished, int(draws), n_jobs,
                train_sets,
            )  # fmt: skip
        recorder.records.sort(
            key=lambda r: (
                header["tasks"].index(r["task"]),
                *unit_of(r)[1:],
                methods.index(r["method"]),
            )
        )
        return recorder.finish(then=lambda _: _figures(recorder.records, out))


def _figures(records: list[dict], out: Path) -> None:
    """``suite.png`` and, with digit-bag tasks, ``evidence.png``."""
    suite_figure(records, out / "suite.png")
    evidence_figure(records, out / "evidence.png")


def _previous(path: Path, header: dict, resume: bool, log=print) -> dict | None:
    """The suite run recorded at ``path`` (``None`` without one), checked against ``header``.

    ``header["tasks"]`` then lists the earlier run's tasks first. A run recorded before the
    methods' parameters were (``method_parameters``) is continued with a line saying that
    they could not be checked; one recorded before a parameter of
    :data:`~lab.methods.ADDED_PARAMETERS` existed is the same model while that parameter
    holds its neutral value (:func:`~lab.methods.same_parameters`).

    Raises:
        ConfigError: a run there without ``resume``, an older format, or other ``folds``,
            ``seed`` or ``methods``, or a method whose parameters changed since.
    """
    if not path.is_file():
        return None
    previous = json.loads(path.read_text())
    if not resume:
        raise ConfigError(
            f"{path.parent} already holds a suite run; pass resume=true (benchmarks/suite.py: "
            "--resume) to continue it"
        )
    if not isinstance(previous, dict) or "records" not in previous:
        raise ConfigError(f"{path} is not a suite run this version can continue")
    recorded = {"draws": 1, **previous}  # a run from before draws had one
    keys = ("folds", "seed", "methods", "draws", "train_sets")
    mismatch = [k for k in keys if recorded.get(k) != header.get(k)]
    if mismatch:
        raise ConfigError(f"{path} was run with other {mismatch}; use a new folder")
    before = previous.get("method_parameters")
    if before is None:
        log(f"{path} does not record its methods' parameters (an older run): not checked")
    else:
        now = header["method_parameters"]
        changed = [m for m in header["methods"] if not same_parameters(before.get(m), now[m])]
        if changed:
            raise ConfigError(
                f"{path} was run with other parameters of {changed} (a default changed since?): "
                "its records and new ones would mix two models under one name; use a new folder"
            )
    header["tasks"] = list(dict.fromkeys([*previous["tasks"], *header["tasks"]]))
    return previous


def _kept_records(previous: dict, header: dict) -> list[dict]:
    """The earlier run's records of the outer folds every method finished (all its tasks)."""
    return finished_units(previous["records"], unit_of, header["methods"])
