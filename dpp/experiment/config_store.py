"""The Hydra ``model``, ``optimizer`` and ``kmeans`` defaults, built from the Python API.

One source of truth: the keys and default values of the ``model`` group are the constructor
parameters of the estimators of :mod:`dpp.estimators` (less those the experiment sets itself,
:data:`dpp.estimators.EXPERIMENT_PARAMS`); the ``optimizer`` group is
:data:`dpp.solvers.options.OPTIMIZERS`. :func:`register` stores them in Hydra's ``ConfigStore``
under ``dpp_defaults/``; the YAML files of ``configs/model`` and ``configs/optimizer`` include
them and only document the keys, so ``python experiments/run.py`` and ``DPPClassifier()`` fit
the same model.
"""

from __future__ import annotations

import inspect

from hydra.core.config_store import ConfigStore

from dpp.estimators import ESTIMATORS, EXPERIMENT_PARAMS, DPPClassifier
from dpp.params import check_table
from dpp.solvers.options import OPTIMIZERS, optimizer_options


def estimator_defaults(cls) -> dict:
    """``{parameter: default}`` of an estimator's constructor."""
    parameters = inspect.signature(cls.__init__).parameters
    return {name: p.default for name, p in parameters.items() if name != "self"}


def model_node(cls) -> dict:
    """The ``model`` config of an estimator: ``_target_`` and its method parameters."""
    defaults = estimator_defaults(cls)
    node = {"_target_": f"{cls.__module__}.{cls.__name__}"}
    node.update(
        {
            k: list(v) if isinstance(v, tuple) else v
            for k, v in defaults.items()
            if k not in EXPERIMENT_PARAMS
        }
    )
    return node


def kmeans_node() -> dict:
    """The root ``kmeans`` config: the estimators' k-means defaults."""
    defaults = estimator_defaults(DPPClassifier)
    return {
        "n_init": defaults["kmeans_n_init"],
        "max_iter": defaults["kmeans_max_iter"],
        "solver": defaults["kmeans_solver"],
    }


def check_defaults() -> None:
    """Checks every estimator's defaults and every optimizer's options against their rules.

    The same tables ``check_params`` reads (``PARAMETER_RULES``,
    :data:`dpp.solvers.options.OPTION_RULES`), so a default can never break its own rule.

    Raises:
        ValueError: naming the estimator or optimizer, the parameter and the value.
    """
    for cls in ESTIMATORS.values():
        try:
            check_table(estimator_defaults(cls), cls.PARAMETER_RULES)
        except ValueError as err:
            raise ValueError(f"{cls.__name__} default: {err}") from None
    for name in OPTIMIZERS:
        optimizer_options(name)


def register() -> None:
    """Stores the defaults in Hydra's ``ConfigStore`` (idempotent), once they are checked."""
    check_defaults()
    cs = ConfigStore.instance()
    for method, cls in ESTIMATORS.items():
        cs.store(group="dpp_defaults/model", name=method, node=model_node(cls))
    for name, options in OPTIMIZERS.items():
        cs.store(group="dpp_defaults/optimizer", name=name, node={"name": name, **options})
    cs.store(group="dpp_defaults/kmeans", name="default", node=kmeans_node())


register()
