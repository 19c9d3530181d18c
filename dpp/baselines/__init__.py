"""Baselines that share DPP's classifier: the standard prototype (k-means) and InfoLoss."""

from dpp.baselines.standard import fit_standard

__all__ = ["fit_standard"]
