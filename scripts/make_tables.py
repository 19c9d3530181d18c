"""Rebuilds the paper tables of a finished run from its results.json.

python scripts/make_tables.py RUN_DIR [REPORT ...]      # default: the run's config reports
"""

import argparse
from pathlib import Path

from omegaconf import OmegaConf

from dpp.experiment.reporting import load_results
from dpp.experiment.tables import REPORTS


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("reports", nargs="*", help=f"any of {sorted(REPORTS)}")
    args = parser.parse_args()
    results = load_results(args.run_dir)
    names = args.reports or list(OmegaConf.load(args.run_dir / "config_resolved.yaml").reports)
    for name in names:
        filename, build = REPORTS[name]
        (args.run_dir / filename).write_text(build(results))
        print(f"wrote {args.run_dir / filename}")


if __name__ == "__main__":
    main()
