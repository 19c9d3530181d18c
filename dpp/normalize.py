"""Moved to :mod:`dpp.units` (kept for one release so that old imports keep working)."""

from dpp.units import IDENTITY, Normalizer

__all__ = ["IDENTITY", "Normalizer"]
