"""Tabulates a Hydra multirun: sweep.csv, sweep.md (one row per job) and sweep.png.

python scripts/collect.py MULTIRUN_DIR [--out DIR]

Each row: the job's number and overridden values, its status (a killed job shows as `killed`,
one that never started its run as `no results`), the validation metric returned to the sweeper
and every method's mean accuracy, test log-likelihood and (soft labels) KL in bits. The figure
plots the validation metric (else the first method's accuracy) against each swept value.
"""

import argparse
import sys
from pathlib import Path

from dpp.experiment.sweep import write_sweep


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("multirun_dir", type=Path)
    parser.add_argument("--out", type=Path, default=None, help="default: MULTIRUN_DIR")
    args = parser.parse_args()
    try:
        paths = write_sweep(args.multirun_dir, args.out)
    except FileNotFoundError as err:
        print(err, file=sys.stderr)
        return 2
    for path in paths.values():
        print(path)
    print(paths["md"].read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
