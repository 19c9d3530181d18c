"""Probe of issue 53's evidence targets on generated witness problems outside the suite.

    python benchmarks/bench.py --probe witness_outside [--seeds 2]   # about 12 min on 2 cores

Witness problems (:func:`dpp.datasets.suite.make_witness`) with dimensions, witness rates, set
sizes, separations, scales and offsets that no suite task has and nothing was tuned on; each
seed draws new data and splits it into 150 training and 50 held-out sets. Fitted through the
public API on lists of arrays: the default ``DPPClassifierCV()``, max pooling alone on the raw
vectors at the estimator's ``K`` (10) and with ``K`` chosen from 10 and 20, and
``AttentionMILClassifier()``. Prints each model's held-out accuracy and the instance AUC of its
vectors' evidence against the witness labels: ``instance_scores`` (the exact shares of the
positive class's log-odds) and ``instance_proba`` (each vector as a set of its own); the
targets: the default at least attention MIL's ``instance_scores`` AUC, max pooling's
``instance_proba`` at least 0.9.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
from sklearn.metrics import roc_auc_score

from dpp import AttentionMILClassifier, DPPClassifier, DPPClassifierCV
from dpp.datasets.suite import make_witness
from dpp.errors import FitWarning
from dpp.estimators import RAW_VECTORS

#: name -> make_witness arguments, then the scale and the offset applied to every vector
PROBLEMS = {
    "d8 r05 10-40": ({"dim": 8, "witness_rate": 0.05, "min_size": 10, "max_size": 40}, 1.0, 0.0),
    "d3 r30 2-10 x1e3": (
        {"dim": 3, "witness_rate": 0.3, "min_size": 2, "max_size": 10, "separation": 2.5},
        1e3,
        -500.0,
    ),
    "d30 r02 30-60 x0.01": (
        {"dim": 30, "witness_rate": 0.02, "min_size": 30, "max_size": 60, "separation": 4.0},
        0.01,
        7.0,
    ),
    "d15 r10 5-25 +100": (
        {"dim": 15, "witness_rate": 0.1, "min_size": 5, "max_size": 25},
        1.0,
        100.0,
    ),
}

MODELS = {
    "default": lambda seed: DPPClassifierCV(DPPClassifier(random_state=seed)),
    "max, K 10": lambda seed: DPPClassifierCV(
        DPPClassifier(random_state=seed), pooling=("max",), **RAW_VECTORS
    ),
    "max, K from 10, 20": lambda seed: DPPClassifierCV(
        DPPClassifier(random_state=seed), pooling=("max",), n_prototypes=(10, 20), **RAW_VECTORS
    ),
    "attention MIL": lambda seed: AttentionMILClassifier(random_state=seed),
}


def _auc(per_set: list, witnesses: np.ndarray) -> float:
    return float(roc_auc_score(witnesses, np.concatenate([p[:, -1] - p[:, 0] for p in per_set])))


def _one(name: str, seed: int) -> None:
    options, scale, offset = PROBLEMS[name]
    data = make_witness(num_sets=200, seed=1000 + seed, **options)
    sizes = data.sets.set_sizes()
    vectors = np.asarray(data.sets.member_vectors()) * scale + offset
    X = np.split(vectors, np.cumsum(sizes)[:-1])
    y = np.asarray(data.sets.labels).argmax(1)
    witnesses = np.split(np.asarray(data.instance_labels), np.cumsum(sizes)[:-1])
    order = np.random.default_rng(seed).permutation(len(X))
    train, test = order[:150], order[150:]
    held_out = np.concatenate([witnesses[i] for i in test])
    for model, make in MODELS.items():
        start = time.perf_counter()
        clf = make(seed).fit([X[i] for i in train], y[train])
        seconds = time.perf_counter() - start
        X_test = [X[i] for i in test]
        accuracy = float(np.mean(clf.predict(X_test) == y[test]))
        scores = _auc(clf.instance_scores(X_test), held_out)
        proba = "-"
        if hasattr(clf, "instance_proba"):
            proba = f"{_auc(clf.instance_proba(X_test), held_out):.3f}"
        print(
            f"| {name} | {seed} | {model} | {100 * accuracy:.0f} | {scores:.3f} | {proba} "
            f"| {seconds:.0f} |",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=2)
    args = parser.parse_args()
    warnings.simplefilter("ignore", FitWarning)  # the figures are printed
    print(
        "| problem | seed | model | accuracy (%) | AUC, instance_scores | AUC, instance_proba | s |"
    )
    print("|---|---|---|---|---|---|---|")
    for name in PROBLEMS:
        for seed in range(args.seeds):
            _one(name, seed)


if __name__ == "__main__":
    main()
