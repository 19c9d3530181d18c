"""Config to settings: the one place that turns a composed Hydra config into typed objects.

Methods are registered by ``_target_``: the ``model`` config and every ``baselines.<name>``
config instantiate an estimator of :mod:`dpp.estimators` (or any class with the same
interface), with the run-wide parameters (optimizer, k-means, verbosity) set from the root
config. A new method is a new class and a config file; nothing here dispatches on its type.
"""

from __future__ import annotations

import dataclasses

import hydra
from omegaconf import DictConfig, OmegaConf

#: Metrics ``experiments/run.py`` can return for a sweeper to maximise (``validation.metric``):
#: a held-out part of each trial's training sets, or the best cross-validation score.
VALIDATION_METRICS = ("validation_log_likelihood", "validation_accuracy", "cv_score")


@dataclasses.dataclass(frozen=True)
class TrialSettings:
    """Everything a trial needs, read from the config once.

    Attributes:
        seed: base seed; trial ``t`` uses ``seed + t``.
        split: the ``dataset.split`` keys (kind, fractions, block sizes ...).
        standardize: standardise the vectors with training statistics.
        pca_components: optional PCA dimension.
        l2_selection: ``kind`` (fixed, cv, dpp_cv), ``grid``, ``folds``, ``group_folds``,
            ``n_prototypes_grid``.
        methods: unfitted estimators by method name, the primary model first.
        validation: ``metric`` (one of :data:`VALIDATION_METRICS` or ``None``) and ``fraction``
            (the held-out share of the training sets).
        n_jobs: fits at once in a selection (``DPPClassifierCV(n_jobs)``); no result depends
            on it.
    """

    seed: int
    split: dict
    standardize: bool
    pca_components: int | None
    l2_selection: dict
    methods: dict  # name -> unfitted scikit-learn estimator
    validation: dict = dataclasses.field(default_factory=lambda: {"metric": None})
    n_jobs: int | None = None


def make_estimator(method_cfg: DictConfig, cfg: DictConfig):
    """Instantiates a method config (``_target_``) with the run-wide parameters it takes.

    The parameters are checked by ``check_config`` before the run and by ``fit``.
    """
    estimator = hydra.utils.instantiate(method_cfg, _convert_="all")
    optimizer = OmegaConf.to_container(cfg.optimizer, resolve=True)
    run_wide = {
        "optimizer": optimizer.pop("name"),
        "optimizer_options": optimizer,
        "kmeans_n_init": int(cfg.kmeans.n_init),
        "kmeans_max_iter": int(cfg.kmeans.max_iter),
        "kmeans_solver": str(cfg.kmeans.solver),
        "verbose": bool(cfg.verbose),
        "devices": cfg.devices,
        # the dataset's preprocessing; a trial fits it once and hands it over as ``preprocess``
        "standardize": bool(cfg.dataset.standardize),
        "pca_components": cfg.dataset.pca_components,
    }
    if getattr(type(estimator), "own_units", False):  # the neural baselines standardise anyway
        del run_wide["standardize"]
    params = estimator.get_params()
    estimator.set_params(**{k: v for k, v in run_wide.items() if k in params})
    return estimator


def method_configs(cfg: DictConfig) -> dict[str, DictConfig]:
    """The primary model and the baselines by method name (a baseline equal to it is skipped).

    The name is the estimator class's ``method`` (``dpp``, ``standard``, ...) for the model and
    the key under ``baselines`` for a baseline.
    """
    primary = hydra.utils.get_class(cfg.model._target_).method
    methods = {primary: cfg.model}
    for name, baseline in (cfg.baselines or {}).items():
        if hydra.utils.get_class(baseline._target_).method != primary:
            methods.setdefault(name, baseline)
    return methods


def trial_settings(cfg: DictConfig) -> TrialSettings:
    """The :class:`TrialSettings` of a composed run config (checked by ``check_config``)."""
    return TrialSettings(
        seed=int(cfg.seed),
        split=OmegaConf.to_container(cfg.dataset.split, resolve=True),
        standardize=bool(cfg.dataset.standardize),
        pca_components=cfg.dataset.pca_components,
        l2_selection=OmegaConf.to_container(cfg.l2_selection, resolve=True),
        methods={name: make_estimator(m, cfg) for name, m in method_configs(cfg).items()},
        validation=OmegaConf.to_container(cfg.validation, resolve=True),
        n_jobs=cfg.get("n_jobs"),
    )
