"""A suite of set tasks nobody here tuned for, every method on each, one table.

Each task (:data:`TASKS`, :mod:`dpp.datasets.suite`) is cut into stratified outer folds; in
every fold each method is fitted on the other folds with its default selection and scored on
the held-out one:

* ``dpp``: :class:`~dpp.DPPClassifierCV` over ``DPPClassifier`` (``l2`` and the number of
  coordinate-ascent rounds by inner CV, the grid extended past an edge);
* ``standard``: the same selection over the standard prototype;
* ``pooling`` and ``bag_of_words``: :mod:`dpp.baselines.pooling` (their own ``C`` by CV).

InfoLoss is left out (its fits cost 10-100x a standard prototype's and it needs a beta scale
tuned per task). :func:`run_suite` runs it into a folder (``suite.json``, ``suite.csv``,
``suite.md``, ``suite.png``), from ``python experiments/run.py experiment=suite`` or
``scripts/suite.py``.
"""

from __future__ import annotations

import json
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.model_selection import StratifiedKFold

from dpp.datasets.base import Dataset
from dpp.datasets.suite import make_digit_patches, make_proportion, make_witness
from dpp.errors import ConfigError, FitWarning, RunInterrupted
from dpp.estimators import DPPClassifier, DPPClassifierCV, StandardPrototypeClassifier
from dpp.estimators.pooled import BagOfWordsClassifier, PoolingClassifier
from dpp.metrics import evaluate
from dpp.reporting import Heartbeat, process_identity

#: Tasks by name: (loader, K of the prototype methods, what the label depends on).
TASKS: dict[str, tuple[Callable[[], Dataset], int, str]] = {
    "witness_d10_r10": (lambda: make_witness(dim=10, witness_rate=0.1), 8, "witness"),
    "witness_d50_r05": (lambda: make_witness(dim=50, witness_rate=0.05, seed=1), 8, "witness"),
    "proportion_d10_c3": (lambda: make_proportion(dim=10), 8, "proportion"),
    "proportion_d30_c2": (
        lambda: make_proportion(dim=30, num_classes=2, components=6, seed=2),
        8,
        "proportion",
    ),
    "digits_patches": (lambda: make_digit_patches(), 16, "image patches"),
}

#: The ``l2`` grid of the prototype methods' selection (extended past an edge).
L2S = (1e-3, 1e-2, 1e-1, 1.0)
METHODS = ("dpp", "standard", "pooling", "bag_of_words")


def make_method(name: str, k: int, seed: int):
    """The unfitted estimator of ``name`` with ``K = k`` (where it has prototypes).

    Raises:
        ValueError: a name not in :data:`METHODS`.
    """
    if name == "dpp":
        return DPPClassifierCV(DPPClassifier(n_prototypes=k, random_state=seed), l2s=L2S, cv=3)
    if name == "standard":
        base = StandardPrototypeClassifier(n_prototypes=k, random_state=seed)
        return DPPClassifierCV(base, l2s=L2S, cv=3)
    if name == "pooling":
        return PoolingClassifier(random_state=seed)
    if name == "bag_of_words":
        return BagOfWordsClassifier(n_prototypes=k, random_state=seed)
    raise ValueError(f"unknown method {name!r}; choose from {METHODS}")


def _selection(estimator) -> dict:
    """Where each method's selection landed, and its final fit's status."""
    if isinstance(estimator, DPPClassifierCV):
        info = estimator.best_estimator_.fit_info_
        return {
            "l2": estimator.best_params_["l2"],
            "rounds": estimator.best_rounds_,  # chosen by the inner CV (DPP), else None
            "position": estimator.best_position_,
            "beats_prior": estimator.beats_prior_,
            "status": info.get("status"),
            "saturated_fraction": info.get("saturated_fraction"),
        }
    return {
        "C": estimator.C_,
        "position": estimator.C_position_,
        "status": estimator.fit_info_["status"],
    }


