"""A suite of set tasks nobody here tuned for, every method on each, one table.

Each task (:data:`TASKS`, :mod:`dpp.datasets.suite`) is cut into stratified outer folds; in
every fold each method is fitted on the other folds with its default selection and scored on
the held-out one:

* ``dpp``: :class:`~dpp.DPPClassifierCV` over ``DPPClassifier`` (``l2`` and the number of
  coordinate-ascent rounds by inner CV, the grid extended past an edge);
* ``standard``: the same selection over the standard prototype;
* ``pooling`` and ``bag_of_words``: :mod:`dpp.baselines.pooling` (their own ``C`` by CV).

InfoLoss is left out (its fits cost 10-100x a standard prototype's and it needs a beta scale
tuned per task). ``scripts/suite.py`` runs it and writes ``suite.json``, ``suite.csv`` and
``suite.md``.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable

import numpy as np
import pandas as pd
from sklearn.model_selection import StratifiedKFold

from dpp.baselines.pooling import BagOfWordsClassifier, PoolingClassifier
from dpp.datasets.base import Dataset
from dpp.datasets.suite import make_digit_patches, make_proportion, make_witness
from dpp.errors import FitWarning
from dpp.estimators import DPPClassifier, DPPClassifierCV, StandardPrototypeClassifier
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
                f"({record['status']}, {record['position']})"
            )
    return records


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
