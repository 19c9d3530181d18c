"""Checks every value of a composed run config before any data is read.

Each rule names the key, what it must be and what it got, e.g.
``model.n_prototypes must be a positive integer, got 0``. :func:`check_config` raises the first
:class:`~dpp.errors.ConfigError` found; the rules mirror the constraints of the settings
dataclasses and loaders, so a bad value fails in a second, not after the data have loaded.
"""

from __future__ import annotations

import difflib
import importlib.util
from collections.abc import Iterable, Sequence
from pathlib import Path

from omegaconf import DictConfig, ListConfig, OmegaConf

from dpp import params
from dpp.errors import ConfigError
from dpp.estimators import DPPClassifier
from dpp.experiment.settings import VALIDATION_METRICS
from dpp.experiment.splits import SPLIT_KINDS
from dpp.pooling import POOLINGS
from dpp.solvers.options import OPTIMIZERS, OPTION_RULES, optimizer_options

L2_SELECTION_KINDS = ("fixed", "cv", "dpp_cv")


def _get(cfg: DictConfig, key: str):
    if OmegaConf.select(cfg, key, default="__missing__") == "__missing__":
        raise ConfigError(f"{key} is missing from the config")
    return OmegaConf.select(cfg, key)


def _missing_keys(cfg, prefix: str = "") -> list[str]:
    """Keys holding ``???`` (not interpolations, which are not resolved here)."""
    out = []
    for key in cfg.keys() if isinstance(cfg, DictConfig) else range(len(cfg)):
        name = f"{prefix}{key}"
        if OmegaConf.is_interpolation(cfg, key):
            continue
        if OmegaConf.is_missing(cfg, key):
            out.append(name)
            continue
        # OmegaConf's unresolved node: no public equivalent (cfg[key] resolves interpolations)
        child = cfg._get_node(key)
        if isinstance(child, DictConfig | ListConfig):
            out += _missing_keys(child, name + ".")
    return out


def int_at_least(cfg: DictConfig, key: str, low: int) -> int:
    """``cfg[key]`` as an integer ``>= low`` (:func:`dpp.params.int_at_least`)."""
    return _as_config_error(params.int_at_least, key, _get(cfg, key), low)


def number(cfg: DictConfig, key: str, low=None, high=None, low_open=False, high_open=False):
    """``cfg[key]`` as a finite number in the given bounds (:func:`dpp.params.number`)."""
    return _as_config_error(params.number, key, _get(cfg, key), low, high, low_open, high_open)


def boolean(cfg: DictConfig, key: str) -> bool:
    """``cfg[key]`` as a bool."""
    return _as_config_error(params.boolean, key, _get(cfg, key))


def choice(cfg: DictConfig, key: str, options: Iterable[str]) -> str:
    """``cfg[key]`` as one of ``options``."""
    return _as_config_error(params.choice, key, _get(cfg, key), options)


def by_rule(cfg: DictConfig, key: str, rule: params.Rule):
    """``cfg[key]`` checked by a rule of an estimator's table (one home for the rule)."""
    return _as_config_error(rule, key, _get(cfg, key))


#: The estimators' table, whose rules the run-wide keys they feed share.
_RULES = DPPClassifier.PARAMETER_RULES


def _as_config_error(check, *args):
    try:
        return check(*args)
    except ValueError as err:
        raise ConfigError(str(err)) from None


def _method(cfg: DictConfig, prefix: str) -> None:
    """Instantiates a method config and runs the estimator's own parameter checks."""
    import hydra

    target = _get(cfg, f"{prefix}._target_")
    try:
        cls = hydra.utils.get_class(target)
    except Exception:  # hydra raises ImportError or ValueError wrapped in its own types
        raise ConfigError(f"{prefix}._target_: no estimator class {target!r}") from None
    if not hasattr(cls, "check_params") or not getattr(cls, "method", ""):
        raise ConfigError(f"{prefix}._target_: {target!r} is not a dpp estimator")
    node = OmegaConf.to_container(_get(cfg, prefix), resolve=True)
    node.pop("_target_")
    try:
        estimator = cls(**node)
        if "optimizer" in estimator.get_params():  # the run's (an embedding needs adam)
            estimator.set_params(optimizer=_get(cfg, "optimizer.name"))
        estimator.check_params()
    except TypeError as err:
        known = cls().get_params()
        unknown = sorted(set(node) - set(known))
        if unknown:  # a mistyped +key: name it and its near neighbours
            raise ConfigError(
                f"{prefix}.{unknown[0]}: {cls.__name__} has no parameter {unknown[0]!r}"
                + did_you_mean(unknown[0], known, f"{prefix}.")
            ) from None
        raise ConfigError(f"{prefix}: {err}") from None
    except ValueError as err:
        raise ConfigError(f"{prefix}.{err}") from None


