"""A suite of set tasks nobody here tuned for, every method on each, one table.

Each task (:data:`TASKS`, :mod:`dpp.datasets.suite`) is cut into stratified outer folds; in
every fold each method (:data:`METHODS`, a registry of factories) is fitted on the other folds
with its default selection and scored on the held-out one:

* ``dpp``: :class:`~dpp.DPPClassifierCV` with its defaults (``l2``, the number of
  coordinate-ascent rounds and the pooling, mean or max, by inner CV; the grid extended past
  an edge): what a user gets; ``dpp_mean`` (the paper's pooling), ``dpp_max`` and ``dpp_gem``
  fix the pooling; ``dpp_embedded_mean`` and ``dpp_embedded_max`` are DPP on a learned
  embedding (``DPPClassifier(embedding=(256, 128, 64))``, K = 16);
* ``standard``: the same selection over the standard prototype;
* ``pooling`` and ``bag_of_words``: :mod:`dpp.estimators.pooled` (their own ``C`` by CV);
* ``attention_mil`` and ``deep_sets``: the neural set baselines of
  :mod:`dpp.estimators.neural` (Ilse et al. 2018; MI-Net, Wang et al. 2018), with the papers'
  defaults.

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
from dpp.errors import ConfigError, FitWarning
from dpp.estimators import ESTIMATORS, DPPClassifierCV
from dpp.experiment.reporting import Recorder, finished_units, process_identity
from dpp.metrics import evaluate

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
#: The embedding of the embedded DPP (the neural baselines' 256-128-64) and its ``K``.
EMBEDDING, EMBEDDED_K = (256, 128, 64), 16


def _dpp_cv(pooling=None):
    def make(k: int, seed: int):
        extra = {} if pooling is None else {"pooling": pooling}
        base = ESTIMATORS["dpp"](n_prototypes=k, random_state=seed)
        return DPPClassifierCV(base, l2s=L2S, cv=3, **extra)

    return make


def _embedded(pooling: str):
    def make(k: int, seed: int):
        del k  # the embedding space has its own K
        return ESTIMATORS["dpp"](
            n_prototypes=EMBEDDED_K, embedding=EMBEDDING, optimizer="adam", pooling=pooling,
            random_state=seed,
        )  # fmt: skip

    return make


#: Every method by name: ``(K, seed) -> unfitted estimator``: configured variants of the
#: estimators of the one registry, :data:`dpp.estimators.ESTIMATORS` (which the model file and
#: the Hydra config store read too).
METHODS: dict[str, Callable] = {
    "dpp": _dpp_cv(),
    "dpp_mean": _dpp_cv(["mean"]),
    "dpp_max": _dpp_cv(["max"]),
    "dpp_gem": _dpp_cv(["gem"]),
    "dpp_embedded_mean": _embedded("mean"),
    "dpp_embedded_max": _embedded("max"),
    "standard": lambda k, seed: DPPClassifierCV(
        ESTIMATORS["standard"](n_prototypes=k, random_state=seed), l2s=L2S, cv=3
    ),
    "pooling": lambda k, seed: ESTIMATORS["pooling"](random_state=seed),
    "bag_of_words": lambda k, seed: ESTIMATORS["bag_of_words"](n_prototypes=k, random_state=seed),
    "attention_mil": lambda k, seed: ESTIMATORS["attention_mil"](random_state=seed),
    "deep_sets": lambda k, seed: ESTIMATORS["deep_sets"](random_state=seed),
}
#: The baselines DPP is measured against (the issue's target: at least the best of them).
BASELINES = ("standard", "pooling", "bag_of_words", "attention_mil", "deep_sets")


def make_method(name: str, k: int, seed: int):
    """The unfitted estimator of ``name`` with ``K = k`` (where it has prototypes).

    Raises:
        ValueError: a name not in :data:`METHODS`.
    """
    if name not in METHODS:
        raise ValueError(f"unknown method {name!r}; choose from {list(METHODS)}")
    return METHODS[name](k, seed)


def _selection(estimator) -> dict:
    """Where each method's selection landed, and its final fit's status."""
    if isinstance(estimator, DPPClassifierCV):
        report = estimator.best_estimator_.fit_report_
        return {
            "l2": estimator.best_params_["l2"],
            "pooling": estimator.best_params_.get("pooling"),
            "rounds": estimator.best_rounds_,  # chosen by the inner CV (DPP), else None
            "position": estimator.best_position_,
            "beats_prior": estimator.beats_prior_,
            "status": report.status,
            "saturated_fraction": report.prototypes and report.prototypes.saturated_fraction,
        }
    report = estimator.fit_report_
    if report.selection is not None:  # the pooled logistic regressions
        return {"C": report.selection.C, "position": report.selection.position,
                "status": report.status}  # fmt: skip
    epochs = report.rounds if report.unit == "epoch" else None
    return {"epochs": epochs, "position": None, "status": report.status}


def run_task(
    name: str,
    folds: int = 5,
    seed: int = 0,
    methods=tuple(METHODS),
    log=print,
    on_record: Callable[[dict], None] | None = None,
    skip: frozenset = frozenset(),
) -> list[dict]:
    """Every method on task ``name``, one record per (fold, method).

    Args:
        name: a key of :data:`TASKS`.
        folds: outer folds (stratified, shuffled with ``seed``).
        seed: seed of the folds and of every estimator.
        methods: names from :data:`METHODS`.
        log: called with one line per fitted method.
        on_record: called with each record the moment its fit is scored (a run keeps it on
            disk then: :class:`dpp.experiment.reporting.Recorder`).
        skip: outer folds not to run (a resumed run's finished ones).

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
        if fold in skip:
            continue
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
            if on_record is not None:
                on_record(record)
            log(
                f"{name} fold {fold} {method:<12} accuracy {100 * metrics['accuracy']:.1f}%  "
                f"log-lik {metrics['test_log_likelihood']:.3f}  {seconds:.1f} s  "
                f"({selection_note(record)})"
            )
    return records


def selection_note(record: dict) -> str:
    """``status, l2 interior`` (or ``C ...``, ``N epochs``): what the fit chose, its status."""
    status = record.get("status")
    if record.get("position") is None:
        chosen = f"{record['epochs']} epochs" if record.get("epochs") is not None else ""
    else:
        chosen = f"{'l2' if 'l2' in record else 'C'} {record['position']}"
    if record.get("pooling"):
        chosen += f", {record['pooling']} pooling"
    return ", ".join(part for part in (status, chosen) if part)


def _cell(values: np.ndarray, factor: float, digits: int) -> str:
    """``mean ± 2 s.e.`` of fold values (± 0 for one fold)."""
    values = factor * np.asarray(values, float)
    se = values.std(ddof=1) / np.sqrt(len(values)) if len(values) > 1 else 0.0
    return f"{values.mean():.{digits}f} ± {2 * se:.{digits}f}"


def summary_table(records: list[dict]) -> str:
    """Markdown: one row per method, one column per task (mean ± 2 s.e. over the folds).

    Each cell is the accuracy (%), the test log-likelihood per set and the fit seconds of an
    outer fold (selection included). Then, per task, whether DPP with ``DPPClassifierCV``'s
    defaults is at least as accurate as the best baseline (:data:`BASELINES`), and where the
    selections landed.
    """
    frame = pd.DataFrame(records)
    tasks = list(dict.fromkeys(frame.task))
    methods = [m for m in METHODS if m in set(frame.method)]
    lines = [
        "| method | " + " | ".join(tasks) + " |",
        "|---|" + "---|" * len(tasks),
    ]
    means: dict[tuple[str, str], float] = {}
    for method in methods:
        cells = []
        for task in tasks:
            part = frame[(frame.task == task) & (frame.method == method)]
            if part.empty:
                cells.append("-")
                continue
            means[task, method] = 100 * part.accuracy.mean()
            cells.append(
                f"{_cell(part.accuracy, 100, 1)} / {_cell(part.test_log_likelihood, 1, 3)} / "
                f"{part.fit_seconds.mean():.1f} s"
            )
        lines.append(f"| {method} | " + " | ".join(cells) + " |")
    kinds = ", ".join(f"{t}: {TASKS[t][2]}" for t in tasks if t in TASKS)
    lines += [
        "",
        "Accuracy (%) / test log-likelihood per set / seconds a fold (selection and refit), mean "
        "± 2 standard errors over the outer folds. What the label depends on: " + kinds + ".",
        "",
        "Is DPP (`DPPClassifierCV()`'s defaults) at least as accurate as the best baseline?",
        "",
    ]
    for task in tasks:
        present = [b for b in BASELINES if (task, b) in means]
        if ("dpp" not in methods) or (task, "dpp") not in means or not present:
            continue
        best = max(present, key=lambda b: means[task, b])
        diff = means[task, "dpp"] - means[task, best]
        verdict = "yes" if diff >= 0 else "NO"
        lines.append(f"- {task}: DPP {means[task, 'dpp']:.1f} % against {best} "
                     f"{means[task, best]:.1f} % ({diff:+.1f} points): {verdict}")  # fmt: skip
    selected = frame[frame.position.notna()] if "position" in frame else frame.iloc[:0]
    positions = selected.groupby(["method", "position"]).size().to_dict()
    statuses = frame[frame.status.notna()].groupby(["method", "status"]).size().to_dict()
    lines += [
        "",
        "Where the selections landed (fits): "
        + ", ".join(f"{m} {p}: {n}" for (m, p), n in positions.items()),
        "",
        "Final fit statuses: " + ", ".join(f"{m} {s}: {n}" for (m, s), n in statuses.items()),
    ]
    if "pooling" in frame and frame[frame.method == "dpp"].pooling.notna().any():
        chosen = frame[frame.method == "dpp"].groupby(["task", "pooling"]).size().to_dict()
        lines += ["", "DPP's pooling chosen by the inner CV (folds): "
                  + ", ".join(f"{t} {p}: {n}" for (t, p), n in chosen.items())]  # fmt: skip
    if "rounds" in frame and frame.rounds.notna().any():
        rounds = frame[frame.method == "dpp"].rounds.dropna().astype(int).value_counts()
        lines += ["", "DPP rounds chosen by the inner CV (fits): "
                  + ", ".join(f"{r}: {n}" for r, n in sorted(rounds.items()))]  # fmt: skip
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
    methods=tuple(METHODS),
    resume: bool = False,
    log=print,
    on_accepted: Callable[[], None] | None = None,
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
    previous = _previous(path, header, resume)
    records = [] if previous is None else _kept_records(previous, header)
    done = {(r["task"], r["fold"]) for r in records}
    every = {(t, f) for t in header["tasks"] for f in range(int(folds))}
    if previous is not None and previous.get("status") == "complete" and done >= every:
        tasks_done = len({t for t, _ in done})
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
            finished = frozenset(f for t, f in done if t == task)
            if len(finished) == int(folds):
                log(f"{task}: kept from the earlier run")
                continue
            if finished:
                log(f"{task}: outer folds {sorted(finished)} kept from the earlier run")
            run_task(task, folds, seed, methods, log, recorder.keep, finished)
        recorder.records.sort(
            key=lambda r: (header["tasks"].index(r["task"]), r["fold"], methods.index(r["method"]))
        )
        return recorder.finish(then=lambda _: suite_figure(recorder.records, out / "suite.png"))


def _previous(path: Path, header: dict, resume: bool) -> dict | None:
    """The suite run recorded at ``path`` (``None`` without one), checked against ``header``.

    ``header["tasks"]`` then lists the earlier run's tasks first.

    Raises:
        ConfigError: a run there without ``resume``, an older format, or other ``folds``,
            ``seed`` or ``methods``.
    """
    if not path.is_file():
        return None
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
    return previous


def _kept_records(previous: dict, header: dict) -> list[dict]:
    """The earlier run's records of the outer folds every method finished (all its tasks)."""
    return finished_units(previous["records"], lambda r: (r["task"], r["fold"]), header["methods"])


def suite_figure(records: list[dict], path: Path) -> Path:
    """Accuracy per task and method, mean ± 2 standard errors over the outer folds (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from dpp.experiment.plots import save_figure

    frame = pd.DataFrame(records)
    tasks = list(dict.fromkeys(frame.task))
    methods = [m for m in METHODS if m in set(frame.method)]
    fig, ax = plt.subplots(figsize=(0.25 * len(methods) * len(tasks) + 2, 4.2))
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
    ax.legend(fontsize=7, ncols=min(len(methods), 4), loc="lower right")
    fig.tight_layout()
    return save_figure(fig, path)
