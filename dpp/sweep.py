"""Tables and a figure of a Hydra multirun: one row per job (``scripts/collect.py``).

A sweep (``python experiments/run.py -m ...``, any sweeper or launcher) leaves one folder per job
in its multirun directory, named ``<num>_<overrides>`` (``hydra.sweep.subdir``), each holding
Hydra's ``.hydra/overrides.yaml`` and, once the run has started, ``results.json``.
:func:`collect` reads them all, :func:`write_sweep` writes ``sweep.csv``, ``sweep.md`` and
``sweep.png`` (the sweep's metric against each swept value).
"""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402
import pandas as pd  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402

from dpp.plots import save_figure  # noqa: E402
from dpp.reporting import load_results, run_state, summarize  # noqa: E402

#: Per-method metrics of a job's row (means over its trials), where the records have them.
ROW_METRICS = ("accuracy", "test_log_likelihood", "kl_bits")


def _value(text: str):
    """An override's value as a number where it is one (for the plot's axis), else the text."""
    try:
        number = float(text)
    except ValueError:
        return text
    return int(number) if number.is_integer() and "." not in text and "e" not in text else number


def _job(job_dir: Path, root: Path) -> dict:
    overrides = OmegaConf.to_container(OmegaConf.load(job_dir / ".hydra" / "overrides.yaml"))
    prefix = job_dir.name.split("_", 1)[0]
    row: dict = {
        "job": int(prefix) if prefix.isdigit() else str(job_dir.relative_to(root)),
        "overrides": " ".join(overrides),
    }
    for item in overrides:
        key, _, value = item.partition("=")
        row[key.lstrip("+~")] = _value(value)
    if not (job_dir / "results.json").is_file():
        row["status"] = "no results"
        return row
    row["status"], _ = run_state(job_dir)
    results = load_results(job_dir)
    validation = results.get("validation")
    if validation:
        row[validation["metric"]] = validation["value"]
    records = results.get("trials", [])
    row["trials"] = len({r["trial"] for r in records})
    for method, metrics in summarize(records).items():
        for name in ROW_METRICS:
            if name in metrics:
                row[f"{method} {name}"] = metrics[name]["mean"]
    if results.get("error"):
        row["error"] = results["error"]
    return row


def collect(multirun_dir: str | Path) -> pd.DataFrame:
    """One row per job of a multirun directory, in job order.

    Columns: ``job`` (Hydra's job number), ``overrides``, one column per overridden key (its
    value), ``status`` (``complete``, ``failed``, ``killed``, ... as :func:`dpp.reporting.run_state`
    tells it; ``no results`` for a job that never wrote ``results.json``), ``trials``, the
    validation metric returned to the sweeper (where the run had one), and
    ``<method> <metric>`` means over trials of :data:`ROW_METRICS`.

    Raises:
        FileNotFoundError: if ``multirun_dir`` holds no job (no ``.hydra/overrides.yaml``).
    """
    root = Path(multirun_dir)
    jobs = sorted(p.parent.parent for p in root.rglob(".hydra/overrides.yaml"))
    if not jobs:
        raise FileNotFoundError(f"no Hydra jobs (*/.hydra/overrides.yaml) under {root}")
    rows = [_job(job, root) for job in jobs]
    frame = pd.DataFrame(rows)
    return frame.sort_values("job", key=lambda c: c.map(str).str.zfill(8)).reset_index(drop=True)


def swept_keys(frame: pd.DataFrame) -> list[str]:
    """The overridden keys whose value differs between jobs (the sweep's axes)."""
    keys = []
    for row in frame["overrides"]:
        keys += [item.partition("=")[0].lstrip("+~") for item in row.split()]
    keys = list(dict.fromkeys(keys))
    return [k for k in keys if k in frame and frame[k].map(str).nunique() > 1]


