"""Figures written into run directories (matplotlib, Agg backend)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.patches  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402
import numpy as np  # noqa: E402

from dpp.experiment.reporting import summarize  # noqa: E402
from dpp.model import FittedModel  # noqa: E402
from dpp.sets import RaggedSets  # noqa: E402


def save_figure(fig, path: Path, dpi: int = 120) -> Path:
    """Writes ``fig`` to ``path`` atomically (a temporary file renamed over it), then closes it.

    A run killed while drawing never leaves a half-written PNG that looks finished.
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    fig.savefig(tmp, dpi=dpi, format=path.suffix.lstrip(".") or "png")
    tmp.replace(path)
    plt.close(fig)
    return path


COLOURS = ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown")


def figure1(
    train: RaggedSets,
    standard: FittedModel,
    dpp: FittedModel,
    path: Path,
    class_names: Sequence[str] = (),
) -> Path:
    """Figure 1 of the paper, four panels.

    (a) data and k-means centres, (b) data and DPP centres, (c) standard representation ``z``,
    (d) DPP representation ``z``, all of the training sets (the title says so).

    For ``K = 2`` panels (c) and (d) plot ``z_1`` of every set (``z_2 = 1 - z_1``); for larger
    ``K`` they show ``z`` as an image, sets sorted by class.

    Args:
        train: training sets with 2-D vectors.
        standard: the standard prototype model (k-means centres, hard codes).
        dpp: the DPP model.
        path: output PNG path.
        class_names: legend names of the classes.

    Returns:
        ``path``.

    Raises:
        ValueError: if the vectors are not 2-D.
    """
    if train.dim != 2:
        raise ValueError(f"figure1 needs 2-D vectors, got D = {train.dim}")
    vectors = train.member_vectors()
    set_class = np.argmax(np.asarray(train.labels), axis=1)
    point_class = set_class[np.asarray(train.set_ids)]
    names = list(class_names) or [f"class {c}" for c in range(train.num_classes)]
    fig, axes = plt.subplots(2, 2, figsize=(10, 9.5))
    out_of_view = []
    for ax, model, title in (
        (axes[0, 0], standard, "(a) data and k-means centres"),
        (axes[0, 1], dpp, "(b) data and DPP centres"),
    ):
        for c in range(train.num_classes):
            sel = point_class == c
            ax.scatter(*vectors[sel].T, s=6, alpha=0.5, color=COLOURS[c % 6], label=names[c])
        out_of_view += _centres_in_view(ax, np.asarray(model.prototypes, np.float64), vectors)
        ax.set_title(title)
        ax.set_xlabel("$x_1$")
        ax.set_ylabel("$x_2$")
        # below the panel: a legend never covers the data or an arrow
        ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2,
                  frameon=False)  # fmt: skip
    order = np.argsort(set_class, kind="stable")
    for ax, model, title in (
        (axes[1, 0], standard, "(c) standard prototype representation z"),
        (axes[1, 1], dpp, "(d) DPP representation z"),
    ):
        z = np.asarray(model.encode(train))
        if z.shape[1] == 2:
            for c in range(train.num_classes):
                sel = np.flatnonzero(set_class == c)
                ax.scatter(sel, z[sel, 0], s=25, color=COLOURS[c % 6], label=names[c])
            ax.set_ylim(-0.05, 1.05)
            ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
            ax.set_xlabel("set")
            ax.set_ylabel("$z_1$ (= 1 - $z_2$)")
            ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2,
                      frameon=False)  # fmt: skip
        else:
            im = ax.imshow(z[order], aspect="auto", interpolation="nearest", cmap="viridis",
                           vmin=0.0, vmax=1.0)  # fmt: skip
            ax.set_xticks(range(z.shape[1]))
            ax.yaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
            ax.set_xlabel("prototype k")
            ax.set_ylabel("set (sorted by class)")
            fig.colorbar(im, ax=ax, label="$z_k$: share of the set's vectors at prototype k")
        ax.set_title(title)
    fig.suptitle(
        f"training sets ({train.num_sets}), the sets both models were fitted on", fontsize=10
    )
    if out_of_view:
        fig.text(
            0.5, 0.005, "Arrows point at centres out of view. With one shared beta, centres far "
            "from the data make the soft assignment (eq. 3) a linear softmax in x:\nwhat lies "
            "between the data and a far centre is a direction, not a place (docs/paper.md, "
            "section 4.1).", ha="center", va="bottom", fontsize=8, color="0.25",
        )  # fmt: skip
    fig.tight_layout(rect=(0, 0.04 if out_of_view else 0, 1, 1))
    return save_figure(fig, path)


