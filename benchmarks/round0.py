"""Why a plain fit stops at round 0 on small data: what the first (mu, beta)-step does.

    python benchmarks/round0.py                       # every task below, 2 draws, 120 sets
    python benchmarks/round0.py --tasks witness_d10_r10 synthetic --draws 1 --train 60
    python benchmarks/round0.py --out benchmarks/round0    # also round0.json and round0.md
    python benchmarks/round0.py --step-options '{"max_iter": 1}'   # a partial first step

Round 0 is the k-means start with its first Theta-step: no prototype and no ``beta`` learned.
For each task and draw, ``--train`` sets are drawn for training (stratified) and the rest are
held out; three models are fitted on the training sets from the same k-means centres:

* ``DPPClassifier(n_prototypes=K, validation_fraction=0, max_rounds=0)``: round 0, the soft
  codes of eq. (3) at the start ``beta``;
* the same with ``max_rounds=1``: round 0, one (mu, beta)-step (an L-BFGS solve), and its
  Theta-step;
* ``StandardPrototypeClassifier`` on the same centres: their hard codes (eq. 1) and the same
  softmax, the paper's standard prototype.

Printed per task (mean over draws): the training and held-out log-likelihood per set (nats)
and accuracy of round 0, of round 1 and of the standard prototype; the prototypes' displacement
in the first step (root mean square per coordinate, in units of the data's spread: the
model's internal units, where every coordinate has unit root mean squared deviation; and as a
share of the median distance from a vector to its nearest centre); ``beta`` after the step
over its start; the codes' saturation (the share of training vectors whose largest code is
above 0.99) before and after; and the gradient of the training objective at round 0 by
parameter: the root mean square of ``dL/dmu`` per coordinate and ``dL/dlog beta``, each
times its parameter's scale (the data's spread for ``mu``, 1 for ``log beta``), so that the two
say which parameter the first step moves most per unit of change.

The tasks: the suite's proportion and witness families (where the default's raw members stop
at round 0), its digit bags and image patches (where they learn), and section 4.1's synthetic
data (the paper's own). The model page (docs/model.md, "Why round 0 wins on small data") says
what the printed figures show.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from sklearn.model_selection import train_test_split

import dpp
from dpp.likelihood import Params, objective

#: Tasks of the suite by family, and the paper's synthetic data.
TASKS = (
    "proportion_d10_c3", "proportion_d30_c2", "witness_d10_r10", "witness_d50_r05",
    "digit_bags_m10_n200", "digits_patches", "synthetic",
)  # fmt: skip
#: Above this largest code a vector counts as saturated (its code is one-hot in float32 terms).
SATURATED = 0.99


def load_task(name: str, draw: int) -> tuple[dpp.RaggedSets, int, str]:
    """``(sets, K, family)`` of a suite task's draw, or of section 4.1's synthetic data."""
    if name == "synthetic":
        from dpp.datasets.synthetic import make_synthetic

        return (
            make_synthetic(num_sets=400, min_size=1, max_size=20, seed=draw).sets,
            2,
            "paper (section 4.1)",
        )
    from lab.tasks import TASKS as SUITE

    load, k, family = SUITE[name]
    return load(draw).sets, k, family


def _mean_log_likelihood(clf, sets: dpp.RaggedSets) -> float:
    labels = np.asarray(sets.labels)
    return float(np.mean(np.sum(labels * clf.predict_log_proba(sets), axis=1)))


def _accuracy(clf, sets: dpp.RaggedSets) -> float:
    return float(np.mean(clf.predict(sets) == np.argmax(np.asarray(sets.labels), axis=1)))


def _internal(clf, sets: dpp.RaggedSets) -> dpp.RaggedSets:
    """``sets`` in the fitted model's internal units: its preprocessing, then its normaliser."""
    if clf.preprocess_ is not None:
        sets = clf.preprocess_.sets(sets)
    return clf.model_.internal_sets(sets)