def sweep_metric(frame: pd.DataFrame) -> str:
    """The column plotted.

    The validation metric if the jobs returned one, else the first method's accuracy.
    """
    for name in ("validation_log_likelihood", "validation_accuracy", "cv_score"):
        if name in frame and frame[name].notna().any():
            return name
    accuracy = [c for c in frame.columns if c.endswith(" accuracy")]
    if not accuracy:
        raise ValueError("no job of the sweep has results to plot")
    return accuracy[0]


def _markdown(frame: pd.DataFrame, columns: list[str]) -> str:
    def cell(v):
        if isinstance(v, float):
            return "" if math.isnan(v) else f"{v:.4g}"
        return str(v).replace("|", "\\|")

    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in frame[columns].values]
    return "\n".join(lines) + "\n"


def plot_sweep(frame: pd.DataFrame, metric: str, path: Path) -> Path:
    """The metric of every job that has it against each swept value, one panel per key.

    Numeric values spanning a factor of 20 or more get a log axis; failed jobs are left out.
    """
    keys = swept_keys(frame) or ["job"]
    done = frame[frame[metric].notna()] if metric in frame else frame.iloc[:0]
    fig, axes = plt.subplots(1, len(keys), figsize=(4.2 * len(keys), 3.6), squeeze=False)
    for ax, key in zip(axes[0], keys, strict=True):
        values = done[key]
        x = pd.to_numeric(values, errors="coerce")
        if len(values) and x.notna().all():
            if (x > 0).all() and x.max() / x.min() >= 20:
                ax.set_xscale("log")
            elif (x == x.round()).all():  # K and other counts: integer ticks
                ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
        else:  # categorical values at positions 0, 1, ...
            labels = list(dict.fromkeys(values.map(str)))
            x = values.map(str).map(labels.index)
            ax.set_xticks(range(len(labels)), labels, rotation=30, ha="right")
        ax.scatter(x, done[metric], color="tab:blue")
        if len(done):
            best = done[metric].idxmax()
            ax.scatter([x[best]], [done[metric][best]], s=140, facecolors="none",
                       edgecolors="tab:red", label="best")  # fmt: skip
            ax.legend(fontsize=8)
        ax.set_xlabel(key)
        ax.set_ylabel(metric)
    failed = int((frame["status"] != "complete").sum())
    title = f"{len(done)} jobs" + (f" ({failed} not complete, not shown)" if failed else "")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return save_figure(fig, path)


def write_sweep(multirun_dir: str | Path, out_dir: str | Path | None = None) -> dict[str, Path]:
    """Writes ``sweep.csv``, ``sweep.md`` and ``sweep.png`` for a multirun directory.

    Args:
        multirun_dir: the sweep's directory (``hydra.sweep.dir``).
        out_dir: where to write them (default ``multirun_dir``).

    Returns:
        ``{"csv", "md", "png"}`` paths.

    Raises:
        FileNotFoundError: if the directory holds no job.
    """
    frame = collect(multirun_dir)
    out = Path(out_dir or multirun_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"csv": out / "sweep.csv", "md": out / "sweep.md", "png": out / "sweep.png"}
    frame.to_csv(paths["csv"], index=False)
    metric = sweep_metric(frame) if (frame["status"] == "complete").any() else None
    keys = swept_keys(frame)
    lead = ["job", *keys] if keys else ["job", "overrides"]
    per_method = [c for c in frame.columns if " " in c]  # "<method> <metric>"
    columns = [*lead, "status", "trials", *([metric] if metric else []), *per_method, "error"]
    columns = [c for c in dict.fromkeys(columns) if c in frame]
    header = f"# Sweep {Path(multirun_dir)}\n\n{len(frame)} jobs"
    if metric is not None:
        best = frame.loc[frame[metric].idxmax()]
        header += f"; best {metric} = {best[metric]:.4g} (job {best['job']}: {best['overrides']})"
    paths["md"].write_text(header + "\n\n" + _markdown(frame, columns))
    if metric is not None:
        plot_sweep(frame, metric, paths["png"])
    else:
        paths.pop("png")
    return paths