#: Colours of the arrows that point at centres out of view (none is a class's colour).
ARROW_COLOURS = ("black", "tab:red", "tab:purple", "tab:brown", "tab:pink", "tab:olive", "tab:cyan")


def _centres_in_view(ax, centres: np.ndarray, vectors: np.ndarray) -> list[int]:
    """Draws ``[K, 2]`` centres on a panel whose limits are the data's; returns those out of view.

    A centre outside the data's box (beyond 10 % of its span) is drawn as a short arrow at the
    edge, pointing at it, in a colour of its own; its legend entry names it and gives its
    distance from the data's mean. Far-out centres no longer shrink the data to a dot, and no
    label is drawn inside the panel, so none covers the data or the legend.
    """
    lo, hi = np.min(vectors, axis=0), np.max(vectors, axis=0)
    pad = 0.1 * np.maximum(hi - lo, 1e-12)
    lo, hi = lo - pad, hi + pad
    inside = np.all((centres >= lo) & (centres <= hi), axis=1)
    ax.scatter(*centres[inside].T, s=70, color="black", marker="o", label="centres", zorder=3)
    middle = vectors.mean(axis=0)
    far = [int(k) for k in np.flatnonzero(~inside)]
    for i, k in enumerate(far):
        direction = centres[k] - middle
        # the largest step along the ray from the mean that stays in the box, less a margin
        with np.errstate(divide="ignore", invalid="ignore"):
            limits = np.where(direction > 0, (hi - middle) / direction, (lo - middle) / direction)
        tip = middle + 0.97 * np.min(limits[np.isfinite(limits) & (limits > 0)]) * direction
        tail = middle + 0.8 * (tip - middle)
        colour = ARROW_COLOURS[i % len(ARROW_COLOURS)]
        ax.annotate(
            "", xy=tip, xytext=tail, arrowprops={"arrowstyle": "-|>", "color": colour, "lw": 2},
            zorder=3,
        )  # fmt: skip
        distance = np.linalg.norm(direction)
        ax.plot(
            [], [], marker=r"$\rightarrow$", ms=10, ls="", color=colour,
            label=f"$\\mu_{{{k}}}$ out of view, {distance:.3g} from the data's mean",
        )  # fmt: skip
    ax.set_xlim(lo[0], hi[0])
    ax.set_ylim(lo[1], hi[1])
    return far


def metric_dots(
    records: Sequence[dict],
    metric: str,
    path: Path,
    title: str,
    ylabel: str,
    scale: float = 1.0,
) -> Path:
    """Mean of ``metric`` per method, each trial as a faint dot, and two standard errors.

    The axis spans the data, not 0: gaps of a few hundredths of a nat between methods are the
    result and must be visible. The error bars (and "± 2 s.e." in the title) appear only with
    two or more trials.

    Args:
        records: per-(trial, method) records holding ``metric``.
        metric: record key, e.g. ``test_log_likelihood`` or ``kl_bits``.
        path: output PNG path.
        title: figure title.
        ylabel: axis label (with units).
        scale: factor applied to the values (e.g. 100 for percentages).

    Returns:
        ``path``.

    Raises:
        ValueError: if no record holds ``metric``.
    """
    fig = metric_dots_figure(records, metric, title, ylabel, scale)
    return save_figure(fig, path)


