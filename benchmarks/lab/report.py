"""The suite's report: markdown tables and figures from its records."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from lab.methods import BASELINES
from lab.statistics import ALPHA, decide, paired_differences
from lab.tasks import TASKS, membership_rows, unit_of


def selection_note(record: dict) -> str:
    """``status, l2 interior`` (or ``C ...``, ``N epochs``): what the fit chose, its status."""
    status = record.get("status")
    if record.get("position") is None:
        chosen = f"{record['epochs']} epochs" if record.get("epochs") is not None else ""
    else:
        chosen = f"{'l2' if 'l2' in record else 'C'} {record['position']}"
    if record.get("pooling"):
        chosen += f", {record['pooling']} pooling"
    if record.get("members"):  # an ensemble: each member's status
        chosen = "members " + ", ".join(
            f"{name} {m.get('status')}" for name, m in record["members"].items()
        )
    return ", ".join(part for part in (status, chosen) if part)


def _cell(values: np.ndarray, factor: float, digits: int) -> str:
    """``mean ± 2 s.e.`` of fold values (± 0 for one fold)."""
    values = factor * np.asarray(values, float)
    se = values.std(ddof=1) / np.sqrt(len(values)) if len(values) > 1 else 0.0
    return f"{values.mean():.{digits}f} ± {2 * se:.{digits}f}"


#: The order methods are tabled in: every name the committed records hold, as the registry
#: listed them when they ran; a name it lacks (a new method) follows, in the records' order.
TABLE_ORDER = (
    "dpp", "dpp_best", "dpp_proba", "dpp_log_proba", "dpp_mean", "dpp_max", "dpp_max_ninit5",
    "dpp_ninit5", "dpp_max_k2", "dpp_max_kgrid", "dpp_step1", "dpp_gem", "dpp_1se",
    "dpp_repeated", "dpp_corrected", "dpp_selection", "dpp_selection_embedded",
    "dpp_selection_embedded_own", "dpp_selection_embedded_own_seeds",
    "dpp_selection_embedded_own_seeds_avg50", "dpp_selection_embedded_own_seeds_avg50_widened",
    "dpp_selection_embedded_own_seeds_together", "dpp_selection_embedded_own_cv5",
    "dpp_selection_embedded_own_seeds_cv5", "dpp_ensemble_embedded_own",
    "dpp_ensemble_embedded_own_seeds_avg50_widened",
    "dpp_ensemble_embedded_own_seeds_avg50_widened_kgrid", "dpp_ensemble", "dpp_seeds",
    "dpp_embedded_mean", "dpp_embedded_max", "dpp_embedded", "dpp_embedded_mean_dropout",
    "dpp_embedded_max_dropout", "dpp_embedded_gem_dropout",
    "dpp_embedded_max_dropout_normalized", "dpp_embedded_gem_dropout_normalized",
    "dpp_embedded_max_dropout_p40", "dpp_embedded_seeds", "dpp_embedded_avg50",
    "dpp_embedded_widened", "dpp_embedded_avg80", "dpp_embedded_k32", "dpp_embedded_k8",
    "dpp_embedded_wide", "dpp_embedded_narrow", "dpp_embedded_lr1e-3", "dpp_embedded_drop25",
    "dpp_embedded_seeds_avg50", "dpp_embedded_wd_5e-2", "dpp_embedded_wd_2e-1",
    "dpp_embedded_wd_choice", "dpp_plain", "dpp_plain_tol", "standard", "pooling",
    "bag_of_words", "attention_mil", "gated_mil", "attention_mil_widened",
    "attention_mil_seeds", "deep_sets", "attention_mil_cv", "gated_mil_cv", "deep_sets_cv",
)  # fmt: skip


def table_order(methods) -> list[str]:
    """The distinct ``methods`` in :data:`TABLE_ORDER`, any other after them as first seen."""
    present = list(dict.fromkeys(methods))
    known = [m for m in TABLE_ORDER if m in present]
    return known + [m for m in present if m not in TABLE_ORDER]


#: The suite's method for ``DPPClassifierCV()``'s defaults, the current first.
DEFAULT_METHODS = {
    "dpp_ensemble_embedded_own_seeds_avg50_widened": "`DPPClassifierCV()`'s defaults",
    "dpp_selection_embedded_own_seeds_avg50_widened": "`DPPClassifierCV()`'s defaults before "
    "every member was kept",
    "dpp_selection_embedded_own_seeds_avg50": "`DPPClassifierCV()`'s defaults before the "
    "widened hold-out",
    "dpp_selection_embedded_own_seeds": "`DPPClassifierCV()`'s defaults before the moving average",
    "dpp_selection_embedded_own": "`DPPClassifierCV()`'s defaults before its three seeds",
    "dpp": "the raw-vector ensemble, `DPPClassifierCV()`'s defaults before issue 52",
}


def summary_table(records: list[dict]) -> str:
    """Markdown: one row per method, one column per task (mean ± 2 s.e. over the folds).

    Each cell is the accuracy (%), the test log-likelihood per set and the fit seconds of an
    outer fold (selection included). Then, per task, whether DPP with ``DPPClassifierCV``'s
    defaults is at least as accurate as the best baseline (:data:`BASELINES`), and where the
    selections landed.
    """
    frame = pd.DataFrame(records)
    tasks = list(dict.fromkeys(frame.task))
    methods = table_order(frame.method)
    lines = [
        "| method | " + " | ".join(tasks) + " |",
        "|---|" + "---|" * len(tasks),
    ]
    for method in methods:
        cells = []
        for task in tasks:
            part = frame[(frame.task == task) & (frame.method == method)]
            if part.empty:
                cells.append("-")
                continue
            cells.append(
                f"{_cell(part.accuracy, 100, 1)} / {_cell(part.test_log_likelihood, 1, 3)} / "
                f"{part.fit_seconds.mean():.1f} s"
            )
        lines.append(f"| {method} | " + " | ".join(cells) + " |")
    kinds = ", ".join(f"{t}: {TASKS[t][2]}" for t in tasks if t in TASKS)
    lines += [
        "",
        "Accuracy (%) / test log-likelihood per set / seconds a fold (selection and refit), mean "
        "± 2 standard errors over the outer folds (of every draw). What the label depends on: "
        + kinds
        + ".",
        "",
    ]
    lines += _verdicts(frame, methods, tasks)
    lines += instance_table(frame, tasks, methods)
    lines += _paired_table(records, frame, methods, tasks)
    lines += _landings(frame)
    return "\n".join(lines) + "\n"


def _verdicts(frame, methods: list[str], tasks: list[str]) -> list[str]:
    """Per task: whether DPP (``DPPClassifierCV()``'s defaults) beats the best baseline.

    DPP is ``dpp_selection_embedded_own`` (the defaults since issue 52's decision) where the
    run has it, else ``dpp`` (the raw-vector ensemble, the defaults before). Each baseline is
    compared on the (draw, fold) units both finished, so a run in progress never sets a few
    units of one against all of the other's; the count is said where it is not all of DPP's.
    """
    dpp = next((m for m in DEFAULT_METHODS if m in methods), None)
    if dpp is None:
        return []
    lines = [
        f"Is DPP (`{dpp}`: {DEFAULT_METHODS[dpp]}) at least as accurate as the best baseline?",
        "",
    ]
    draw = frame["draw"] if "draw" in frame else pd.Series(0, index=frame.index)
    accuracy = {
        (task, method, d, f): a
        for task, method, d, f, a in zip(frame.task, frame.method, draw, frame.fold,
                                         frame.accuracy, strict=True)
    }  # fmt: skip
    for task in tasks:
        mine = {(d, f) for t, m, d, f in accuracy if t == task and m == dpp}
        pairs = {}  # baseline -> (DPP's mean, its mean, units) on the units both finished
        for b in BASELINES:
            units = sorted(mine & {(d, f) for t, m, d, f in accuracy if t == task and m == b})
            if units:
                means = [100 * np.mean([accuracy[task, m, *u] for u in units]) for m in (dpp, b)]
                pairs[b] = (*means, len(units))
        if not pairs:
            continue
        best = max(pairs, key=lambda b: pairs[b][1])
        own, theirs, count = pairs[best]
        diff = own - theirs
        verdict = "yes" if diff >= 0 else "NO"
        on = "" if count == len(mine) else f" on the {count} units both finished"
        lines.append(f"- {task}: DPP {own:.1f} % against {best} {theirs:.1f} %{on} "
                     f"({diff:+.1f} points): {verdict}")  # fmt: skip
    return lines if len(lines) > 2 else []  # no baseline ran: no question


def _paired_table(records: list[dict], frame, methods: list[str], tasks: list[str]) -> list[str]:
    """Every method's paired accuracy difference against the reference, per task family."""
    reference = next((m for m in ("dpp_mean", "dpp") if m in methods), None)
    others = [m for m in methods if m != reference]
    if reference is None or not others or len(frame[frame.method == reference]) <= 1:
        return []
    lines = [
        "",
        f"Paired differences against {reference}, accuracy (points): mean ± s.e. over the "
        "(task, draw, fold) units both finished (wins/ties/losses, Wilcoxon signed-rank p); "
        "`python benchmarks/suite.py --compare A B` gives any pair, per task family.",
        "",
    ]
    families = list(dict.fromkeys(TASKS[t][2] for t in tasks if t in TASKS))
    lines += ["| method | all | " + " | ".join(families) + " |",
              "|---|---|" + "---|" * len(families)]  # fmt: skip
    for method in others:
        d = paired_differences(records, method, reference)
        cells = [_difference_cell(d, 100.0)] + [
            _difference_cell(d["families"][f], 100.0) if f in d["families"] else "-"
            for f in families
        ]
        lines.append(f"| {method} | " + " | ".join(cells) + " |")
    return lines


def _landings(frame: pd.DataFrame) -> list[str]:
    """Where the selections landed, the final statuses, and DPP's chosen poolings and rounds."""
    lines: list[str] = []
    selected = frame[frame.position.notna()] if "position" in frame else frame.iloc[:0]
    positions = selected.groupby(["method", "position"]).size().to_dict()
    statuses = frame[frame.status.notna()].groupby(["method", "status"]).size().to_dict()
    if positions:  # a run without selections has nothing to say here
        landed = ", ".join(f"{m} {p}: {n}" for (m, p), n in positions.items())
        lines += ["", f"Where the selections landed (fits): {landed}"]
    lines += [
        "",
        "Final fit statuses: " + ", ".join(f"{m} {s}: {n}" for (m, s), n in statuses.items()),
    ]
    if "pooling" in frame and frame[frame.method == "dpp"].pooling.notna().any():
        chosen = frame[frame.method == "dpp"].groupby(["task", "pooling"]).size().to_dict()
        lines += ["", "DPP's pooling chosen by the inner CV (folds): "
                  + ", ".join(f"{t} {p}: {n}" for (t, p), n in chosen.items())]  # fmt: skip
    if "rounds" in frame and frame[frame.method == "dpp"].rounds.notna().any():
        rounds = frame[frame.method == "dpp"].rounds.dropna().astype(int).value_counts()
        lines += ["", "DPP rounds chosen by the inner CV (fits): "
                  + ", ".join(f"{r}: {n}" for r, n in sorted(rounds.items()))]  # fmt: skip
    return lines


def instance_table(frame: pd.DataFrame, tasks: list, methods: list) -> list[str]:
    """Markdown lines: instance AUC and top-witness share per method on the witness tasks."""
    if "instance_auc" not in frame or frame.instance_auc.isna().all():
        return []
    tasks = [t for t in tasks if frame[frame.task == t].instance_auc.notna().any()]
    lines = [
        "",
        "Which vectors decided: instance AUC of each vector's evidence (its contribution to the "
        "positive class's log-odds, `instance_scores`) against the witness labels of the "
        "held-out vectors / share of positive sets whose top vector is a witness, mean ± 2 s.e. "
        "over the outer folds; attention MIL's attention weights, and each vector's positive "
        "probability as a set of its own (`instance_proba`), on their own rows.",
        "",
        "| method | " + " | ".join(tasks) + " |",
        "|---|" + "---|" * len(tasks),
    ]
    readings = [(m, "") for m in methods]
    for prefix in ("attention_", "proba_"):
        if f"{prefix}instance_auc" in frame:
            read = set(frame[frame[f"{prefix}instance_auc"].notna()].method)
            readings += [(m, prefix) for m in methods if m in read]
    for method, prefix in readings:
        cells = []
        for task in tasks:
            part = frame[(frame.task == task) & (frame.method == method)]
            auc, top = part[f"{prefix}instance_auc"].dropna(), part[f"{prefix}top_witness"].dropna()
            cells.append(f"{_cell(auc, 1, 3)} / {_cell(top, 1, 2)}" if len(auc) else "-")
        if any(c != "-" for c in cells):
            label = {"": "", "attention_": " (attention weights)", "proba_": " (instance_proba)"}
            name = f"{method}{label[prefix]}"
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines


def _difference_cell(d: dict, scale: float, digits: int = 2) -> str:
    if not d["units"]:
        return "-"
    se = f" ± {scale * d['se']:.{digits}f}" if d["se"] is not None else ""
    p = f", p = {d['p']:.2g}" if d["p"] is not None else ""
    return f"{scale * d['mean']:+.{digits}f}{se} ({d['wins']}/{d['ties']}/{d['losses']}{p})"


def compare_table(records: list[dict], a: str, b: str, metric: str = "accuracy") -> str:
    """Markdown: ``a - b`` over the paired units and per family (:func:`paired_differences`)."""
    d = paired_differences(records, a, b, metric)
    scale, unit, digits = (100.0, "points", 2) if metric == "accuracy" else (1.0, "raw units", 3)
    if metric == "test_log_likelihood":
        unit = "nats per set"
    lines = [
        f"{a} - {b}, {metric} ({unit}): mean difference ± s.e. over the paired (task, draw, fold) "
        "units (wins/ties/losses of the first, Wilcoxon signed-rank p)",
        "",
        "| units | difference |",
        "|---|---|",
        f"| all ({d['units']}) | {_difference_cell(d, scale, digits)} |",
    ]
    for family, part in d["families"].items():
        lines.append(f"| {family} ({part['units']}) | {_difference_cell(part, scale, digits)} |")
    return "\n".join(lines) + "\n"


def decision_table(records: list[dict], candidates, reference: str = "dpp_mean") -> str:
    """Markdown of :func:`decide`: each candidate against ``reference``, per family, chosen."""
    result = decide(records, candidates, reference)
    families = list(dict.fromkeys(f for row in result["rows"].values() for f in row["families"]))
    lines = [
        f"Accuracy difference against {reference} (points): mean ± s.e. over the paired units "
        "(wins/ties/losses, Wilcoxon p); eligible: significantly worse (p < "
        f"{ALPHA}) on no family; chosen: the eligible one with the largest gain, where that "
        f"gain is significant over all units (p < {ALPHA})",
        "",
        "| rule | all | " + " | ".join(families) + " | eligible |",
        "|---|---|" + "---|" * len(families) + "---|",
    ]
    for name, row in result["rows"].items():
        cells = [f"{_difference_cell(row, 100.0)} [{row['units']}]"] + [
            _difference_cell(row["families"][f], 100.0) if f in row["families"] else "-"
            for f in families
        ]
        verdict = "yes" if row["eligible"] else "no: worse on " + ", ".join(row["worse_on"])
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {verdict} |")
    ahead = [n for n, r in result["rows"].items() if r["eligible"] and r["mean"] > 0]
    noise = (
        f": {', '.join(ahead)} ahead within noise (p >= {ALPHA})" if ahead else ""
    )  # fmt: skip
    chosen = result["chosen"] or (
        f"none ({reference} stays: no candidate is eligible and significantly ahead of it{noise})"
    )
    lines += ["", f"Chosen: {chosen}"]
    return "\n".join(lines) + "\n"


def peer_table(records: list[dict], method: str, peers) -> str:
    """Markdown: per task, ``method`` against the best of ``peers`` on the units all ran.

    A unit (task, draw, fold) counts for a task when ``method`` and every peer with records on
    that task finished it, in any of the runs (task means, not paired differences: the same
    data and folds in every run; a method's first record of a unit is kept). The last line
    counts the tasks where ``method``'s mean accuracy is at least the best peer's.
    """
    frame = pd.DataFrame(records)
    if "draw" not in frame:
        frame["draw"] = 0
    keys = ["task", "draw", "fold"]
    frame = frame.drop_duplicates([*keys, "method"])
    lines = [
        f"| task | units | {method} | best of {', '.join(peers)} | difference |",
        "|---|---|---|---|---|",
    ]
    met = total = 0
    for task, part in frame.groupby("task", sort=False):
        present = [m for m in peers if (part.method == m).any()]
        if not present or not (part.method == method).any():
            continue
        units = None
        for m in [method, *present]:
            done = set(map(tuple, part[part.method == m][keys].to_numpy()))
            units = done if units is None else units & done
        if not units:
            continue
        rows = part[[tuple(r) in units for r in part[keys].to_numpy()]]
        means = 100 * rows.groupby("method").accuracy.mean()
        best = max(present, key=lambda m: means[m])
        diff = means[method] - means[best]
        met += bool(diff >= 0)
        total += 1
        lines.append(f"| {task} | {len(units)} | {means[method]:.1f} | {best} {means[best]:.1f} | "
                     f"{diff:+.1f} |")  # fmt: skip
    lines += ["", f"{method} at least as accurate as the best peer on {met} of {total} tasks."]
    return "\n".join(lines) + "\n"


def members_table(records: list[dict], method: str, member: str, other: str) -> str:
    """Markdown: per task, how often an ensemble selection kept ``member``, and what it cost.

    For each task where ``method``'s records say which members were kept (``members``): the
    units where ``member`` was kept and where it was dropped, ``method``'s mean accuracy on
    each, and ``other``'s on the same units (e.g. ``member`` alone, or every member kept), so
    a reader sees whether the selection dropped it where it would have helped. Task means
    over the units where both ran; a method's first record of a unit is kept.
    """
    frame = pd.DataFrame(records)
    if "draw" not in frame:
        frame["draw"] = 0
    keys = ["task", "draw", "fold"]
    frame = frame.drop_duplicates([*keys, "method"])
    if "members" not in frame:  # no ensemble selection in these records
        frame["members"] = None
    mine = frame[frame.method == method].set_index(keys)
    theirs = frame[frame.method == other].set_index(keys).accuracy
    lines = [
        f"| task | {member} kept: units / {method} / {other} | "
        f"dropped: units / {method} / {other} |",
        "|---|---|---|",
    ]
    for task in dict.fromkeys(frame.task):
        rows = mine[mine.index.get_level_values("task") == task]
        rows = rows[rows.index.isin(theirs.index)]
        if rows.empty or not all(isinstance(m, dict) and member in m for m in rows.members):
            continue
        kept = np.array([bool(m[member]["kept"]) for m in rows.members])
        cells = []
        for part in (rows[kept], rows[~kept]):
            if part.empty:
                cells.append("0")
                continue
            own, alt = 100 * part.accuracy.mean(), 100 * theirs.loc[part.index].mean()
            cells.append(f"{len(part)} / {own:.1f} / {alt:.1f}")
        lines.append(f"| {task} | {cells[0]} | {cells[1]} |")
    return "\n".join(lines) + "\n"


def rounds_table(records: list[dict], method: str) -> str:
    """Markdown: per task, how many of ``method``'s raw-vector members chose round 0.

    Round 0 is the k-means start with its first Theta-step: no prototype and no ``beta``
    learned (issue 80). Counted over the members whose records give ``rounds`` (the
    embedded members, fitted by epochs, give none), one row per task, then every task; a
    method of one member (one pooling, no ensemble) is counted by its record's ``rounds``.
    """
    frame = pd.DataFrame(records)
    if "draw" not in frame:
        frame["draw"] = 0
    frame = frame.drop_duplicates(["task", "draw", "fold", "method"])
    mine = frame[frame.method == method]
    if mine.empty or ("members" not in mine and "rounds" not in mine):
        return ""
    rows, at_zero, fits = [], 0, 0
    for task in dict.fromkeys(mine.task):
        counts: dict[str, list[int]] = {}
        for record in mine[mine.task == task].to_dict("records"):
            members = record.get("members")
            if not isinstance(members, dict):  # one member: the record's own rounds
                rounds = record.get("rounds")
                members = {} if rounds is None or pd.isna(rounds) else {method: {"rounds": rounds}}
            for name, m in members.items():
                if m.get("rounds") is not None:
                    zero_and_all = counts.setdefault(name, [0, 0])
                    zero_and_all[0] += m["rounds"] == 0
                    zero_and_all[1] += 1
        if not counts:
            continue
        zero, every = (sum(c[i] for c in counts.values()) for i in (0, 1))
        at_zero, fits = at_zero + zero, fits + every
        each = ", ".join(f"{name} {z}/{n}" for name, (z, n) in counts.items())
        rows.append(f"| {task} | {zero}/{every} | {each} |")
    if not rows:
        return ""
    return (
        "\n".join(
            [
                f"| task | {method}'s raw members at round 0 | by member |",
                "|---|---|---|",
                *rows,
                f"| every task | {at_zero}/{fits} | |",
            ]
        )
        + "\n"
    )


def suite_figure(records: list[dict], path: Path) -> Path:
    """Accuracy per task and method, mean ± 2 standard errors over the outer folds (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from dpp.experiment.plots import save_figure

    frame = pd.DataFrame(records)
    tasks = list(dict.fromkeys(frame.task))
    methods = table_order(frame.method)
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


#: Images of a bag drawn by :func:`evidence_figure` at most.
MAX_DRAWN = 16


def evidence_figure(records: list[dict], path: Path) -> Path | None:
    """A positive digit bag of each digit-bag task, every image framed by its evidence (PNG).

    One row per method with per-vector evidence (``instance_scores``, the positive class's
    log-odds contribution; red for, blue against, scaled per row) and one for attention MIL's
    attention weights (darker: more weight); the target digit's images are marked. A bag of
    more than :data:`MAX_DRAWN` images shows its witnesses, then its first other images.
    ``None`` when no record holds an example.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib import colormaps

    from dpp.experiment.plots import save_figure

    rows = []  # (task, label, values)
    bags = {}  # task -> (images [m, 8, 8], witness [m], drawn [m'] positions in the bag)
    for record in records:
        if record.get("example_evidence") is None or unit_of(record)[1:] != (0, 0):
            continue
        task, method = record["task"], record["method"]
        if task not in bags:
            data = TASKS[task][0](0)  # draw 0, fold 0 (outer_folds)
            index = np.array([record["example_set"]])
            member = membership_rows(np.arange(data.sets.num_memberships), data.sets, index)
            witness = data.instance_labels[member] == 1
            drawn = np.sort(np.argsort(~witness, kind="stable")[:MAX_DRAWN])
            images = np.asarray(data.sets.vectors)[member].reshape(-1, 8, 8)
            bags[task] = (images, witness, drawn)
        rows.append((task, f"{method}: evidence", record["example_evidence"]))
        if record.get("example_attention") is not None:
            rows.append((task, f"{method}: attention", record["example_attention"]))
    if not rows:
        return None
    width = max(drawn.size for _, _, drawn in bags.values())
    fig, axes = plt.subplots(
        len(rows), width, figsize=(0.7 * width + 1.5, 0.85 * len(rows) + 0.6), squeeze=False
    )
    for axis_row, (task, label, values) in zip(axes, rows, strict=True):
        images, witness, drawn = bags[task]
        values = np.asarray(values, float)
        attention = label.endswith("attention")
        scale = float(np.max(np.abs(values))) or 1.0
        for j, ax in enumerate(axis_row):
            ax.set_xticks([]), ax.set_yticks([])
            if j >= drawn.size:
                ax.axis("off")
                continue
            i = drawn[j]
            if attention:
                colour = colormaps["Greens"](0.25 + 0.75 * values[i] / scale)
            else:
                colour = colormaps["RdBu_r"](0.5 + 0.5 * values[i] / scale)
            ax.imshow(images[i], cmap="gray_r")
            for spine in ax.spines.values():
                spine.set_edgecolor(colour), spine.set_linewidth(4)
            ax.set_title(f"{values[i]:.2f}" if attention else f"{values[i]:+.2f}", fontsize=6)
            if witness[i]:
                ax.set_xlabel("target", fontsize=6, color="black")
        axis_row[0].set_ylabel(f"{task}\n{label}", fontsize=6, rotation=0, ha="right", va="center")
    fig.suptitle(
        "Which images decided: a positive test bag (frame: red for, blue against)", fontsize=8
    )
    fig.tight_layout()
    return save_figure(fig, path)
