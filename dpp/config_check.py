"""Checks every value of a composed run config before any data is read.

Each rule names the key, what it must be and what it got, e.g.
``model.K must be a positive integer, got 0``. :func:`check_config` raises the first
:class:`~dpp.errors.ConfigError` found; the rules mirror the constraints of the settings
dataclasses and loaders, so a bad value fails in a second, not after the data have loaded.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from omegaconf import DictConfig, ListConfig, OmegaConf

from dpp.errors import ConfigError
from dpp.likelihood import BetaPrior
from dpp.model import MODES
from dpp.solvers.lbfgs import BACKENDS
from dpp.splits import SPLIT_KINDS

OPTIMIZERS = (*BACKENDS, "adam")
L2_SELECTION_KINDS = ("fixed", "cv")


def _get(cfg: DictConfig, key: str):
    if OmegaConf.select(cfg, key, default="__missing__") == "__missing__":
        raise ConfigError(f"{key} is missing from the config")
    return OmegaConf.select(cfg, key)


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value) -> bool:
    return (isinstance(value, int | float) and not isinstance(value, bool)) and math.isfinite(value)


def int_at_least(cfg: DictConfig, key: str, low: int) -> int:
    """``cfg[key]`` as an integer ``>= low``."""
    value = _get(cfg, key)
    if not _is_int(value) or value < low:
        rule = "a positive integer" if low == 1 else f"an integer >= {low}"
        raise ConfigError(f"{key} must be {rule}, got {value!r}")
    return value


def number(cfg: DictConfig, key: str, low=None, high=None, low_open=False, high_open=False):
    """``cfg[key]`` as a finite number in the given (closed or open) bounds."""
    value = _get(cfg, key)
    bad = not _is_number(value)
    if not bad and low is not None:
        bad = value <= low if low_open else value < low
    if not bad and high is not None:
        bad = value >= high if high_open else value > high
    if bad:
        lo = "" if low is None else f"{'>' if low_open else '>='} {low:g}"
        hi = "" if high is None else f"{'<' if high_open else '<='} {high:g}"
        rule = " and ".join(r for r in (lo, hi) if r)
        raise ConfigError(
            f"{key} must be a finite number{' ' + rule if rule else ''}, got {value!r}"
        )
    return float(value)


def boolean(cfg: DictConfig, key: str) -> bool:
    """``cfg[key]`` as a bool."""
    value = _get(cfg, key)
    if not isinstance(value, bool):
        raise ConfigError(f"{key} must be true or false, got {value!r}")
    return value


def choice(cfg: DictConfig, key: str, options: Iterable[str]) -> str:
    """``cfg[key]`` as one of ``options``."""
    value = _get(cfg, key)
    options = tuple(options)
    if value not in options:
        raise ConfigError(f"{key} must be one of {', '.join(options)}; got {value!r}")
    return value


def _method(cfg: DictConfig, prefix: str, methods: Iterable[str]) -> None:
    name = choice(cfg, f"{prefix}.name", methods)
    int_at_least(cfg, f"{prefix}.K", 1)
    number(cfg, f"{prefix}.l2", low=0)
    if name == "dpp":
        choice(cfg, f"{prefix}.mode", MODES)
        int_at_least(cfg, f"{prefix}.max_rounds", 0)
        number(cfg, f"{prefix}.tol", low=0)
        number(cfg, f"{prefix}.beta_step_limit", low=1, low_open=True)
        number(cfg, f"{prefix}.validation_fraction", low=0, high=1, high_open=True)
        int_at_least(cfg, f"{prefix}.patience", 1)
        number(cfg, f"{prefix}.beta_scale", low=0, low_open=True)
        boolean(cfg, f"{prefix}.per_prototype_beta")
        kind = choice(cfg, f"{prefix}.beta_prior.kind", ("none", "lognormal", "gamma"))
        loc = number(cfg, f"{prefix}.beta_prior.loc")
        scale = number(cfg, f"{prefix}.beta_prior.scale", low=0, low_open=True)
        try:
            BetaPrior(kind, loc, scale)
        except ValueError as err:
            raise ConfigError(f"{prefix}.beta_prior: {err}") from None
    elif name == "infoloss":
        number(cfg, f"{prefix}.beta_scale", low=0, low_open=True)
        number(cfg, f"{prefix}.gamma_scale", low=0)
        int_at_least(cfg, f"{prefix}.max_rounds", 0)
        number(cfg, f"{prefix}.tol", low=0)
        int_at_least(cfg, f"{prefix}.centre_max_iter", 1)


def check_config(cfg: DictConfig, methods: Iterable[str], figures: Iterable[str], reports) -> None:
    """Validates a composed run config; raises on the first invalid value.

    Args:
        cfg: the root config (``configs/config.yaml`` with overrides).
        methods: known method names (``model.name`` values).
        figures: known figure names.
        reports: known report names.

    Raises:
        ConfigError: naming the key, the rule and the value.
    """
    methods, figures, reports = tuple(methods), tuple(figures), tuple(reports)
    int_at_least(cfg, "seed", 0)
    int_at_least(cfg, "trials", 1)
    boolean(cfg, "verbose")
    boolean(cfg, "resume")
    _method(cfg, "model", methods)
    for name in _get(cfg, "baselines") or {}:
        _method(cfg, f"baselines.{name}", methods)
    opt = choice(cfg, "optimizer.name", OPTIMIZERS)
    int_at_least(cfg, "optimizer.theta_max_iter", 1)
    number(cfg, "optimizer.tol", low=0)
    int_at_least(cfg, "optimizer.memory_size", 1)
    int_at_least(cfg, "optimizer.max_linesearch_steps", 1)
    if opt == "adam":
        number(cfg, "optimizer.learning_rate", low=0, low_open=True)
        int_at_least(cfg, "optimizer.batch_size", 1)
        int_at_least(cfg, "optimizer.epochs", 1)
    else:
        int_at_least(cfg, "optimizer.max_iter", 1)
    int_at_least(cfg, "kmeans.n_init", 1)
    int_at_least(cfg, "kmeans.max_iter", 1)
    choice(cfg, "l2_selection.kind", L2_SELECTION_KINDS)
    grid = _get(cfg, "l2_selection.grid")
    if not isinstance(grid, ListConfig | list) or not grid:
        raise ConfigError(f"l2_selection.grid must be a non-empty list, got {grid!r}")
    for i in range(len(grid)):
        number(cfg, f"l2_selection.grid[{i}]", low=0)
    int_at_least(cfg, "l2_selection.folds", 2)
    boolean(cfg, "l2_selection.group_folds")
    split = choice(cfg, "dataset.split.kind", SPLIT_KINDS)
    if split == "spatial_blocks":
        int_at_least(cfg, "dataset.split.train_per_class", 1)
        int_at_least(cfg, "dataset.split.block_size", 1)
        int_at_least(cfg, "dataset.split.buffer", 0)
    elif split == "per_class":
        int_at_least(cfg, "dataset.split.train_per_class", 1)
    else:
        number(cfg, "dataset.split.train_fraction", low=0, high=1, low_open=True, high_open=True)
    if _get(cfg, "dataset.split.subsample") is not None:
        int_at_least(cfg, "dataset.split.subsample", 2)
    boolean(cfg, "dataset.standardize")
    if _get(cfg, "dataset.pca_components") is not None:
        int_at_least(cfg, "dataset.pca_components", 1)
    for i, name in enumerate(_get(cfg, "figures") or []):
        if name not in figures:
            raise ConfigError(f"figures[{i}] must be one of {', '.join(figures)}; got {name!r}")
    for i, name in enumerate(_get(cfg, "reports") or []):
        if name not in reports:
            raise ConfigError(f"reports[{i}] must be one of {', '.join(reports)}; got {name!r}")
