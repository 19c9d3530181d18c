"""Which default keeps a plain ``DPPClassifier()`` out of saturation on data nobody tuned for?

    python benchmarks/bench.py --probe defaults            # about 6 min on 2 cores
    python benchmarks/bench.py --probe defaults --quick    # two tasks, three folds

Every task of the suite (benchmarks/lab/) and the generated multiple-instance problem of
issue 36
(200 bags of 5-30 vectors in 20-D, a bag positive iff it holds a witness), 5 stratified outer
folds each: ``DPPClassifier(n_prototypes=K, random_state=fold)`` with the candidate defaults
below, fitted on 4 folds and scored on the fifth. Prints, per task and candidate, the mean
accuracy, test log-likelihood per set, the share of one-hot training codes, how many fits ended
``saturated`` and the seconds per fit; then the same over all tasks.
"""

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.model_selection import StratifiedKFold

from dpp import DPPClassifier
from dpp.datasets.suite import make_witness
from dpp.errors import FitWarning

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: lab
from lab import TASKS

from dpp.metrics import evaluate

#: The candidate defaults: the old one (rounds by ``tol``), early stopping, fewer rounds.
CANDIDATES = {
    "tol only (old default)": {"validation_fraction": 0.0},
    "validation_fraction=0.2": {"validation_fraction": 0.2},
    "max_rounds=3": {"validation_fraction": 0.0, "max_rounds": 3},
    "max_rounds=1": {"validation_fraction": 0.0, "max_rounds": 1},
}


def tasks(quick: bool) -> dict:
    """``name -> (loader, K)``: the suite's tasks and issue 36's generated problem."""
    chosen = {name: (loader, k) for name, (loader, k, _) in TASKS.items()}
    chosen["mil_d20_issue36"] = (
        lambda: make_witness(num_sets=200, dim=20, min_size=5, max_size=30, seed=3),
        10,
    )
    if quick:
        chosen = {name: chosen[name] for name in ("witness_d50_r05", "mil_d20_issue36")}
    return chosen


def probe(name: str, loader, k: int, folds: int) -> dict[str, dict]:
    """Each candidate's fold results on one task."""
    sets = loader().sets
    labels = np.asarray(sets.labels)
    splitter = StratifiedKFold(folds, shuffle=True, random_state=0)
    splits = list(splitter.split(np.zeros(len(labels)), labels.argmax(1)))
    out = {}
    for candidate, params in CANDIDATES.items():
        rows = []
        for fold, (train, test) in enumerate(splits):
            est = DPPClassifier(n_prototypes=k, random_state=fold, **params)
            t0 = time.perf_counter()
            est.fit(sets.subset(train))
            seconds = time.perf_counter() - t0
            metrics = evaluate(est.predict_log_proba(sets.subset(test)), labels[test])
            report = est.fit_report_
            rows.append(
                (
                    metrics["accuracy"],
                    metrics["test_log_likelihood"],
                    report.prototypes.saturated_fraction,
                    report.status == "saturated",
                    seconds,
                )
            )
        acc, ll, one_hot, saturated, seconds = (np.array(c, float) for c in zip(*rows, strict=True))
        out[candidate] = {
            "accuracy": acc,
            "log_lik": ll,
            "one_hot": one_hot,
            "saturated": int(saturated.sum()),
            "seconds": seconds,
        }
        print(
            f"{name:<18} {candidate:<24} accuracy {100 * acc.mean():5.1f}%  log-lik "
            f"{ll.mean():7.3f}  one-hot {one_hot.mean():.3f}  saturated fits "
            f"{int(saturated.sum())}/{len(rows)}  {seconds.mean():.2f} s a fit",
            flush=True,
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="two tasks, three folds")
    args = parser.parse_args()
    warnings.simplefilter("ignore", FitWarning)  # the statuses are counted
    folds = 3 if args.quick else 5
    results = {
        name: probe(name, loader, k, folds) for name, (loader, k) in tasks(args.quick).items()
    }
    print("\nover all tasks (mean of the task means):")
    for candidate in CANDIDATES:
        per_task = [results[t][candidate] for t in results]
        accuracy = 100 * np.mean([r["accuracy"].mean() for r in per_task])
        print(
            f"  {candidate:<24} accuracy {accuracy:5.1f}%"
            f"  log-lik {np.mean([r['log_lik'].mean() for r in per_task]):7.3f}  saturated fits "
            f"{sum(r['saturated'] for r in per_task)}/{folds * len(per_task)}  "
            f"{np.mean([r['seconds'].mean() for r in per_task]):.2f} s a fit"
        )


if __name__ == "__main__":
    main()
