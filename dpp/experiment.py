"""The experiment layer: turns a Hydra config into typed settings and runs trials.

``run(cfg)`` is what ``experiments/run.py`` calls. It is the only place that reads the config;
numerics receive typed keyword arguments and frozen settings dataclasses.

A run: load the dataset; for each trial ``t`` (seed ``cfg.seed + t``) split the sets, fit the
preprocessing on the training part, run k-means once per distinct ``K``, fit the primary model
(``cfg.model``) and every baseline (``cfg.baselines``) on the same split, evaluate them on the test
sets and write ``results.json``/``results.csv``/``table.md`` after each fit. The first trial's
models feed the trial figures and reports (``figure1``, ``prototypes``); at the end come the
run figures (``cfg.figures``) and the paper tables (``cfg.reports``), built from the results
alone.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import hydra
import jax
import jax.numpy as jnp
import numpy as np
from omegaconf import DictConfig, OmegaConf
from sklearn.pipeline import Pipeline

from dpp import discovery, plots
from dpp.baselines.class_prior import fit_class_prior
from dpp.baselines.infoloss import InfoLossSettings, fit_infoloss
from dpp.baselines.standard import fit_standard
from dpp.datasets.base import Dataset, default_cache_dir, default_data_dir
from dpp.init import kmeans_centres
from dpp.likelihood import BetaPrior
from dpp.metrics import evaluate
from dpp.model import FittedModel, encode_hard_jit, fit_dpp
from dpp.reporting import write_results
from dpp.selection import select_l2
from dpp.sets import RaggedSets
from dpp.solvers.coordinate_ascent import FitSettings
from dpp.solvers.lbfgs import LBFGSSettings
from dpp.solvers.minibatch import AdamSettings
from dpp.splits import prepare, split_indices
from dpp.tables import REPORTS

logger = logging.getLogger(__name__)

OmegaConf.register_new_resolver("dpp_data_dir", lambda: str(default_data_dir()), replace=True)
OmegaConf.register_new_resolver("dpp_cache_dir", lambda: str(default_cache_dir()), replace=True)


# ---------------------------------------------------------------------- config -> settings
def theta_solver_settings(optimizer: DictConfig) -> LBFGSSettings:
    """Full-batch solver of the convex Theta-steps (optax L-BFGS when the optimizer is Adam)."""
    backend = "lbfgs_optax" if optimizer.name == "adam" else optimizer.name
    return LBFGSSettings(
        backend=backend,
        max_iter=optimizer.theta_max_iter,
        tol=optimizer.tol,
        memory_size=optimizer.memory_size,
        max_linesearch_steps=optimizer.max_linesearch_steps,
    )


def prototype_solver_settings(optimizer: DictConfig) -> LBFGSSettings | AdamSettings:
    """Solver of the (mu, beta)-steps and of the joint fit."""
    if optimizer.name == "adam":
        return AdamSettings(
            learning_rate=optimizer.learning_rate,
            batch_size=optimizer.batch_size,
            epochs=optimizer.epochs,
        )
    return LBFGSSettings(
        backend=optimizer.name,
        max_iter=optimizer.max_iter,
        tol=optimizer.tol,
        memory_size=optimizer.memory_size,
        max_linesearch_steps=optimizer.max_linesearch_steps,
    )


def fit_settings(model: DictConfig, optimizer: DictConfig, verbose: bool) -> FitSettings:
    """DPP learning settings from the ``model`` and ``optimizer`` config groups."""
    return FitSettings(
        l2=float(model.l2),
        prior=BetaPrior(**OmegaConf.to_container(model.beta_prior)),
        max_rounds=model.max_rounds,
        tol=model.tol,
        beta_step_limit=model.beta_step_limit,
        patience=model.patience,
        theta_solver=theta_solver_settings(optimizer),
        prototype_solver=prototype_solver_settings(optimizer),
        verbose=verbose,
    )


# ---------------------------------------------------------------------- methods
def _fit_dpp(train, centres, model_cfg, cfg, key, l2) -> FittedModel:
    settings = dataclasses.replace(fit_settings(model_cfg, cfg.optimizer, cfg.verbose), l2=l2)
    return fit_dpp(
        train,
        centres,
        settings,
        key,
        mode=model_cfg.mode,
        beta_scale=model_cfg.beta_scale,
        per_prototype_beta=model_cfg.per_prototype_beta,
        validation_fraction=model_cfg.validation_fraction,
    )


def _fit_standard(train, centres, model_cfg, cfg, key, l2) -> FittedModel:
    del key, model_cfg
    return fit_standard(train, centres, l2, theta_solver_settings(cfg.optimizer))


def _fit_infoloss(train, centres, model_cfg, cfg, key, l2) -> FittedModel:
    del key
    settings = InfoLossSettings(
        beta_scale=model_cfg.beta_scale,
        gamma_scale=model_cfg.gamma_scale,
        max_rounds=model_cfg.max_rounds,
        tol=model_cfg.tol,
        centre_solver=dataclasses.replace(
            theta_solver_settings(cfg.optimizer), max_iter=model_cfg.centre_max_iter
        ),
    )
    return fit_infoloss(train, centres, l2, theta_solver_settings(cfg.optimizer), settings)


def _fit_class_prior(train, centres, model_cfg, cfg, key, l2) -> FittedModel:
    del model_cfg, cfg, key, l2
    return fit_class_prior(train, centres)


#: Fitters by ``model.name``: ``(train, k-means centres, method config, root config, key,
#: lambda)``.
METHODS: dict[str, Callable[..., FittedModel]] = {
    "dpp": _fit_dpp,
    "standard": _fit_standard,
    "infoloss": _fit_infoloss,
    "class_prior": _fit_class_prior,
}


def methods_of(cfg: DictConfig) -> dict[str, DictConfig]:
    """The primary model followed by the baselines, by name (a baseline equal to it is skipped).

    Raises:
        ValueError: for an unknown method name.
    """
    methods = {cfg.model.name: cfg.model}
    for name, baseline in (cfg.baselines or {}).items():
        if baseline.name != cfg.model.name:
            methods.setdefault(name, baseline)
    for m in methods.values():
        if m.name not in METHODS:
            raise ValueError(f"unknown method {m.name!r}; known: {sorted(METHODS)}")
    return methods


# ---------------------------------------------------------------------- figures
class Trial(NamedTuple):
    """What a trial leaves for the first-trial figures and reports."""

    train: RaggedSets
    test: RaggedSets
    models: dict[str, FittedModel]
    transform: Pipeline | None  # the fitted preprocessing (None: identity)


def _figure1(out_dir, trial: Trial, dataset: Dataset):
    if "dpp" not in trial.models or "standard" not in trial.models:
        raise ValueError("figure1 needs both the dpp model and the standard baseline")
    plots.figure1(
        trial.train,
        trial.models["standard"],
        trial.models["dpp"],
        out_dir / "figure1.png",
        dataset.class_names,
    )


def _prototypes(out_dir, trial: Trial, dataset: Dataset):
    if "dpp" not in trial.models:
        raise ValueError("the prototypes report needs the dpp model")
    model = trial.models["dpp"]
    centres = model.prototypes
    if trial.transform is not None:
        centres = trial.transform.inverse_transform(centres)
    if dataset.decode_vectors is not None:
        centres = dataset.decode_vectors(centres)
    features = dataset.feature_names or tuple(f"x{d}" for d in range(centres.shape[1]))
    z_train = np.asarray(model.encode(trial.train))
    discovery.write_prototype_report(
        out_dir, centres, np.asarray(model.theta), z_train, features, dataset.class_names
    )


#: Figures and reports drawn from the first trial's models.
TRIAL_FIGURES = {"figure1": _figure1, "prototypes": _prototypes}
RUN_FIGURES = {
    "loglik": lambda out, records, name: plots.loglik_bars(records, out / f"{name}.png"),
    "figure2a": lambda out, records, name: plots.loglik_bars(
        records, out / f"{name}.png", "Figure 2(a): MPEG-7 test log-likelihood"
    ),
    "figure2b": lambda out, records, name: plots.loglik_bars(
        records, out / f"{name}.png", "Figure 2(b): Indian Pines test log-likelihood"
    ),
    "history": lambda out, records, name: plots.objective_histories(records, out / f"{name}.png"),
}


# ---------------------------------------------------------------------- run
def _output_dir(output_dir) -> Path:
    if output_dir is None:
        from hydra.core.hydra_config import HydraConfig

        output_dir = (
            HydraConfig.get().runtime.output_dir
            if HydraConfig.initialized()
            else Path("outputs") / time.strftime("%Y-%m-%d_%H-%M-%S")
        )
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    return out


def _kmeans_cache(train, seed: int, kmeans_cfg):
    """``centres(K) -> (centres, seconds)``: k-means once per distinct ``K`` in a trial."""
    cache: dict[int, tuple[np.ndarray, float]] = {}

    def centres(k: int) -> tuple[np.ndarray, float]:
        if k not in cache:
            t0 = time.perf_counter()
            c = kmeans_centres(np.asarray(train.vectors), k, seed, **kmeans_cfg)
            cache[k] = (c, time.perf_counter() - t0)
        return cache[k]

    return centres


def _shared_l2(cfg, train, centres, seed) -> tuple[float | None, dict]:
    """The trial's lambda when ``l2_selection.kind == cv`` (else ``None``: each method's own)."""
    sel = cfg.l2_selection
    if sel.kind == "fixed":
        return None, {}
    if sel.kind != "cv":
        raise ValueError(f"unknown l2_selection.kind {sel.kind!r}; use fixed or cv")
    mu = jnp.asarray(centres(cfg.model.K)[0], dtype=train.vectors.dtype)
    t0 = time.perf_counter()
    z = encode_hard_jit(train, mu)
    l2, scores = select_l2(
        z,
        train.labels,
        train.weights,
        list(sel.grid),
        sel.folds,
        seed,
        theta_solver_settings(cfg.optimizer),
    )
    info = {
        "l2_grid": list(sel.grid),
        "l2_cv_scores": scores.tolist(),
        "l2_selection_seconds": time.perf_counter() - t0,
    }
    logger.info(
        "lambda = %.3g by %d-fold CV on the training sets (scores %s)",
        l2,
        sel.folds,
        np.round(scores, 4).tolist(),
    )
    return l2, info


def _run_trial(cfg, dataset, methods, trial, records, out, header):
    """Splits, fits every method, evaluates; appends one record per method and writes them."""
    seed = cfg.seed + trial
    train_idx, test_idx = split_indices(
        np.asarray(dataset.sets.labels), seed=seed, **OmegaConf.to_container(cfg.dataset.split)
    )
    fit_vectors = None
    if dataset.anchors is not None:
        fit_vectors = np.asarray(dataset.sets.vectors)[dataset.anchors[train_idx]]
    train, test, transform = prepare(
        dataset.sets.subset(train_idx),
        dataset.sets.subset(test_idx),
        standardize=cfg.dataset.standardize,
        pca_components=cfg.dataset.pca_components,
        fit_vectors=fit_vectors,
    )
    centres = _kmeans_cache(train, seed, cfg.kmeans)
    shared_l2, l2_info = _shared_l2(cfg, train, centres, seed)
    models: dict[str, FittedModel] = {}
    for name, mcfg in methods.items():
        mu0, kmeans_seconds = centres(mcfg.K)
        l2 = float(mcfg.l2) if shared_l2 is None else shared_l2
        t0 = time.perf_counter()
        model = METHODS[mcfg.name](train, mu0, mcfg, cfg, jax.random.key(seed), l2)
        jax.block_until_ready(model.theta)
        fit_seconds = time.perf_counter() - t0
        metrics = evaluate(model.log_predictive(test), np.asarray(test.labels))
        train_metrics = evaluate(model.log_predictive(train), np.asarray(train.labels))
        records.append(
            {
                "trial": trial,
                "seed": seed,
                "method": name,
                **metrics,
                "train_accuracy": train_metrics["accuracy"],
                "fit_seconds": fit_seconds,
                "kmeans_seconds": kmeans_seconds,
                "K": int(mcfg.K),
                "l2": l2,
                **l2_info,
                "num_train": train.num_sets,
                "num_test": test.num_sets,
                "final_objective": float(model.history[-1]) if len(model.history) else None,
                "objective_history": [float(v) for v in model.history],
                "info": model.info,
            }
        )
        models[name] = model
        logger.info(
            "trial %d %-9s accuracy %.2f%%  test log-lik %.4f  fit %.1f s",
            trial,
            name,
            100 * metrics["accuracy"],
            metrics["test_log_likelihood"],
            fit_seconds,
        )
        write_results(out, header, records, "running")
    return Trial(train, test, models, transform)


def run(cfg: DictConfig, output_dir: str | Path | None = None) -> dict:
    """Runs an experiment described by a composed config and writes its outputs.

    Args:
        cfg: the root config (``configs/config.yaml`` with overrides).
        output_dir: run directory; defaults to Hydra's output directory.

    Returns:
        The content of ``results.json``.

    Raises:
        ValueError, FileNotFoundError: for bad settings or missing data; ``results.json`` then
            holds the trials finished so far with ``status = "failed"``.
    """
    out = _output_dir(output_dir)
    (out / "config_resolved.yaml").write_text(OmegaConf.to_yaml(cfg, resolve=True))
    for name in cfg.figures:
        if name not in TRIAL_FIGURES and name not in RUN_FIGURES:
            raise ValueError(f"unknown figure {name!r}")
    for name in cfg.reports:
        if name not in REPORTS:
            raise ValueError(f"unknown report {name!r}; known: {sorted(REPORTS)}")
    start = time.perf_counter()
    methods = methods_of(cfg)
    header = {
        "experiment": cfg.name,
        "dataset": cfg.dataset.name,
        "methods": list(methods),
        "num_trials": cfg.trials,
    }
    records: list[dict] = []
    try:
        # a partial, called here, so that the loader's own errors reach the user unwrapped
        dataset: Dataset = hydra.utils.instantiate(cfg.dataset.loader, _partial_=True)()
        header["data_seconds"] = time.perf_counter() - start
        header["dataset_info"] = dataset.info
        logger.info(
            "dataset %s: %d sets, %d classes (%.1f s)",
            dataset.name,
            dataset.sets.num_sets,
            dataset.sets.num_classes,
            header["data_seconds"],
        )
        for trial in range(cfg.trials):
            done = _run_trial(cfg, dataset, methods, trial, records, out, header)
            if trial == 0:
                for name in cfg.figures:
                    if name in TRIAL_FIGURES:
                        TRIAL_FIGURES[name](out, done, dataset)
    except BaseException as err:
        write_results(
            out,
            header,
            records,
            "failed",
            error=f"{type(err).__name__}: {err}",
            wall_seconds=time.perf_counter() - start,
        )
        raise
    for name in cfg.figures:
        if name in RUN_FIGURES:
            RUN_FIGURES[name](out, records, name)
    results = write_results(
        out, header, records, "complete", wall_seconds=time.perf_counter() - start
    )
    for name in cfg.reports:
        filename, build = REPORTS[name]
        (out / filename).write_text(build(results))
    logger.info("results in %s", out)
    return results
