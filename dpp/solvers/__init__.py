"""Solvers: full-batch L-BFGS/BFGS backends, mini-batch Adam, coordinate ascent."""

import importlib as _importlib
import importlib.util as _util

from dpp.solvers.coordinate_ascent import (
    FitResult,
    FitSettings,
    coordinate_ascent,
    fit_joint,
    prototype_step,
    theta_step,
)
from dpp.solvers.lbfgs import LBFGSSettings, MinimizeResult, minimize
from dpp.solvers.minibatch import AdamSettings, minimize_minibatch

__all__ = [
    "AdamSettings",
    "FitResult",
    "FitSettings",
    "LBFGSSettings",
    "MinimizeResult",
    "coordinate_ascent",
    "fit_joint",
    "minimize",
    "minimize_minibatch",
    "prototype_step",
    "theta_step",
]


def __getattr__(name: str):  # a submodule, imported on first use (``dpp.solvers.<module>``)
    if name.startswith("__") or _util.find_spec(f"{__name__}.{name}") is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return _importlib.import_module(f"{__name__}.{name}")
