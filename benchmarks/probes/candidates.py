"""Which candidates should ``DPPClassifierCV()`` consider by default? Measured on the suite.

    python benchmarks/bench.py --probe candidates                      # mean+max+gem, every task
    python benchmarks/bench.py --probe candidates --embedded --tasks digits_patches witness_d10_r10

The suite's tasks and outer folds (benchmarks/lab/, seed 0): ``DPPClassifierCV`` over
``DPPClassifier(n_prototypes=K)`` with the suite's ``l2`` grid and 3 inner folds, and these
pooling candidates (``--pooling``, default mean max gem), plus, with ``--embedded``, DPP on a
learned embedding (256-128-64, its own K = 16 is not used here: the task's K) with each pooling
as a candidate group too. Prints per task the accuracy, test log-likelihood, seconds a fold and
the candidates chosen; compare with the suite's rows (``dpp``: mean and max).
"""

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.model_selection import StratifiedKFold

from dpp import DPPClassifier, DPPClassifierCV
from dpp.errors import FitWarning

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: lab
from lab import EMBEDDING, L2S, TASKS

from dpp.metrics import evaluate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="+", default=list(TASKS), choices=list(TASKS))
    parser.add_argument("--pooling", nargs="+", default=["mean", "max", "gem"])
    parser.add_argument("--embedded", action="store_true", help="embedding candidates too")
    parser.add_argument("--folds", type=int, default=5)
    args = parser.parse_args()
    warnings.simplefilter("ignore", FitWarning)
    embeddings = [None, EMBEDDING] if args.embedded else [None]
    for name in args.tasks:
        loader, k, _ = TASKS[name]
        sets = loader().sets
        labels = np.asarray(sets.labels)
        splitter = StratifiedKFold(args.folds, shuffle=True, random_state=0)
        acc, ll, seconds, chosen = [], [], [], []
        for train, test in splitter.split(np.zeros(len(labels)), labels.argmax(1)):
            search = DPPClassifierCV(
                DPPClassifier(n_prototypes=k, random_state=0), l2s=L2S, cv=3,
                pooling=args.pooling, embedding=embeddings,
            )  # fmt: skip
            t0 = time.perf_counter()
            search.fit(sets.subset(train))
            seconds.append(time.perf_counter() - t0)
            metrics = evaluate(search.predict_log_proba(sets.subset(test)), labels[test])
            acc.append(metrics["accuracy"])
            ll.append(metrics["test_log_likelihood"])
            params = search.best_params_
            chosen.append(f"{params.get('pooling')}{'+emb' if 'embedding' in params else ''}")
        se = 100 * np.std(acc, ddof=1) / np.sqrt(len(acc))
        print(
            f"{name:<18} accuracy {100 * np.mean(acc):5.1f} ± {2 * se:.1f}%  log-lik "
            f"{np.mean(ll):7.3f}  {np.mean(seconds):5.1f} s a fold  chosen {chosen}",
            flush=True,
        )


if __name__ == "__main__":
    main()