def metric_dots_figure(records, metric: str, title: str, ylabel: str, scale: float = 1.0):
    """The figure of :func:`metric_dots` (a matplotlib ``Figure``, not saved)."""
    summary = {m: s for m, s in summarize(records).items() if metric in s}
    if not summary:
        raise ValueError(f"no record holds {metric!r}")
    methods = list(summary)
    fig, ax = plt.subplots(figsize=(1.8 + 1.2 * len(methods), 4))
    with_errors = False
    for i, method in enumerate(methods):
        stats = summary[method][metric]
        colour = COLOURS[i % 6]
        values = [scale * r[metric] for r in records if r["method"] == method]
        ax.scatter([i] * len(values), values, s=14, color=colour, alpha=0.35, zorder=2)
        err = None if stats["stderr"] is None else 2 * scale * stats["stderr"]
        with_errors |= err is not None
        ax.errorbar(
            i, scale * stats["mean"], yerr=err, fmt="o", markersize=8, capsize=8, color=colour,
            zorder=3,
        )  # fmt: skip
        ax.annotate(
            f"{scale * stats['mean']:.4g}", (i, scale * stats["mean"]), xytext=(10, 0),
            textcoords="offset points", va="center", fontsize=8,
        )  # fmt: skip
    ax.set_xticks(range(len(methods)), methods)
    ax.set_xlim(-0.6, len(methods) - 0.4)
    ax.margins(y=0.15)
    ax.set_ylabel(ylabel)
    trials = max(summary[m][metric]["n"] for m in methods)
    note = " (mean ± 2 s.e.)" if with_errors else f" ({trials} trial{'s' * (trials > 1)})"
    ax.set_title(title + note, fontsize=10)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    return fig


def loglik_bars(records: Sequence[dict], path: Path, title: str = "test log-likelihood") -> Path:
    """Mean test log-likelihood per set per method (the form of Figure 2 of the paper).

    See :func:`metric_dots`: the axis spans the data, error bars only with two or more trials.
    """
    return metric_dots(
        records, "test_log_likelihood", path, title, "mean test log-likelihood per set (nats)"
    )


def kl_bits(records: Sequence[dict], path: Path) -> Path:
    """Mean KL divergence from the soft test labels to the predictions, in bits, per method.

    The soft-label counterpart of accuracy (ADULT, section 5.3); lower is better.
    """
    return metric_dots(
        records, "kl_bits", path, "KL(soft labels || predictions)",
        "mean KL per test set (bits; lower is better)",
    )  # fmt: skip


def objective_histories(records: Sequence[dict], path: Path) -> Path:
    """Objective ``L`` per coordinate-ascent round of every DPP trial, one convention always.

    Every trial is drawn and named in the legend with its status and last round; a trial that
    stopped at round 0 (the k-means start and its first Theta-step) is a single point.
    ``L`` is the penalised log-likelihood *summed* over a trial's training sets (eq. 17 with the
    ridge and the prior on beta), so trials of different sizes differ in scale. The figure draws
    ``-L`` on a log axis (lower is better; rounds after a large first jump stay readable),
    whatever the number of trials; only if some ``L`` is not negative (a strong prior on beta)
    does it draw ``L`` on a linear axis, and the axis label says so. Rounds are integers.

    Args:
        records: per-(trial, method) records with ``objective_history``.
        path: output PNG path.

    Returns:
        ``path``.
    """
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    curves = [
        (r, np.asarray(r["objective_history"], dtype=np.float64))
        for r in records
        if r["method"] == "dpp" and len(r.get("objective_history", [])) > 0
    ]
    values = np.concatenate([c for _, c in curves]) if curves else np.zeros(0)
    negated = bool(values.size) and bool(np.all(values < 0))
    for r, curve in curves:  # every trial, one that stopped at round 0 as a single point
        sets = f", {r['num_train']} sets" if r.get("num_train") else ""
        status = f", {r['fit_status']}" if r.get("fit_status") else ""
        rounds = len(curve) - 1
        label = f"trial {r['trial']}{sets}{status} at round {rounds}"
        ax.plot(-curve if negated else curve, marker="o" if rounds == 0 else ".", ms=6,
                label=label)  # fmt: skip
    ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
    ax.set_xlabel("round (0 = after k-means init and first Theta-step)")
    if negated:
        ax.set_yscale("log")
        ax.set_ylabel("-L, summed over the training sets\n(log scale; lower is better)")
    else:
        ax.set_ylabel("L, summed over the training sets\n(linear; higher is better)")
    ax.set_title("DPP coordinate ascent: penalised log-likelihood per round", fontsize=10)
    ax.grid(alpha=0.3, which="both")
    if ax.lines:
        ax.legend(fontsize=8)
    fig.tight_layout()
    return save_figure(fig, path)


def accuracy_dots(records: Sequence[dict], path: Path) -> Path:
    """Test accuracy per method (percent), each trial a faint dot; see :func:`metric_dots`."""
    return metric_dots(
        records, "accuracy", path, "test accuracy", "test accuracy (%; argmax of the label)",
        scale=100.0,
    )  # fmt: skip


