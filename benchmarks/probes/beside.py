"""Does the embedded member's thread pay? ``DPPClassifierCV()`` with and without it (issue 79).

    python benchmarks/bench.py --probe beside                    # about 6 minutes on 2 cores
    python benchmarks/bench.py --probe beside --repeats 1 --sets 80

With ``n_jobs=None`` (the default) a selection on two or more cores trains its embedded members
in a thread beside the paper's model's candidates (``dpp.estimators.search.CandidateSearch.
beside``); ``n_jobs=1`` fits one at a time. Both are fitted once cold (compiling), then
``--repeats`` times each, alternated, warm; the probe prints each fit's seconds, the median
ratio thread / none, and whether the two selections predict the same to the bit. Data: the
README's generated sets (``--sets`` of them, 5-D, half a class apart). Run it on a quiet
machine: another process on the cores changes what a thread can gain.
"""

import argparse
import time
import warnings

import numpy as np

from dpp import DPPClassifier, DPPClassifierCV
from dpp.errors import FitWarning
from dpp.estimators.search import cores


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2, help="warm fits of each (default 2)")
    parser.add_argument("--sets", type=int, default=150, help="training sets (default 150)")
    args = parser.parse_args()
    warnings.simplefilter("ignore", FitWarning)  # the statuses are not what is measured
    rng = np.random.default_rng(0)
    n = args.sets + 50
    X = [rng.normal(size=(rng.integers(2, 14), 5)) + (i % 2) for i in range(n)]
    y = np.where(np.arange(n) % 2, "dog", "cat")
    train, test = (X[: args.sets], y[: args.sets]), X[args.sets :]

    def fit(n_jobs):
        t0 = time.perf_counter()
        clf = DPPClassifierCV(DPPClassifier(n_prototypes=4), n_jobs=n_jobs).fit(*train)
        return time.perf_counter() - t0, clf.predict_proba(test)

    print(f"{cores()} cores; {args.sets} training sets", flush=True)
    seconds = {None: [], 1: []}
    proba = {}
    for phase in ["cold"] + ["warm"] * args.repeats:
        for n_jobs in (None, 1):
            s, proba[n_jobs] = fit(n_jobs)
            label = "thread beside (n_jobs=None)" if n_jobs is None else "one at a time (n_jobs=1)"
            print(f"{phase}  {label:<30} {s:6.1f} s", flush=True)
            if phase == "warm":
                seconds[n_jobs].append(s)
    same = np.array_equal(proba[None], proba[1])
    if args.repeats:
        ratio = np.median(np.array(seconds[None]) / np.array(seconds[1]))
        print(f"warm: thread / one at a time = {ratio:.2f} (median of {args.repeats})")
    print(f"the same predictions to the bit: {same}")


if __name__ == "__main__":
    main()
