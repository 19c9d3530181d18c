"""Command-line entry point: ``python experiments/run.py [overrides]`` (Hydra).

Examples:
    python experiments/run.py                                  # synthetic, Figure 1
    python experiments/run.py model.n_prototypes=4 optimizer=lbfgs_jaxopt trials=3
    python experiments/run.py -m model.l2=1e-3,1e-2            # a sweep
    python experiments/run.py experiment=synthetic_large
    python experiments/run.py hydra.run.dir=outputs/mine resume=true   # continue a killed run
    python experiments/run.py -m hparams_search=optuna                 # TPE search (extra `sweep`)
    python experiments/run.py -m hydra/launcher=joblib model.l2=1e-3,1e-2   # parallel jobs

Returns (to Hydra's sweepers) the value of `validation.metric`, computed on the training sets
only, or None when it is null.

Exit codes: 0 complete; 1 failed (e.g. a non-finite result, named in the message); 2 a bad config
value or bad data (the message names the key or the file and line); 130/143 interrupted by
SIGINT/SIGTERM. User errors print one line, not a traceback. In a multirun (-m) a failing job
raises instead of exiting, so the sweeper records it as failed (Optuna goes on up to its
max_failure_rate; results.json of the job says why) and the other jobs still run.
"""

import logging
import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from dpp.errors import USER_ERRORS, NonFiniteResultError, RunInterrupted
from dpp.experiment.config_check import unknown_override_keys
from dpp.experiment.runner import run

logger = logging.getLogger("dpp")

EXIT_CODES = {"SIGINT": 130, "SIGTERM": 143}
CONFIGS = Path(__file__).resolve().parents[1] / "configs"
_started = False  # whether Hydra composed the config and called main


@hydra.main(config_path="../configs", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> float | None:
    global _started
    _started = True
    multirun = HydraConfig.get().mode == RunMode.MULTIRUN
    try:
        results = run(cfg)
    except USER_ERRORS as err:
        logger.error("%s", err)
        if multirun:
            raise
        sys.exit(2)
    except NonFiniteResultError as err:
        logger.error("run failed: %s", err)
        if multirun:
            raise
        sys.exit(1)
    except RunInterrupted as err:
        logger.error("run %s; results.json records status 'interrupted'", err)
        sys.exit(EXIT_CODES.get(err.signal_name, 1))
    return results.get("validation", {}).get("value")


if __name__ == "__main__":
    try:
        main()
    except SystemExit as stop:
        if stop.code == 1 and not _started:  # Hydra refused the overrides: say what was meant
            for message in unknown_override_keys(sys.argv[1:], CONFIGS):
                print(message, file=sys.stderr)
        raise
