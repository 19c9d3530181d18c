"""Baselines that share DPP's classifier: the standard prototype (k-means) and InfoLoss."""

import importlib as _importlib
import importlib.util as _util

from dpp.baselines.standard import fit_standard

__all__ = ["fit_standard"]


def __getattr__(name: str):  # a submodule, imported on first use (``dpp.baselines.<module>``)
    if name.startswith("__") or _util.find_spec(f"{__name__}.{name}") is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return _importlib.import_module(f"{__name__}.{name}")
