"""The experiment layer: Hydra configs to typed settings, trials, records and outputs.

Above the estimators (it fits them as a Python user does; nothing below imports it):

* :mod:`~dpp.experiment.runner`: ``run(cfg)``, what ``experiments/run.py`` calls; the outputs;
* :mod:`~dpp.experiment.settings`: the composed config turned into estimators and settings;
* :mod:`~dpp.experiment.config_store` and :mod:`~dpp.experiment.config_check`: Hydra's
  ``model``/``optimizer`` defaults from the Python API, and every value checked before data;
* :mod:`~dpp.experiment.protocol`: one trial (split, preprocess, choose lambda, fit, evaluate);
* :mod:`~dpp.experiment.splits`: train/test splits of sets;
* :mod:`~dpp.experiment.run_folder`, :mod:`~dpp.experiment.reporting`,
  :mod:`~dpp.experiment.tables`, :mod:`~dpp.experiment.plots`,
  :mod:`~dpp.experiment.discovery`: the run folder and what is written into it;
* :mod:`~dpp.experiment.sweep`, :mod:`~dpp.experiment.optuna_sweeper`,
  :mod:`~dpp.experiment.tracking`: multiruns, persistent Optuna studies and MLflow;
* :mod:`~dpp.experiment.compilation`: JAX's persistent compilation cache and a compile counter.

Submodules are imported on first use: ``import dpp.experiment`` loads neither Hydra nor
matplotlib.
"""

from __future__ import annotations

import importlib as _importlib
import importlib.util as _util


def __getattr__(name: str):
    if name == "run":  # the runner's entry point, as ``dpp.experiment.run`` was before
        return _importlib.import_module(f"{__name__}.runner").run
    if name.startswith("__") or _util.find_spec(f"{__name__}.{name}") is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return _importlib.import_module(f"{__name__}.{name}")
