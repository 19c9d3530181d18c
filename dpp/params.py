"""Parameter rules: checks of single values, and the declarative rules the tables are made of.

Each check names the parameter, the rule and the value, e.g. ``n_prototypes must be a positive
integer, got 0``; :mod:`dpp.experiment.config_check` prefixes the config path
(``model.n_prototypes ...``).

Every estimator declares its parameters' rules once, as a table ``{name: Rule}``
(``PARAMETER_RULES``, in the spirit of scikit-learn's), and so does the optimizer's
options table (:data:`dpp.solvers.options.OPTION_RULES`). The tables are read by the estimators'
``check_params`` (so by ``fit``, by the config check before a run and by the model-file loader)
and by the Hydra config store, which checks every default against them.
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


# ---------------------------------------------------------------------- declarative rules
class Rule:
    """A rule for one parameter's value: ``rule(name, value)`` returns it checked or raises."""

    def __call__(self, name: str, value):
        """``value`` checked (and converted: ``int``, ``float``, ``bool``).

        Raises:
            ValueError: naming ``name``, the rule and the value.
        """
        return self._check(name, value)

    def _check(self, name: str, value):
        raise NotImplementedError


class Int(Rule):
    """An integer ``>= low`` (:func:`int_at_least`)."""

    def __init__(self, low: int):
        self.low = low

    def _check(self, name, value):
        return int_at_least(name, value, self.low)


class Real(Rule):
    """A finite number within bounds (:func:`number`)."""

    def __init__(self, low=None, high=None, low_open=False, high_open=False):
        self.bounds = {"low": low, "high": high, "low_open": low_open, "high_open": high_open}

    def _check(self, name, value):
        return number(name, value, **self.bounds)


class Reals(Rule):
    """A finite number within bounds, or a non-empty sequence of them (candidates to choose from).

    Returns a ``float`` for a number, a ``tuple`` of floats for a sequence (one number in a
    sequence stays a tuple of one).
    """

    def __init__(self, low=None, high=None, low_open=False, high_open=False):
        self.one = Real(low, high, low_open, high_open)

    def _check(self, name, value):
        if isinstance(value, list | tuple):
            if not value:
                raise ValueError(f"{name} must be a number or a non-empty list of numbers; got []")
            return tuple(self.one(f"{name}[{i}]", v) for i, v in enumerate(value))
        return self.one(name, value)


class Bool(Rule):
    """``True`` or ``False`` (:func:`boolean`)."""

    def _check(self, name, value):
        return boolean(name, value)


class Choice(Rule):
    """One of ``options`` (:func:`choice`)."""

    def __init__(self, options: Iterable[str]):
        self.options = tuple(options)

    def _check(self, name, value):
        return choice(name, value, self.options)


class Optional(Rule):
    """``None``, or a value that obeys ``rule``."""

    def __init__(self, rule: Rule):
        self.rule = rule

    def _check(self, name, value):
        return None if value is None else self.rule(name, value)


class Literal(Rule):
    """Exactly ``literal``, or a value that obeys ``rule`` (e.g. ``devices``: ``"all"`` or N)."""

    def __init__(self, literal, rule: Rule):
        self.literal, self.rule = literal, rule

    def _check(self, name, value):
        if isinstance(value, type(self.literal)) and value == self.literal:
            return value
        return self.rule(name, value)


class Widths(Rule):
    """A non-empty list of positive integers: the layer widths of an embedding network."""

    def _check(self, name, value):
        widths = list(value) if isinstance(value, list | tuple) else None
        if not widths or not all(_is_int(w) and w >= 1 for w in widths):
            raise ValueError(
                f"{name} must be a non-empty list of positive integer layer widths, "
                f"e.g. (256, 128, 64); got {value!r}"
            )
        return tuple(int(w) for w in widths)


def check_table(values, rules: dict[str, Rule]) -> dict:
    """Checks every value named in ``rules``: the table of an estimator or of the options.

    Args:
        values: an object with the parameters as attributes, or a mapping.
        rules: ``{name: Rule}``, checked in order (the first bad value raises).

    Returns:
        ``{name: checked value}``.

    Raises:
        ValueError: naming the parameter, the rule and the value.
    """
    get = values.get if isinstance(values, dict) else lambda name: getattr(values, name)
    return {name: rule(name, get(name)) for name, rule in rules.items()}
