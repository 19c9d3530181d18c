"""Checks of single parameter values, shared by the estimators and the config checks.

Each check names the parameter, the rule and the value, e.g. ``n_prototypes must be a positive
integer, got 0``; :mod:`dpp.config_check` prefixes the config path (``model.n_prototypes ...``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np


def _is_int(value) -> bool:
    return isinstance(value, int | np.integer) and not isinstance(value, bool)


def _is_number(value) -> bool:
    return (
        isinstance(value, int | float | np.integer | np.floating) and not isinstance(value, bool)
    ) and math.isfinite(value)


def int_at_least(name: str, value, low: int) -> int:
    """``value`` as an integer ``>= low``.

    Raises:
        ValueError: naming ``name``, the rule and the value.
    """
    if not _is_int(value) or value < low:
        rule = "a positive integer" if low == 1 else f"an integer >= {low}"
        raise ValueError(f"{name} must be {rule}, got {value!r}")
    return int(value)


def number(name: str, value, low=None, high=None, low_open=False, high_open=False) -> float:
    """``value`` as a finite number within the given (closed or open) bounds.

    Raises:
        ValueError: naming ``name``, the rule and the value.
    """
    bad = not _is_number(value)
    if not bad and low is not None:
        bad = value <= low if low_open else value < low
    if not bad and high is not None:
        bad = value >= high if high_open else value > high
    if bad:
        lo = "" if low is None else f"{'>' if low_open else '>='} {low:g}"
        hi = "" if high is None else f"{'<' if high_open else '<='} {high:g}"
        rule = " and ".join(r for r in (lo, hi) if r)
        raise ValueError(
            f"{name} must be a finite number{' ' + rule if rule else ''}, got {value!r}"
        )
    return float(value)


def boolean(name: str, value) -> bool:
    """``value`` as a bool.

    Raises:
        ValueError: if it is not ``True`` or ``False``.
    """
    if not isinstance(value, bool | np.bool_):
        raise ValueError(f"{name} must be true or false, got {value!r}")
    return bool(value)


def choice(name: str, value, options: Iterable[str]) -> str:
    """``value`` as one of ``options``.

    Raises:
        ValueError: naming the options.
    """
    options = tuple(options)
    if value not in options:
        raise ValueError(f"{name} must be one of {', '.join(options)}; got {value!r}")
    return value
