"""Solvers: full-batch L-BFGS/BFGS backends, mini-batch Adam, coordinate ascent."""

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
    from dpp import lazy_attribute

    return lazy_attribute(__name__, name)