def partition_map(
    positions: np.ndarray,
    train_idx: np.ndarray,
    test_idx: np.ndarray,
    block_size: int,
    buffer: int,
    path: Path,
) -> Path:
    """Map of one spatially disjoint partition.

    Training blocks (outlined) and pixels, test pixels, and the labelled pixels left out (in a
    training block but not drawn, or within the buffer of a training pixel).

    Args:
        positions: ``[N, 2]`` (row, column) of every labelled set.
        train_idx: training set indices.
        test_idx: test set indices.
        block_size: block side (pixels), for the block grid.
        buffer: Chebyshev buffer around training pixels (pixels), for the caption.
        path: output PNG path.

    Returns:
        ``path``.
    """
    positions = np.asarray(positions)
    height, width = positions.max(axis=0) + 1
    image = np.zeros((height, width), dtype=int)  # 0 unlabelled
    image[positions[:, 0], positions[:, 1]] = 1  # labelled, left out
    image[positions[test_idx, 0], positions[test_idx, 1]] = 2
    image[positions[train_idx, 0], positions[train_idx, 1]] = 3
    colours = matplotlib.colors.ListedColormap(["white", "lightgrey", "tab:orange", "tab:blue"])
    fig, ax = plt.subplots(figsize=(6.5, 6.5 * height / width + 0.6))
    ax.imshow(image, cmap=colours, vmin=0, vmax=3, interpolation="nearest")
    rows, cols = positions[train_idx, 0] // block_size, positions[train_idx, 1] // block_size
    for r, c in set(zip(rows.tolist(), cols.tolist(), strict=True)):
        ax.add_patch(
            matplotlib.patches.Rectangle(
                (c * block_size - 0.5, r * block_size - 0.5), block_size, block_size,
                fill=False, edgecolor="tab:blue", linewidth=1.2,
            )
        )  # fmt: skip
    handles = [
        matplotlib.patches.Patch(color=c, label=lab)
        for c, lab in (
            ("tab:blue", f"training pixels ({len(train_idx)}), blocks outlined"),
            ("tab:orange", f"test pixels ({len(test_idx)})"),
            ("lightgrey", f"labelled, unused (training blocks, or within {buffer} px)"),
        )
    ]
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.02), fontsize=8)
    ax.set_title(f"spatially disjoint partition: {block_size} x {block_size} blocks")
    ax.set_axis_off()
    fig.tight_layout()
    return save_figure(fig, path)


def contour_evidence(shapes: Sequence[dict], path: Path) -> Path:
    """Contour points of a few shapes, each coloured by its evidence for the shape's class.

    Args:
        shapes: one dict per shape: ``points`` ``[M, 2]`` (row, column), ``evidence`` ``[M]``
            (a point's contribution to the class score, centred over the classes: red for the
            class, blue against, each shape on its own symmetric scale, whose end the title
            gives, since a point's share shrinks as ``1 / M``), ``title``.
        path: the PNG to write.
    """
    from matplotlib.colors import TwoSlopeNorm

    fig, axes = plt.subplots(1, len(shapes), figsize=(2.4 * len(shapes) + 0.4, 2.9), squeeze=False)
    for ax, shape in zip(axes[0], shapes, strict=True):
        rows, cols = np.asarray(shape["points"], float).T
        evidence = np.asarray(shape["evidence"], float)
        scale = float(np.max(np.abs(evidence))) or 1.0
        ax.plot(np.append(cols, cols[0]), np.append(rows, rows[0]), color="0.8", lw=0.8)
        ax.scatter(cols, rows, c=evidence, cmap="RdBu_r", norm=TwoSlopeNorm(0.0, -scale, scale),
                   s=max(4.0, min(30.0, 1500.0 / len(rows))), edgecolors="none")  # fmt: skip
        ax.set_title(f"{shape['title']}\ncolour scale ± {scale:.3g} logits", fontsize=7)
        ax.set_aspect("equal"), ax.invert_yaxis(), ax.set_xticks([]), ax.set_yticks([])
    fig.suptitle(
        "Which contour points decided (DPP; red: evidence for the shape's class, blue: against)",
        fontsize=8,
    )
    fig.tight_layout()
    return save_figure(fig, path)
