"""Datasets.

Each loader returns a :class:`Dataset` (all sets plus names); Hydra picks the loader by
``dataset.loader._target_``.
"""

from dpp.datasets.base import Dataset, resolve_data_dir

__all__ = ["Dataset", "resolve_data_dir"]


def __getattr__(name: str):  # a submodule, imported on first use (``dpp.datasets.<module>``)
    from dpp import lazy_attribute

    return lazy_attribute(__name__, name)
