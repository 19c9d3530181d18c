"""Command-line entry point: ``python experiments/run.py [overrides]`` (Hydra).

Examples:
    python experiments/run.py                                  # synthetic, Figure 1
    python experiments/run.py model.K=4 optimizer=lbfgs_jaxopt trials=3
    python experiments/run.py -m model.l2=1e-3,1e-2            # a sweep
    python experiments/run.py experiment=synthetic_large
"""

import hydra
from omegaconf import DictConfig

from dpp.experiment import run


@hydra.main(config_path="../configs", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> None:
    run(cfg)


if __name__ == "__main__":
    main()