def did_you_mean(key: str, options: Iterable[str], prefix: str = "") -> str:
    """``"; did you mean prefix.option?"`` for the options within two edits of ``key``, else ``""``.

    Close means a similarity ratio of at least 0.8 (:func:`difflib.get_close_matches`), or an
    edit distance of at most 2 for short names: ``n_prototype`` finds ``n_prototypes``,
    ``l3`` finds ``l2``.
    """
    edits = {str(o): _edits(key, str(o)) for o in options}
    close = {o for o, e in edits.items() if e <= 2 and e < max(len(key), 2)}
    close |= set(difflib.get_close_matches(key, list(edits), n=3, cutoff=0.8))
    close = sorted(close, key=lambda o: (edits[o], o))
    if not close:
        return ""
    return "; did you mean " + " or ".join(f"{prefix}{o}" for o in close[:3]) + "?"


def _edits(a: str, b: str) -> int:
    """Levenshtein distance (insertions, deletions, substitutions) between two short names."""
    row = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        prev, row[0] = row[0], i
        for j, cb in enumerate(b, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (ca != cb))
    return row[-1]


def unknown_override_keys(overrides: Sequence[str], config_dir: str | Path) -> list[str]:
    """One message for each ``key=value`` override whose key the composed config lacks.

    The config is composed with the overrides that pick config groups (``experiment=...``,
    ``model=...``), so the keys are those of the run asked for; ``+key``, ``~key``, ``hydra.``
    keys and flags are left to Hydra. Each message names the key and, where a key within two
    edits exists beside it, suggests it (``model.n_prototype`` -> ``model.n_prototypes``). Used
    after Hydra has refused an override, to say what was meant.
    """
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    import dpp.experiment.config_store  # noqa: F401 (the estimators' defaults, as a run has them)

    config_dir = Path(config_dir).resolve()
    pairs = [a.split("=", 1) for a in overrides if "=" in a and not a.startswith(("-", "+", "~"))]
    picks_group = {k: "/" in k or "@" in k or (config_dir / k).is_dir() for k, _ in pairs}
    groups = [f"{k}={v}" for k, v in pairs if picks_group[k]]
    keys = [k for k, _ in pairs if not picks_group[k] and not k.startswith("hydra.")]
    if not keys:
        return []
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(config_dir), version_base="1.3"):
            cfg = compose("config", overrides=[g for g in groups if not g.startswith("hydra/")])
    except Exception:  # a bad group choice: Hydra's own message said so
        return []
    finally:
        GlobalHydra.instance().clear()
    messages = []
    for key in keys:
        if OmegaConf.select(cfg, key, default="__missing__") != "__missing__":
            continue
        parent, _, last = key.rpartition(".")
        node = OmegaConf.select(cfg, parent) if parent else cfg
        options = list(node.keys()) if isinstance(node, DictConfig) else []
        hint = did_you_mean(last, options, f"{parent}." if parent else "")
        messages.append(f"{key} is not a key of this run's config{hint}")
    return messages


def check_config(cfg: DictConfig, figures: Iterable[str], reports) -> None:
    """Validates a composed run config; raises on the first invalid value.

    Method configs are checked by their estimator's ``check_params`` (one set of rules for the
    Python API and the command line).

    Args:
        cfg: the root config (``configs/config.yaml`` with overrides).
        figures: known figure names.
        reports: known report names.

    Raises:
        ConfigError: naming the key, the rule and the value.
    """
    figures, reports = tuple(figures), tuple(reports)
    missing = sorted(_missing_keys(cfg))
    if missing:
        raise ConfigError(
            f"{', '.join(missing)} must be set (e.g. python experiments/run.py {missing[0]}=...)"
        )
    for check in (_run_keys, _optimizer, _selection, _validation, _dataset, _tracking):
        check(cfg)
    for i, name in enumerate(_get(cfg, "figures") or []):
        if name not in figures:
            raise ConfigError(f"figures[{i}] must be one of {', '.join(figures)}; got {name!r}")
    for i, name in enumerate(_get(cfg, "reports") or []):
        if name not in reports:
            raise ConfigError(f"reports[{i}] must be one of {', '.join(reports)}; got {name!r}")


