"""Run outputs: ``results.json`` (schema in README.md), ``results.csv`` and ``table.md``.

Writers here only read the per-trial records, so a table can always be rebuilt from
``results.json`` alone (:func:`load_results`).
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np

SCHEMA_VERSION = 1

#: Metrics summarised per method, in table order (those present in the records are used).
SUMMARY_METRICS = ("accuracy", "test_log_likelihood", "kl_bits", "fit_seconds")
_LABELS = {
    "accuracy": "accuracy (%)",
    "test_log_likelihood": "test log-lik. / set",
    "kl_bits": "KL (bits)",
    "fit_seconds": "fit (s)",
}
_PERCENT = {"accuracy"}


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
    digits = 2 if metric in _PERCENT or metric == "fit_seconds" else 4
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
    return "\n".join([head, rule, *rows]) + f"\n\n± is {meaning} across trials.\n"


def write_results(out_dir: Path, header: dict, records: list[dict], status: str, **extra) -> dict:
    """Writes ``results.json``, ``results.csv`` and ``table.md`` from the records so far.

    Called after every (trial, method), so a run that fails keeps what it finished.

    Args:
        out_dir: run directory.
        header: run-level fields (experiment, dataset, methods, ...).
        records: per-(trial, method) dicts.
        status: ``running``, ``complete`` or ``failed``.
        **extra: further top-level fields (``error``, ``wall_seconds``, ...).

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
    tmp.write_text(json.dumps(_jsonable(results), indent=2))
    tmp.replace(out_dir / "results.json")
    _write_csv(out_dir / "results.csv", records)
    title = f"# {header.get('experiment', 'dpp')}: {header.get('dataset', '')}\n\n"
    (out_dir / "table.md").write_text(title + markdown_table(summary) if records else title)
    return results


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


def _jsonable(value):
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return _jsonable(value.tolist())
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
