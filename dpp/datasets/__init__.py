"""Datasets.

Each loader returns a :class:`Dataset` (all sets plus names); Hydra picks the loader by
``dataset.loader._target_``.
"""

import importlib as _importlib
import importlib.util as _util

from dpp.datasets.base import Dataset, resolve_data_dir

__all__ = ["Dataset", "resolve_data_dir"]


def __getattr__(name: str):  # a submodule, imported on first use (``dpp.datasets.<module>``)
    if name.startswith("__") or _util.find_spec(f"{__name__}.{name}") is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return _importlib.import_module(f"{__name__}.{name}")