def run_task(name: str, folds: int = 5, seed: int = 0, methods=METHODS, log=print) -> list[dict]:
    """Every method on task ``name``, one record per (fold, method).

    Args:
        name: a key of :data:`TASKS`.
        folds: outer folds (stratified, shuffled with ``seed``).
        seed: seed of the folds and of every estimator.
        methods: names from :data:`METHODS`.
        log: called with one line per fitted method.

    Returns:
        Records with ``task``, ``fold``, ``method``, the metrics of
        :func:`dpp.metrics.evaluate` on the held-out fold, ``fit_seconds`` and the selection.

    Raises:
        KeyError: an unknown task.
    """
    loader, k, _ = TASKS[name]
    dataset = loader()
    sets = dataset.sets
    labels = np.asarray(sets.labels)
    splitter = StratifiedKFold(folds, shuffle=True, random_state=seed)
    records = []
    for fold, (train, test) in enumerate(splitter.split(np.zeros(len(labels)), labels.argmax(1))):
        train_sets, test_sets = sets.subset(train), sets.subset(test)
        for method in methods:
            estimator = make_method(method, k, seed)
            t0 = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", FitWarning)  # statuses are recorded below
                estimator.fit(train_sets)
            seconds = time.perf_counter() - t0
            metrics = evaluate(estimator.predict_log_proba(test_sets), labels[test])
            record = {"task": name, "fold": fold, "method": method, **metrics}
            record.update(fit_seconds=seconds, **_selection(estimator))
            records.append(record)
            log(
                f"{name} fold {fold} {method:<12} accuracy {100 * metrics['accuracy']:.1f}%  "
                f"log-lik {metrics['test_log_likelihood']:.3f}  {seconds:.1f} s  "
                f"({selection_note(record)})"
            )
    return records


def selection_note(record: dict) -> str:
    """``status, l2 interior`` (or ``C ...``): the final fit's status where the method has one."""
    parameter = "l2" if "l2" in record else "C"
    status = record.get("status")
    return ", ".join([*([status] if status else []), f"{parameter} {record['position']}"])


def summary_table(records: list[dict]) -> str:
    """Markdown: per task, each method's accuracy and log-likelihood (mean ± 2 s.e. over folds).

    Followed by where DPP is at least as accurate as pooling, and the selections' positions and
    statuses.
    """
    frame = pd.DataFrame(records)
    lines = [
        "| task | label depends on | "
        + " | ".join(f"{m} acc. (%) | {m} log-lik." for m in METHODS)
        + " |",
        "|---|---|" + "---|---|" * len(METHODS),
    ]
    verdicts = []
    for task, rows in frame.groupby("task", sort=False):
        cells = []
        means = {}
        for method in METHODS:
            part = rows[rows.method == method]
            if part.empty:
                cells += ["-", "-"]
                continue
            for metric, factor, digits in (("accuracy", 100, 1), ("test_log_likelihood", 1, 3)):
                values = factor * part[metric].to_numpy()
                se = values.std(ddof=1) / np.sqrt(len(values)) if len(values) > 1 else 0.0
                cells.append(f"{values.mean():.{digits}f} ± {2 * se:.{digits}f}")
                means[method, metric] = values.mean()
        kind = TASKS[task][2] if task in TASKS else ""
        lines.append(f"| {task} | {kind} | " + " | ".join(cells) + " |")
        if ("dpp", "accuracy") in means and ("pooling", "accuracy") in means:
            ahead = means["dpp", "accuracy"] >= means["pooling", "accuracy"]
            diff = means["dpp", "accuracy"] - means["pooling", "accuracy"]
            verdicts.append(
                f"- {task}: DPP - pooling {diff:+.1f} points ({'yes' if ahead else 'NO'})"
            )
    selected = frame[frame.method.isin(["dpp", "standard"])]
    positions = selected.groupby(["method", "position"]).size().to_dict()
    statuses = selected.groupby(["method", "status"]).size().to_dict()
    seconds = frame.pivot_table("fit_seconds", "task", "method", sort=False)
    shown = [m for m in METHODS if m in seconds]
    timing = [
        "| task | " + " | ".join(f"{m} (s)" for m in shown) + " |",
        "|---|" + "---|" * len(shown),
        *(
            f"| {task} | " + " | ".join(f"{row[m]:.1f}" for m in shown) + " |"
            for task, row in seconds.iterrows()
        ),
    ]
    rounds = []
    if "rounds" in frame and frame.rounds.notna().any():
        chosen = frame[frame.method == "dpp"].rounds.dropna().astype(int).value_counts()
        rounds = [
            "DPP rounds chosen by the inner CV (fits): "
            + ", ".join(f"{r}: {n}" for r, n in sorted(chosen.items()))
        ]
    lines += [
        "",
        "Mean ± 2 standard errors over the outer folds.",
        "",
        "Is DPP at least as accurate as the pooled logistic regression?",
        "",
        *verdicts,
        "",
        "Where the prototype methods' l2 selection landed (fits): "
        + ", ".join(f"{m} {p}: {n}" for (m, p), n in positions.items()),
        "",
        "Final fit statuses: " + ", ".join(f"{m} {s}: {n}" for (m, s), n in statuses.items()),
        *rounds,
        "",
        "Fit time per outer fold (mean seconds, selection and refit included):",
        "",
        *timing,
    ]
    return "\n".join(lines) + "\n"