def _saturation(clf, sets: dpp.RaggedSets) -> float:
    """Share of the training vectors whose largest soft code (eq. 3) is above SATURATED."""
    model = clf.model_
    x = np.asarray(_internal(clf, sets).vectors, np.float64)
    mu = np.asarray(model.mu, np.float64)
    beta = np.exp(np.asarray(model.log_beta, np.float64))
    d2 = ((x[:, None, :] - mu[None]) ** 2).sum(-1)
    logits = -beta * (d2 - d2.min(1, keepdims=True))
    codes = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    return float(np.mean(codes.max(1) > SATURATED))


def _gradient_scales(clf, sets: dpp.RaggedSets) -> tuple[float, float]:
    """RMS of dL/dmu per coordinate and |dL/dlog beta| of the training objective at the fit."""
    model = clf.model_
    internal = _internal(clf, sets)
    params = Params(jnp.asarray(model.mu), jnp.asarray(model.log_beta), jnp.asarray(model.theta),
                    model.pooling)  # fmt: skip
    grads = jax.grad(objective)(params, internal, clf.l2)
    g_mu = float(np.sqrt(np.mean(np.square(np.asarray(grads.mu)))))
    return g_mu, float(np.abs(np.asarray(grads.log_beta)).max())


def one_draw(name: str, draw: int, num_train: int, step_options: dict | None = None) -> dict:
    """Every figure of the module docstring for one task's draw.

    ``step_options``: the round-1 fit's ``optimizer_options`` (e.g. ``{"max_iter": 1}``, one
    quasi-Newton iteration in its (mu, beta)-step; ``None``: the default solve).
    """
    sets, k, family = load_task(name, draw)
    classes = np.argmax(np.asarray(sets.labels), axis=1)
    train_idx, held_idx = train_test_split(
        np.arange(sets.num_sets), train_size=min(num_train, sets.num_sets - 10),
        stratify=classes, random_state=draw,
    )  # fmt: skip
    train, held = sets.subset(np.sort(train_idx)), sets.subset(np.sort(held_idx))
    plain = {"n_prototypes": k, "validation_fraction": 0.0, "random_state": draw}
    start = dpp.DPPClassifier(max_rounds=0, **plain).fit(train)
    stepped = dpp.DPPClassifier(max_rounds=1, optimizer_options=step_options, **plain).fit(train)
    standard = dpp.StandardPrototypeClassifier(n_prototypes=k, l2=start.l2, random_state=draw)
    standard.fit(train)
    if not np.allclose(standard.prototypes_, start.prototypes_, rtol=1e-5, atol=1e-6):
        raise RuntimeError(f"{name} draw {draw}: the standard prototype's k-means centres "
                           "differ from DPP's start")  # fmt: skip
    mu0, mu1 = np.asarray(start.model_.mu, np.float64), np.asarray(stepped.model_.mu, np.float64)
    if not np.allclose(start.model_.normalizer.scale, stepped.model_.normalizer.scale):
        raise RuntimeError(f"{name} draw {draw}: the two fits did not share their units")
    x = np.asarray(_internal(start, train).vectors, np.float64)
    nearest = np.sqrt(((x[:, None, :] - mu0[None]) ** 2).sum(-1).min(1))
    moved = np.sqrt(((mu1 - mu0) ** 2).sum(1))  # [K], internal units
    g_mu, g_beta = _gradient_scales(start, train)
    row = {"task": name, "family": family, "draw": draw, "K": k, "train": train.num_sets,
           "held_out": held.num_sets, "dim": sets.dim}  # fmt: skip
    for label, clf in (("round0", start), ("round1", stepped), ("standard", standard)):
        row[f"{label}_train_ll"] = _mean_log_likelihood(clf, train)
        row[f"{label}_held_ll"] = _mean_log_likelihood(clf, held)
        row[f"{label}_held_acc"] = _accuracy(clf, held)
    row["displacement_rms"] = float(np.sqrt(np.mean(moved**2) / sets.dim))
    row["displacement_of_nearest"] = float(np.median(moved) / np.median(nearest))
    beta0 = float(np.exp(np.mean(np.asarray(start.model_.log_beta))))
    beta1 = float(np.exp(np.mean(np.asarray(stepped.model_.log_beta))))
    row["beta_start"], row["beta_ratio"] = beta0, beta1 / beta0
    row["saturated_round0"] = _saturation(start, train)
    row["saturated_round1"] = _saturation(stepped, train)
    row["grad_mu_rms"], row["grad_log_beta"] = g_mu, g_beta
    row["round1_status"] = stepped.fit_report_.status
    return row


