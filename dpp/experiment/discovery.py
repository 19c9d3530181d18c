"""Prototype discovery (section 4.5): what the learned prototypes are and which classes they favour.

For every prototype ``k`` the report gives its centre ``mu_k`` in the original units of the
features, its usage (the mean of ``z_k`` over the training sets) and its association with each
class, ``p(y = c | z = e_k) = softmax(theta_k)_c``: the classifier's prediction for a set whose
vectors all sit on that prototype (eq. 16 at a vertex of the simplex).
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from dpp.experiment.plots import save_figure  # noqa: E402


def prototype_associations(theta: np.ndarray) -> np.ndarray:
    """``[K, C]`` class distribution predicted at each vertex ``e_k``: ``softmax(theta_k)``."""
    theta = np.asarray(theta, dtype=np.float64)
    e = np.exp(theta - theta.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def write_prototype_report(
    out_dir: Path,
    centres: np.ndarray,
    theta: np.ndarray,
    z_train: np.ndarray,
    feature_names: Sequence[str],
    class_names: Sequence[str],
) -> None:
    """Writes ``prototypes.csv``, ``prototypes.md`` and ``prototypes.png``, rows by usage.

    Args:
        out_dir: run directory.
        centres: ``[K, D]`` centres in the original units.
        theta: ``[K, C]`` classifier weights.
        z_train: ``[N, K]`` training representations (for the usage column).
        feature_names: ``D`` names.
        class_names: ``C`` names.

    Raises:
        ValueError: if the shapes disagree.
    """
    centres, z_train = np.asarray(centres), np.asarray(z_train)
    k, d = centres.shape
    assoc = prototype_associations(theta)
    if assoc.shape != (k, len(class_names)) or d != len(feature_names) or z_train.shape[1] != k:
        raise ValueError("centres, theta, z and the names do not agree in shape")
    usage = z_train.mean(axis=0)
    order = np.argsort(-usage, kind="stable")
    out_dir = Path(out_dir)
    header = ["prototype", "usage", *feature_names, *(f"p({c})" for c in class_names)]
    with (out_dir / "prototypes.csv").open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        for i in order:
            writer.writerow([int(i), f"{usage[i]:.6g}", *(f"{v:.6g}" for v in centres[i]),
                             *(f"{p:.6g}" for p in assoc[i])])  # fmt: skip
    lines = [
        "# Learned prototypes",
        "",
        "Centre in original units, usage = mean z_k over training sets, and p(class | z = e_k) = "
        "softmax(theta_k) in %, rows by usage.",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
    ]
    for i in order:
        cells = [str(i), f"{usage[i]:.3f}", *(f"{v:.4g}" for v in centres[i]),
                 *(f"{100 * p:.1f}" for p in assoc[i])]  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    (out_dir / "prototypes.md").write_text("\n".join(lines) + "\n")

    spread = centres.std(axis=0)
    scaled = (centres - centres.mean(axis=0)) / np.where(spread > 0, spread, 1.0)
    fig, axes = plt.subplots(
        1, 2, figsize=(4 + 0.6 * (d + len(class_names)), 1.5 + 0.35 * k),
        gridspec_kw={"width_ratios": [d, len(class_names)]},
    )  # fmt: skip
    labels = [f"{i} ({usage[i]:.2f})" for i in order]
    for ax, data, names, title, cmap in (
        (axes[0], scaled[order], feature_names, "centre (z-score across prototypes)", "coolwarm"),
        (axes[1], assoc[order], class_names, "p(class | z = e_k)", "viridis"),
    ):
        image = ax.imshow(data, aspect="auto", cmap=cmap)
        ax.set_xticks(range(len(names)), names, rotation=60, ha="right", fontsize=8)
        ax.set_yticks(range(k), labels, fontsize=8)
        ax.set_title(title, fontsize=9)
        fig.colorbar(image, ax=ax, fraction=0.05, label=title)
    axes[0].set_ylabel("prototype (usage)")
    fig.tight_layout()
    save_figure(fig, out_dir / "prototypes.png")