def check_suite(tasks, methods, folds: int) -> None:
    """Refuses unknown tasks or methods and fewer than 2 folds, naming the ``suite`` key.

    Raises:
        ConfigError: naming the key, the value and the choices.
    """
    for key, values, known in (("suite.tasks", tasks, TASKS), ("suite.methods", methods, METHODS)):
        unknown = [v for v in values if v not in known] if values else ["(none)"]
        if unknown:
            raise ConfigError(f"{key}: unknown {unknown}; choose from {list(known)}")
    if int(folds) < 2:
        raise ConfigError(f"suite.folds must be >= 2, got {folds}")


def run_suite(
    out: Path,
    tasks=tuple(TASKS),
    folds: int = 5,
    seed: int = 0,
    methods=METHODS,
    resume: bool = False,
    log=print,
    on_accepted: Callable[[], None] | None = None,
) -> dict:
    """Runs the suite into ``out``: ``suite.json``, ``suite.csv``, ``suite.md``, ``suite.png``.

    The files are rewritten after every task, with ``status`` ``running``; at the end it is
    ``complete``, or ``failed``/``interrupted`` with the error, keeping the finished tasks.
    ``suite.json`` holds the process's pid, host and start time and ``heartbeat.json`` is
    refreshed while it lives (:class:`dpp.reporting.Heartbeat`), so a ``running`` left by a
    killed process can be told apart. With ``resume`` every task that ``suite.json`` holds is
    kept and the others run; a complete run that holds every task asked for is left as it is,
    and one line says so.

    Args:
        out: the run directory.
        tasks: names from :data:`TASKS`.
        folds: outer folds per task.
        seed: seed of the folds and the estimators.
        methods: names from :data:`METHODS`.
        resume: continue the suite recorded in ``out``.
        log: called with one line per fitted method.
        on_accepted: called once the folder is accepted, before anything is written (the
            CLI releases its log file and writes the config then).

    Returns:
        The content of ``suite.json``.

    Raises:
        ConfigError: unknown tasks or methods, fewer than 2 folds, a folder that holds a suite
            run without ``resume``, or one recorded with other ``folds``, ``seed`` or
            ``methods`` or by an older version.
    """
    tasks, methods = list(tasks), list(methods)
    check_suite(tasks, methods, folds)
    out = Path(out)
    path = out / "suite.json"
    header = {"experiment": "suite", "tasks": tasks, "folds": int(folds), "seed": int(seed)}
    header["methods"] = methods
    records = _kept_records(path, header, resume)
    previous = json.loads(path.read_text()) if records else None
    done = {r["task"] for r in records}
    if previous is not None and previous.get("status") == "complete" and done >= set(tasks):
        log(f"{out} is complete ({len(done)} tasks recorded): nothing to resume, nothing changed")
        return previous
    out.mkdir(parents=True, exist_ok=True)
    if on_accepted is not None:
        on_accepted()
    start = time.perf_counter()
    header.update(process_identity())  # with heartbeat.json: a killed run's "running" is stale

    def write(status: str, **extra) -> dict:
        results = {**header, "status": status, **extra, "records": records}
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(results, indent=1, default=float))
        tmp.replace(path)  # atomic: a kill never leaves half a file
        if records:
            pd.DataFrame(records).to_csv(out / "suite.csv", index=False)
            (out / "suite.md").write_text("# Suite of set tasks\n\n" + summary_table(records))
        return results

    with Heartbeat(out):
        write("running")
        try:
            for task in tasks:
                if task in done:
                    log(f"{task}: kept from the earlier run")
                    continue
                records += run_task(task, folds, seed, methods, log)
                write("running")
            suite_figure(records, out / "suite.png")
            return write("complete", wall_seconds=time.perf_counter() - start)
        except BaseException as err:
            stopped = isinstance(err, RunInterrupted | KeyboardInterrupt)
            write("interrupted" if stopped else "failed", error=f"{type(err).__name__}: {err}")
            raise


