"""Tells what state runs are in, from their files alone (a killed run shows as `killed`).

python scripts/status.py RUN_DIR [RUN_DIR ...]
"""

import argparse
import sys
from pathlib import Path

from dpp.experiment.reporting import run_state


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("run_dirs", type=Path, nargs="+")
    args = parser.parse_args()
    code = 0
    for run_dir in args.run_dirs:
        try:
            status, why = run_state(run_dir)
        except FileNotFoundError as err:
            print(f"{run_dir}: {err}", file=sys.stderr)
            code = 2
            continue
        print(f"{run_dir}: {status} ({why})")
    return code


if __name__ == "__main__":
    sys.exit(main())