def _run_keys(cfg: DictConfig) -> None:
    """``seed``, ``trials``, ``verbose``, ``devices``, ``resume`` and the method configs."""
    int_at_least(cfg, "seed", 0)
    int_at_least(cfg, "trials", 1)
    boolean(cfg, "verbose")
    by_rule(cfg, "devices", _RULES["devices"])
    n_jobs = _get(cfg, "n_jobs")
    if n_jobs is not None and (
        isinstance(n_jobs, bool) or not isinstance(n_jobs, int) or n_jobs == 0
    ):
        raise ConfigError(
            f"n_jobs must be null or an int other than 0 (-1: every core), got {n_jobs!r}"
        )
    boolean(cfg, "resume")
    _method(cfg, "model")
    for name in _get(cfg, "baselines") or {}:
        _method(cfg, f"baselines.{name}")


def _optimizer(cfg: DictConfig) -> None:
    """The ``optimizer`` group (through :func:`dpp.solvers.options.optimizer_options` too)."""
    opt = choice(cfg, "optimizer.name", OPTIMIZERS)
    if opt == "adam" and _get(cfg, "devices") != 1:
        raise ConfigError(
            f"devices={_get(cfg, 'devices')} needs a full-batch optimizer; optimizer=adam "
            "samples mini-batches on one device"
        )
    options = OmegaConf.to_container(_get(cfg, "optimizer"), resolve=True)
    try:
        optimizer_options(options.pop("name"), options)
    except ValueError as err:  # an option's rule names the option: optimizer.<option> ...
        prefix = "optimizer." if str(err).split(" ")[0] in OPTION_RULES else "optimizer: "
        raise ConfigError(f"{prefix}{err}") from None


def _selection(cfg: DictConfig) -> None:
    """``kmeans`` and ``l2_selection``."""
    by_rule(cfg, "kmeans.n_init", _RULES["kmeans_n_init"])
    by_rule(cfg, "kmeans.max_iter", _RULES["kmeans_max_iter"])
    by_rule(cfg, "kmeans.solver", _RULES["kmeans_solver"])
    choice(cfg, "l2_selection.kind", L2_SELECTION_KINDS)
    grid = _get(cfg, "l2_selection.grid")
    if not isinstance(grid, ListConfig | list) or not grid:
        raise ConfigError(f"l2_selection.grid must be a non-empty list, got {grid!r}")
    for i in range(len(grid)):
        number(cfg, f"l2_selection.grid[{i}]", low=0)
    int_at_least(cfg, "l2_selection.folds", 2)
    int_at_least(cfg, "l2_selection.max_extensions", 0)
    boolean(cfg, "l2_selection.select_rounds")
    if _get(cfg, "l2_selection.n_prototypes_grid") is not None:
        ks = _get(cfg, "l2_selection.n_prototypes_grid")
        if not isinstance(ks, ListConfig | list) or not ks:
            raise ConfigError(
                f"l2_selection.n_prototypes_grid must be a non-empty list, got {ks!r}"
            )
        for i in range(len(ks)):
            int_at_least(cfg, f"l2_selection.n_prototypes_grid[{i}]", 1)
    pooling = _get(cfg, "l2_selection.pooling_grid")
    if pooling is not None:
        if not isinstance(pooling, list | ListConfig) or not list(pooling):
            raise ConfigError(
                f"l2_selection.pooling_grid must be a non-empty list, got {pooling!r}"
            )
        for i in range(len(pooling)):
            choice(cfg, f"l2_selection.pooling_grid[{i}]", POOLINGS)
    boolean(cfg, "l2_selection.group_folds")


def _validation(cfg: DictConfig) -> None:
    """``validation.metric`` and ``validation.fraction``."""
    if _get(cfg, "validation.metric") is not None:
        metric = choice(cfg, "validation.metric", VALIDATION_METRICS)
        if metric == "cv_score" and cfg.l2_selection.kind != "dpp_cv":
            raise ConfigError(
                "validation.metric=cv_score needs l2_selection.kind=dpp_cv (the CV it reports), "
                f"got l2_selection.kind={cfg.l2_selection.kind}"
            )
    number(cfg, "validation.fraction", low=0, high=1, low_open=True, high_open=True)


def _dataset(cfg: DictConfig) -> None:
    """The ``dataset`` group's split and preprocessing."""
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


def _tracking(cfg: DictConfig) -> None:
    """The optional ``tracking`` group (MLflow must be importable)."""
    if cfg.get("tracking") is not None:
        choice(cfg, "tracking.kind", ("mlflow",))
        if importlib.util.find_spec("mlflow") is None:  # refused before the run folder is written
            raise ConfigError("tracking=mlflow needs MLflow: pip install -e '.[tracking]'")
        for key in ("tracking.uri", "tracking.experiment"):
            if not isinstance(_get(cfg, key), str) or not _get(cfg, key):
                raise ConfigError(f"{key} must be a non-empty string, got {_get(cfg, key)!r}")
