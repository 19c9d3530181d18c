"""Probe of DPP's saturation on the suite's witness tasks: what stopping or a prior on beta does.

    python benchmarks/bench.py --probe saturation        # about 1.5 min on 2 cores

For each witness task of benchmarks/lab/, 5 stratified folds: DPP at two fixed l2 values,
with
early stopping (validation_fraction=0.2), after one round, with a log-normal prior on beta, and
the standard prototype (DPP's k-means start with hard codes). Prints accuracy, test
log-likelihood per set, the share of one-hot training codes and each fold's status.
"""

import sys
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.model_selection import StratifiedKFold

from dpp import DPPClassifier, StandardPrototypeClassifier
from dpp.errors import FitWarning

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: lab
from lab import TASKS

from dpp.metrics import evaluate

VARIANTS = {
    "dpp l2=1": {"l2": 1.0},
    "dpp l2=0.01": {"l2": 0.01},
    "dpp l2=0.01 early stop": {"l2": 0.01, "validation_fraction": 0.2},
    "dpp l2=0.01 max_rounds=1": {"l2": 0.01, "max_rounds": 1},
    "dpp l2=0.01 lognormal prior": {
        "l2": 0.01,
        "beta_prior": "lognormal",
        "beta_prior_loc": 0.0,
        "beta_prior_scale": 1.0,
    },
}


def main() -> None:
    warnings.simplefilter("ignore", FitWarning)  # the statuses are printed
    for task in ("witness_d50_r05", "witness_d10_r10"):
        loader, k, _ = TASKS[task]
        sets = loader().sets
        labels = np.asarray(sets.labels)
        folds = StratifiedKFold(5, shuffle=True, random_state=0)
        splits = list(folds.split(np.zeros(len(labels)), labels.argmax(1)))
        estimators = {name: DPPClassifier(n_prototypes=k, **p) for name, p in VARIANTS.items()}
        estimators["standard l2=0.01"] = StandardPrototypeClassifier(n_prototypes=k, l2=0.01)
        for name, est in estimators.items():
            acc, ll, one_hot, statuses, t0 = [], [], [], [], time.perf_counter()
            for train, test in splits:
                est.fit(sets.subset(train))
                metrics = evaluate(est.predict_log_proba(sets.subset(test)), labels[test])
                acc.append(metrics["accuracy"])
                ll.append(metrics["test_log_likelihood"])
                learned = est.fit_report_.prototypes  # None for the standard prototype's hard codes
                one_hot.append((learned.saturated_fraction or 0.0) if learned else np.nan)
                statuses.append(est.fit_report_.status)
            print(
                f"{task} {name:<28} accuracy {100 * np.mean(acc):.1f}%  log-lik {np.mean(ll):.3f}"
                f"  one-hot {np.mean(one_hot):.3f}  {statuses}  {time.perf_counter() - t0:.0f} s",
                flush=True,
            )


if __name__ == "__main__":
    main()