COLUMNS = (
    ("family", "{}"), ("task", "{}"),
    ("round0_train_ll", "{:.3f}"), ("round1_train_ll", "{:.3f}"),
    ("round0_held_ll", "{:.3f}"), ("round1_held_ll", "{:.3f}"), ("standard_held_ll", "{:.3f}"),
    ("round0_held_acc", "{:.3f}"), ("round1_held_acc", "{:.3f}"), ("standard_held_acc", "{:.3f}"),
    ("displacement_rms", "{:.3f}"), ("displacement_of_nearest", "{:.2f}"),
    ("beta_ratio", "{:.2f}"), ("saturated_round0", "{:.2f}"), ("saturated_round1", "{:.2f}"),
    ("grad_mu_rms", "{:.3g}"), ("grad_log_beta", "{:.3g}"),
)  # fmt: skip


def table(rows: list[dict]) -> str:
    """A markdown table: one line per task, each figure the mean over its draws."""
    lines = ["| " + " | ".join(c for c, _ in COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for task in dict.fromkeys(r["task"] for r in rows):
        mine = [r for r in rows if r["task"] == task]
        cells = []
        for column, fmt in COLUMNS:
            values = [r[column] for r in mine]
            value = values[0] if isinstance(values[0], str) else float(np.mean(values))
            cells.append(fmt.format(value))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    """Runs the tasks' draws, prints the table (and writes it with ``--out``)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="+", default=list(TASKS), help="tasks (default: all)")
    parser.add_argument("--draws", type=int, default=2, help="draws of each task (default: 2)")
    parser.add_argument("--train", type=int, default=120, help="training sets (default: 120)")
    parser.add_argument("--out", type=Path, default=None, help="write round0.json and round0.md")
    parser.add_argument(
        "--step-options", type=json.loads, default=None, metavar="JSON",
        help='the round-1 fit\'s optimizer_options, e.g. \'{"max_iter": 1}\' (default: none)',
    )  # fmt: skip
    args = parser.parse_args(argv)
    # a fit of one round stops at its cap by design
    warnings.filterwarnings("ignore", ".*fit max_rounds", dpp.FitWarning)
    rows, start = [], time.perf_counter()
    for name in args.tasks:
        for draw in range(args.draws):
            rows.append(one_draw(name, draw, args.train, args.step_options))
            r, seconds = rows[-1], time.perf_counter() - start
            print(f"{name} draw {draw}: held-out log-lik round 0 {r['round0_held_ll']:.3f}, "
                  f"round 1 {r['round1_held_ll']:.3f}, standard {r['standard_held_ll']:.3f}; "
                  f"mu moved {r['displacement_rms']:.3f} spreads, beta x{r['beta_ratio']:.2f} "
                  f"({seconds:.0f} s)", file=sys.stderr, flush=True)  # fmt: skip
    options = f" --step-options '{json.dumps(args.step_options)}'" if args.step_options else ""
    text = (
        f"{args.train} training sets a draw, {args.draws} draw(s), mean over draws "
        f"(`python benchmarks/round0.py{options}`):\n\n{table(rows)}"
    )
    print(text)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "round0.json").write_text(json.dumps(rows, indent=1) + "\n")
        (args.out / "round0.md").write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
