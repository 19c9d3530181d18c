"""Optimizers by name and their default options: the one source of the solver defaults.

The estimators (:mod:`dpp.estimators`) take ``optimizer`` (a name of :data:`OPTIMIZERS`) and
``optimizer_options`` (a dict overriding some of its defaults); the Hydra ``optimizer`` group is
built from this table (:mod:`dpp.experiment.config_store`). Options:

* ``max_iter``: iterations of each (mu, beta)-step, or of each round of the joint fit (L-BFGS/BFGS);
* ``theta_max_iter``: iterations of each convex Theta-step (always full-batch L-BFGS);
* ``tol``: stop a solver when ``||grad(-L / sum w)|| < tol``;
* ``memory_size``: L-BFGS history (unused by BFGS);
* ``max_linesearch_steps``: zoom line-search evaluations per iteration;
* Adam only: ``learning_rate``, ``batch_size`` (sets per batch), ``epochs`` (passes per step).
"""

from __future__ import annotations

from dpp import params as check
from dpp.solvers.lbfgs import BACKENDS, LBFGSSettings
from dpp.solvers.minibatch import AdamSettings

_FULL_BATCH = {
    "max_iter": 50,
    "theta_max_iter": 500,
    "tol": 1e-6,
    "memory_size": 10,
    "max_linesearch_steps": 20,
}

#: The optimizer of the estimators and of the CLI unless another is chosen.
DEFAULT_OPTIMIZER = "lbfgs_optax"

#: Default options of every optimizer, by name. ``lbfgs_optax`` is the default optimizer.
OPTIMIZERS: dict[str, dict] = {
    **{backend: dict(_FULL_BATCH) for backend in BACKENDS},
    "adam": {
        "learning_rate": 1e-2,
        "batch_size": 64,
        "epochs": 5,
        **{k: v for k, v in _FULL_BATCH.items() if k != "max_iter"},
    },
}


#: The rule of every option (read by :func:`optimizer_options`, so by the estimators'
#: ``check_params``, the config check and the Hydra config store's check of the defaults).
#: Each is the rule of the settings field it fills (``theta_max_iter``: the Theta-step's
#: ``max_iter``).
OPTION_RULES: dict[str, check.Rule] = {
    **LBFGSSettings.RULES,
    "theta_max_iter": LBFGSSettings.RULES["max_iter"],
    **AdamSettings.RULES,
}


def optimizer_options(name: str, options: dict | None = None) -> dict:
    """The options of optimizer ``name``: its defaults updated by ``options``, checked.

    Raises:
        ValueError: an unknown optimizer or an option it does not have (naming both), or a
            value that breaks its rule in :data:`OPTION_RULES` (naming the option).
    """
    if name not in OPTIMIZERS:
        raise ValueError(f"unknown optimizer {name!r}; choose from {', '.join(OPTIMIZERS)}")
    merged = dict(OPTIMIZERS[name])
    unknown = sorted(set(options or {}) - set(merged) - {"name"})
    if unknown:
        raise ValueError(
            f"optimizer {name} has no option {', '.join(unknown)}; its options are "
            f"{', '.join(merged)}"
        )
    merged.update({k: v for k, v in (options or {}).items() if k != "name"})
    return check.check_table(merged, {k: OPTION_RULES[k] for k in merged})


def theta_solver(name: str, options: dict | None = None) -> LBFGSSettings:
    """Full-batch solver of the convex Theta-steps (optax L-BFGS when ``name`` is ``adam``).

    Raises:
        ValueError: as :func:`optimizer_options`, or for invalid values.
    """
    o = optimizer_options(name, options)
    return LBFGSSettings(
        backend="lbfgs_optax" if name == "adam" else name,
        max_iter=int(o["theta_max_iter"]),
        tol=float(o["tol"]),
        memory_size=int(o["memory_size"]),
        max_linesearch_steps=int(o["max_linesearch_steps"]),
    )


def prototype_solver(name: str, options: dict | None = None) -> LBFGSSettings | AdamSettings:
    """Solver of the (mu, beta)-steps and of the joint fit.

    Raises:
        ValueError: as :func:`optimizer_options`, or for invalid values.
    """
    o = optimizer_options(name, options)
    if name == "adam":
        return AdamSettings(
            learning_rate=float(o["learning_rate"]),
            batch_size=int(o["batch_size"]),
            epochs=int(o["epochs"]),
        )
    return LBFGSSettings(
        backend=name,
        max_iter=int(o["max_iter"]),
        tol=float(o["tol"]),
        memory_size=int(o["memory_size"]),
        max_linesearch_steps=int(o["max_linesearch_steps"]),
    )