def _kept_records(path: Path, header: dict, resume: bool) -> list[dict]:
    """The records of the suite run at ``path`` to keep (none without one).

    ``header["tasks"]`` then lists the earlier run's tasks too.

    Raises:
        ConfigError: a run there without ``resume``, an older format, or other ``folds``,
            ``seed`` or ``methods``.
    """
    if not path.is_file():
        return []
    previous = json.loads(path.read_text())
    if not resume:
        raise ConfigError(
            f"{path.parent} already holds a suite run; pass resume=true (scripts/suite.py: "
            "--resume) to continue it"
        )
    if not isinstance(previous, dict) or "records" not in previous:
        raise ConfigError(f"{path} is not a suite run this version can continue")
    mismatch = [k for k in ("folds", "seed", "methods") if previous.get(k) != header[k]]
    if mismatch:
        raise ConfigError(f"{path} was run with other {mismatch}; use a new folder")
    header["tasks"] = list(dict.fromkeys([*previous["tasks"], *header["tasks"]]))
    return previous["records"]  # every finished task is kept, asked for again or not


def suite_figure(records: list[dict], path: Path) -> Path:
    """Accuracy per task and method, mean ± 2 standard errors over the outer folds (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from dpp.plots import save_figure

    frame = pd.DataFrame(records)
    tasks = list(dict.fromkeys(frame.task))
    methods = [m for m in METHODS if m in set(frame.method)]
    fig, ax = plt.subplots(figsize=(1.6 * len(tasks) + 2, 3.6))
    width = 0.8 / len(methods)
    for i, method in enumerate(methods):
        stats = frame[frame.method == method].groupby("task", sort=False).accuracy
        mean = 100 * stats.mean().reindex(tasks)
        se = 100 * (stats.std(ddof=1) / np.sqrt(stats.count())).reindex(tasks).fillna(0)
        x = np.arange(len(tasks)) + (i - (len(methods) - 1) / 2) * width
        ax.bar(x, mean, width, yerr=2 * se, capsize=2, label=method)
    ax.set_xticks(np.arange(len(tasks)), tasks, rotation=15)
    ax.set_ylabel("test accuracy (%)")
    ax.set_ylim(max(0, float(100 * frame.accuracy.min()) - 10), 101)
    ax.set_title("Suite of set tasks: mean ± 2 s.e. over outer folds")
    ax.legend(fontsize=8, ncols=len(methods), loc="lower right")
    fig.tight_layout()
    return save_figure(fig, path)
