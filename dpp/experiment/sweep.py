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

from dpp.experiment.plots import COLOURS, save_figure  # noqa: E402
from dpp.experiment.reporting import load_results, run_state, summarize  # noqa: E402

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
    value), ``status`` (``complete``, ``failed``, ``killed``, ... as
    :func:`dpp.experiment.reporting.run_state`
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


#: Objectives a sweep can return (``validation.metric``), all maximised.
OBJECTIVES = ("validation_log_likelihood", "validation_accuracy", "cv_score")
#: Keys that are scales (drawn on a log axis whenever their values are positive).
SCALE_KEYS = ("l2", "beta_scale", "tol", "learning_rate", "beta_prior_scale", "gamma_scale")


def sweep_metric(frame: pd.DataFrame) -> str | None:
    """The sweep's objective: the validation metric its jobs returned, or ``None``.

    Without one nothing chose a best job: the test metrics are reported, never used to choose.
    """
    for name in OBJECTIVES:
        if name in frame and frame[name].notna().any():
            return name
    return None


def best_jobs(frame: pd.DataFrame, objective: str | None) -> list:
    """Index labels of the jobs with the highest objective (several on a tie; none without)."""
    if objective is None or objective not in frame or frame[objective].isna().all():
        return []
    top = frame[objective].max()
    return list(frame.index[frame[objective] == top])


def _markdown(frame: pd.DataFrame, columns: list[str]) -> str:
    """The table of ``sweep.md``, accuracies in percent.

    As ``table.md`` gives them, the header saying so; ``sweep.csv`` keeps the fractions the
    records hold.
    """
    percent = [c.endswith("accuracy") for c in columns]

    def cell(v, as_percent: bool):
        if isinstance(v, float):
            return "" if math.isnan(v) else (f"{100 * v:.2f}" if as_percent else f"{v:.4g}")
        return str(v).replace("|", "\\|")

    header = [f"{c} (%)" if p else c for c, p in zip(columns, percent, strict=True)]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(columns)]
    lines += [
        "| " + " | ".join(cell(v, p) for v, p in zip(row, percent, strict=True)) + " |"
        for row in frame[columns].values
    ]
    return "\n".join(lines) + "\n"


def _x_axis(ax, key: str, values: pd.Series) -> pd.Series:
    """Positions of ``values`` on ``ax``: log for scales, integers for counts, else categories."""
    x = pd.to_numeric(values, errors="coerce")
    if len(values) and x.notna().all():
        scale = key.split(".")[-1] in SCALE_KEYS
        if (x > 0).all() and (scale or x.max() / x.min() >= 10):
            ax.set_xscale("log")
        elif (x == x.round()).all():  # K and other counts: integer ticks
            ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
        return x
    labels = list(dict.fromkeys(values.map(str)))
    ax.set_xticks(range(len(labels)), labels, rotation=30, ha="right")
    return values.map(str).map(labels.index)


def plot_sweep(frame: pd.DataFrame, objective: str | None, path: Path) -> Path:
    """The sweep's objective and every method's test log-likelihood against each swept value.

    One column per swept key; rows: the objective (when the jobs returned one), then the mean
    test log-likelihood per set of each method (one colour each). Scale keys (``l2``, ...) and
    values spanning 10x get a log axis, counts integer ticks. The best job *by the objective*
    is circled on every panel (every tied job on a tie); without an objective none is, since
    test metrics must not choose. Jobs that did not complete are left out (the title counts
    them).
    """
    keys = swept_keys(frame) or ["job"]
    done = frame[frame["status"] == "complete"]
    loglik = [c for c in frame.columns if c.endswith(" test_log_likelihood")]
    rows = ([objective] if objective else []) + (["test_log_likelihood"] if loglik else [])
    if not rows:
        raise ValueError("no job of the sweep has results to plot")
    best = [b for b in best_jobs(done, objective) if b in done.index]
    fig, axes = plt.subplots(
        len(rows), len(keys), figsize=(4.4 * len(keys), 3.4 * len(rows)), squeeze=False
    )
    for col, key in enumerate(keys):
        for row, quantity in enumerate(rows):
            ax = axes[row, col]
            x = _x_axis(ax, key, done[key])
            columns = [objective] if quantity == objective else loglik
            for i, column in enumerate(columns):
                label = column.removesuffix(" test_log_likelihood")
                colour = "black" if quantity == objective else COLOURS[i % len(COLOURS)]
                ax.plot(x.sort_values(), done[column][x.sort_values().index], marker="o",
                        color=colour, label=label, alpha=0.8)  # fmt: skip
                if best:
                    ax.scatter(x[best], done[column][best], s=160, facecolors="none",
                               edgecolors="tab:red", linewidths=1.5, zorder=3)  # fmt: skip
            ax.set_xlabel(key)
            ax.set_ylabel(objective if quantity == objective else "test log-lik. / set (nats)")
            ax.grid(alpha=0.3)
            if quantity != objective:
                ax.legend(fontsize=8)
    not_done = len(frame) - len(done)
    swept = ", ".join(f"{k} ({frame[k].map(str).nunique()} values)" for k in keys if k in frame)
    title = f"sweep over {swept}: {len(done)} jobs"
    title += f" ({not_done} not complete, not shown)" if not_done else ""
    if best:
        chosen = "; ".join(str(done.loc[b, "overrides"]) for b in best)
        tie = f"{len(best)} tied: " if len(best) > 1 else ""
        title += f"\nbest by {objective} (circled): {tie}{chosen}"
    else:
        title += "\nno objective (validation.metric is null): no job chosen"
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
    complete = (frame["status"] == "complete").any()
    metric = sweep_metric(frame) if complete else None
    keys = swept_keys(frame)
    lead = ["job", *keys] if keys else ["job", "overrides"]
    per_method = [c for c in frame.columns if " " in c]  # "<method> <metric>"
    columns = [*lead, "status", "trials", *([metric] if metric else []), *per_method, "error"]
    columns = [c for c in dict.fromkeys(columns) if c in frame]
    header = f"# Sweep {Path(multirun_dir)}\n\n{len(frame)} jobs"
    best = best_jobs(frame, metric)
    if best:
        value = frame.loc[best[0], metric]
        jobs = "; ".join(f"job {frame.loc[b, 'job']}: {frame.loc[b, 'overrides']}" for b in best)
        header += f"; best {metric} = {value:.4g} ({jobs})"
    elif complete:
        header += "; no objective (validation.metric is null), so no job is chosen"
    paths["md"].write_text(header + "\n\n" + _markdown(frame, columns))
    if complete:
        plot_sweep(frame, metric, paths["png"])
    else:
        paths.pop("png")
    return paths
