"""Every method on every task of the suite (dpp/suite.py); writes suite.json, .csv and .md.

    python scripts/suite.py                       # all tasks, 5 outer folds -> outputs/suite/
    python scripts/suite.py --tasks witness_d10_r10 --folds 3 --out /tmp/suite

Records are written after every task, so a run that fails keeps the tasks it finished.
"""

import argparse
import json
import time
from pathlib import Path

import pandas as pd

from dpp.suite import METHODS, TASKS, run_task, summary_table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="+", default=list(TASKS), choices=list(TASKS))
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(METHODS))
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("outputs/suite"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    records, t0 = [], time.perf_counter()
    for task in args.tasks:
        records += run_task(task, args.folds, args.seed, args.methods)
        (args.out / "suite.json").write_text(json.dumps(records, indent=1, default=float))
        pd.DataFrame(records).to_csv(args.out / "suite.csv", index=False)
        (args.out / "suite.md").write_text("# Suite of set tasks\n\n" + summary_table(records))
    print((args.out / "suite.md").read_text())
    print(f"{time.perf_counter() - t0:.0f} s; files in {args.out}")


if __name__ == "__main__":
    main()
