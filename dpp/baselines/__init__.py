"""Baselines that share DPP's classifier: the standard prototype (k-means) and InfoLoss."""

from dpp.baselines.standard import fit_standard

__all__ = ["fit_standard"]


def __getattr__(name: str):  # a submodule, imported on first use (``dpp.baselines.<module>``)
    from dpp import lazy_attribute

    return lazy_attribute(__name__, name)
