"""Every method on every task of the suite (dpp/experiment/suite.py).

Writes suite.json, .csv, .md, .png.

    python scripts/suite.py                       # all tasks, 5 outer folds -> outputs/suite/
    python scripts/suite.py --tasks witness_d10_r10 --folds 3 --out /tmp/suite

The same run as ``python experiments/run.py experiment=suite`` (both call
:func:`dpp.experiment.suite.run_suite`). Files are rewritten after every fit, so a run that
fails keeps every fit it finished; ``--resume`` continues it, keeping the outer folds that every
method finished.
"""

import argparse
import sys
import time
from pathlib import Path

from dpp.errors import ConfigError
from dpp.experiment.suite import METHODS, TASKS, run_suite


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="+", default=list(TASKS), choices=list(TASKS))
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(METHODS))
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("outputs/suite"))
    parser.add_argument("--resume", action="store_true")
    args = parser.parse_args()
    t0 = time.perf_counter()
    try:
        run_suite(args.out, args.tasks, args.folds, args.seed, args.methods, args.resume)
    except ConfigError as err:  # a refused folder or a bad name: one line, nothing written
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
    print((args.out / "suite.md").read_text())
    print(f"{time.perf_counter() - t0:.0f} s; files in {args.out}")


if __name__ == "__main__":
    main()
