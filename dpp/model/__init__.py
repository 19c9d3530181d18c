"""The fit of DPP and what every method's fit returns.

* :mod:`dpp.model.fitted`: :class:`FittedModel` (what every method returns), the status
  rules (:data:`STATUSES`, :func:`fit_status`) and :func:`finish_fit` (a finished fit's
  checks, status and report);
* :mod:`dpp.model.report`: :class:`FitReport`, the typed report of every method's fit, and
  its JSON form;
* :mod:`dpp.model.fit`: the DPP learner :func:`fit_dpp` (k-means centres, then coordinate
  ascent or a joint fit, early stopping).

The names below are those ``from dpp.model import ...`` gave before the split.
"""

import importlib as _importlib
import importlib.util as _util

from dpp.model.fit import MODES, fit_dpp
from dpp.model.fitted import (
    CLEAN_STATUSES,
    SATURATED_CODE,
    SATURATED_FRACTION,
    STATIONARY_GRAD_NORM,
    STATUSES,
    FittedModel,
    epoch_status,
    finish_fit,
    first_non_finite,
    fit_status,
    saturated_fraction,
)
from dpp.model.report import CSelection, EarlyStopping, FitReport, InfoLossFacts, PrototypeFacts
from dpp.selection import MIN_VALIDATION_SETS

__all__ = [
    "CSelection",
    "EarlyStopping",
    "FitReport",
    "InfoLossFacts",
    "PrototypeFacts",
    "CLEAN_STATUSES",
    "MIN_VALIDATION_SETS",
    "MODES",
    "epoch_status",
    "first_non_finite",
    "SATURATED_CODE",
    "SATURATED_FRACTION",
    "STATIONARY_GRAD_NORM",
    "STATUSES",
    "FittedModel",
    "finish_fit",
    "fit_dpp",
    "fit_status",
    "saturated_fraction",
]


def __getattr__(name: str):  # a submodule, imported on first use (``dpp.model.<module>``)
    if name.startswith("__") or _util.find_spec(f"{__name__}.{name}") is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return _importlib.import_module(f"{__name__}.{name}")
