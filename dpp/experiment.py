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

import contextlib
import dataclasses
import logging
import signal
import threading
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
from dpp.config_check import check_config
from dpp.datasets.base import Dataset, default_cache_dir, default_data_dir
from dpp.errors import ConfigError, NonFiniteResultError, RunInterrupted
from dpp.init import kmeans_centres
from dpp.likelihood import BetaPrior
from dpp.metrics import evaluate
from dpp.model import CLEAN_STATUSES, FittedModel, encode_hard_jit, fit_dpp
from dpp.reporting import Heartbeat, load_results, process_identity, write_results
from dpp.selection import select_l2
from dpp.sets import RaggedSets
from dpp.solvers.coordinate_ascent import FitSettings
from dpp.solvers.lbfgs import LBFGSSettings
from dpp.solvers.minibatch import AdamSettings
from dpp.splits import block_ids, prepare, split_indices
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
    train_idx: np.ndarray  # indices of the training sets in the dataset
    test_idx: np.ndarray
    split: dict  # the split settings (dataset.split)


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


def _partition_map(out_dir, trial: Trial, dataset: Dataset):
    # a spatial_blocks split (checked before the run by _trial_figures) has positions
    plots.partition_map(
        dataset.positions,
        trial.train_idx,
        trial.test_idx,
        trial.split["block_size"],
        trial.split["buffer"],
        out_dir / "partition_map.png",
    )


#: Figures and reports drawn from the first trial's models.
TRIAL_FIGURES = {"figure1": _figure1, "prototypes": _prototypes, "partition_map": _partition_map}
#: Methods a trial figure needs; a figure whose methods are not in the run is skipped (noted).
TRIAL_FIGURE_NEEDS = {"figure1": ("dpp", "standard"), "prototypes": ("dpp",)}
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


def _shared_l2(cfg, train, centres, seed, groups=None) -> tuple[float | None, dict]:
    """The trial's lambda when ``l2_selection.kind == cv`` (else ``None``: each method's own).

    With ``groups`` (the spatial blocks of a ``spatial_blocks`` split) the folds keep every
    block whole, so the selection is as spatially disjoint as the split.
    """
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
        groups,
    )
    info = {
        "l2_folds": "groups of blocks" if groups is not None else "sets",
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
    """Splits, fits every method, evaluates; appends one record per method and writes them.

    Raises:
        NonFiniteResultError: a fit produced non-finite predictions or metrics (names the
            method and the trial).
    """
    seed = cfg.seed + trial
    split_cfg = OmegaConf.to_container(cfg.dataset.split)
    labels = np.asarray(dataset.sets.labels)
    train_idx, test_idx = split_indices(labels, seed=seed, positions=dataset.positions, **split_cfg)
    groups, split_info = None, {}
    if split_cfg["kind"] == "spatial_blocks":
        groups = block_ids(dataset.positions[train_idx], split_cfg["block_size"])
        split_info = _class_counts(labels, train_idx, test_idx, dataset.class_names)
        split_info["train_blocks"] = int(np.unique(groups).size)
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
    folds_groups = groups if cfg.l2_selection.group_folds else None
    shared_l2, l2_info = _shared_l2(cfg, train, centres, seed, folds_groups)
    models: dict[str, FittedModel] = {}
    for name, mcfg in methods.items():
        mu0, kmeans_seconds = centres(mcfg.K)
        l2 = float(mcfg.l2) if shared_l2 is None else shared_l2
        t0 = time.perf_counter()
        try:
            model = METHODS[mcfg.name](train, mu0, mcfg, cfg, jax.random.key(seed), l2)
        except NonFiniteResultError as err:
            raise NonFiniteResultError(f"trial {trial}, method {name}: {err}") from err
        jax.block_until_ready(model.theta)
        fit_seconds = time.perf_counter() - t0
        metrics = _evaluate_finite(model, test, "test", name, trial)
        train_metrics = _evaluate_finite(model, train, "training", name, trial)
        status = model.info.get("status")
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
                **({"split": split_info} if split_info else {}),
                "final_objective": float(model.history[-1]) if len(model.history) else None,
                "objective_history": [float(v) for v in model.history],
                **({"fit_status": status} if status is not None else {}),
                "info": model.info,
            }
        )
        models[name] = model
        logger.info(
            "trial %d %-9s accuracy %.2f%%  test log-lik %.4f  fit %.1f s%s",
            trial,
            name,
            100 * metrics["accuracy"],
            metrics["test_log_likelihood"],
            fit_seconds,
            "" if status is None else f"  ({status})",
        )
        write_results(out, header, records, "running", warnings=run_warnings(records))
    return Trial(train, test, models, transform, train_idx, test_idx, split_cfg)


def run_warnings(records: list[dict]) -> list[str]:
    """The warnings a run's records carry, one line each.

    Every fit whose status is not clean (naming trial, method, status and reason), and every
    class with no test sets in a trial. Derived from the records alone, so a resumed run and
    ``results.json`` always agree.
    """
    warnings, seen_trials = [], set()
    for r in records:
        missing = r.get("split", {}).get("classes_missing_from_test", [])
        if r["trial"] not in seen_trials:
            seen_trials.add(r["trial"])
            warnings += [f"trial {r['trial']}: class {c!r} has no test sets" for c in missing]
        if r.get("fit_status") not in (None, *CLEAN_STATUSES):
            reason = r["info"]["status_reason"]
            warnings.append(f"trial {r['trial']} {r['method']}: {r['fit_status']}: {reason}")
    return warnings


def _class_counts(labels, train_idx, test_idx, class_names) -> dict:
    """Per-class training and test counts (by label argmax) and the classes with no test set."""
    num_classes = labels.shape[1]
    strata = np.argmax(labels, axis=1)
    train = np.bincount(strata[train_idx], minlength=num_classes)
    test = np.bincount(strata[test_idx], minlength=num_classes)
    names = list(class_names) or [str(c) for c in range(num_classes)]
    return {
        "train_class_counts": train.tolist(),
        "test_class_counts": test.tolist(),
        "classes_missing_from_test": [names[c] for c in np.flatnonzero(test == 0)],
    }


def _evaluate_finite(model: FittedModel, sets: RaggedSets, part: str, name: str, trial: int):
    """:func:`dpp.metrics.evaluate` on a model's predictions for ``sets``.

    Its refusal of non-finite predictions is raised again naming the method, the trial and the
    part (test or training sets).
    """
    try:
        return evaluate(model.log_predictive(sets), np.asarray(sets.labels))
    except NonFiniteResultError as err:
        raise NonFiniteResultError(f"trial {trial}, method {name}, {part} sets: {err}") from err


@contextlib.contextmanager
def _signals_interrupt():
    """SIGTERM and SIGINT raise :class:`RunInterrupted` in the main thread.

    The run then records ``interrupted``. Python runs the handler between bytecodes, so the
    exception never lands inside an XLA compilation.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):
        raise RunInterrupted(signal.Signals(signum).name)

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


#: Config keys that may differ between a run and its resumption.
RESUMABLE_KEYS = ("resume", "trials", "verbose")


def _resume_records(out: Path, cfg: DictConfig, methods) -> list[dict]:
    """Records of the fully finished trials of an earlier run in ``out`` (``resume=true``).

    Raises:
        ConfigError: ``out`` holds a run and ``resume`` is false (a run never silently
            overwrites another), or the earlier run's config differs in keys other than
            :data:`RESUMABLE_KEYS`.
    """
    if not (out / "results.json").is_file():
        return []
    previous = load_results(out)
    if not cfg.resume:
        raise ConfigError(
            f"{out} already holds the results of a run (status {previous.get('status')!r}); "
            "pass resume=true to continue it, or choose another output directory "
            "(hydra.run.dir=...)"
        )
    saved = out / "config_resolved.yaml"
    if saved.is_file():
        old = _flatten(OmegaConf.to_container(OmegaConf.load(saved), resolve=False))
        new = _flatten(OmegaConf.to_container(cfg, resolve=True))
        changed = sorted(
            k for k in set(old) | set(new) if k not in RESUMABLE_KEYS and old.get(k) != new.get(k)
        )
        if changed:
            raise ConfigError(
                f"resume=true but the config differs from the run in {out} in: {', '.join(changed)}"
            )
    by_trial: dict[int, list[dict]] = {}
    for record in previous.get("trials", []):
        by_trial.setdefault(record["trial"], []).append(record)
    return [
        r
        for t, rows in sorted(by_trial.items())
        if t < cfg.trials and {r["method"] for r in rows} == set(methods)
        for r in rows
    ]


def _flatten(tree: dict, prefix: str = "") -> dict:
    """``{"a.b": value}`` for the leaves of a nested dict (lists are leaves)."""
    out = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(_flatten(value, name + "."))
        else:
            out[name] = value
    return out


def _trial_figures(cfg: DictConfig, methods) -> tuple[list[str], dict[str, str]]:
    """The trial figures this run can draw, and the skipped ones with the reason."""
    names, skipped = [], {}
    for name in cfg.figures:
        if name not in TRIAL_FIGURES:
            continue
        missing = [m for m in TRIAL_FIGURE_NEEDS.get(name, ()) if m not in methods]
        if missing:
            skipped[name] = f"needs the {' and '.join(missing)} method(s), not in this run"
        elif name == "partition_map" and cfg.dataset.split.kind != "spatial_blocks":
            skipped[name] = "needs a spatial_blocks split"
        else:
            names.append(name)
            continue
        logger.info("figure %s skipped: %s", name, skipped[name])
    return names, skipped


def run(cfg: DictConfig, output_dir: str | Path | None = None) -> dict:
    """Runs an experiment described by a composed config and writes its outputs.

    Every config value is checked before any data is read. ``results.json`` carries the run's
    status (``running``, ``complete``, ``failed``, ``interrupted``), the process's pid, host and
    start time, and fit warnings (a DPP fit whose status is not ``converged``); ``heartbeat.json``
    is refreshed while the process lives, so :func:`dpp.reporting.run_state` recognises a killed
    run. With ``resume=true`` a run continues in the same directory from its finished trials; a
    directory that already holds a run is otherwise refused.

    Args:
        cfg: the root config (``configs/config.yaml`` with overrides).
        output_dir: run directory; defaults to Hydra's output directory.

    Returns:
        The content of ``results.json``.

    Raises:
        ConfigError: a bad config value (before anything is written) or a directory that
            already holds a run.
        NonFiniteResultError: a fit or metric is not finite; ``results.json`` then holds the
            trials finished so far with ``status = "failed"``.
        RunInterrupted: SIGTERM or SIGINT; ``status = "interrupted"``.
        ValueError, FileNotFoundError: for bad data; ``status = "failed"``.
    """
    check_config(cfg, METHODS, [*TRIAL_FIGURES, *RUN_FIGURES], REPORTS)
    methods = methods_of(cfg)
    out = _output_dir(output_dir)
    records = _resume_records(out, cfg, methods)
    done_trials = sorted({r["trial"] for r in records})
    (out / "config_resolved.yaml").write_text(OmegaConf.to_yaml(cfg, resolve=True))
    trial_figures, skipped_figures = _trial_figures(cfg, methods)
    start = time.perf_counter()
    header = {
        "experiment": cfg.name,
        "dataset": cfg.dataset.name,
        "methods": list(methods),
        "num_trials": cfg.trials,
        **process_identity(),
    }
    if done_trials:
        header["resumed_trials"] = done_trials
        logger.info("resuming %s: trials %s already finished", out, done_trials)
    if skipped_figures:
        header["skipped_figures"] = skipped_figures
    with Heartbeat(out), _signals_interrupt():
        try:
            write_results(out, header, records, "running", warnings=run_warnings(records))
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
                if trial in done_trials:
                    continue
                done = _run_trial(cfg, dataset, methods, trial, records, out, header)
                if trial == 0:
                    for name in trial_figures:
                        TRIAL_FIGURES[name](out, done, dataset)
            records.sort(key=lambda r: (r["trial"], list(methods).index(r["method"])))
            for name in cfg.figures:
                if name in RUN_FIGURES:
                    RUN_FIGURES[name](out, records, name)
            results = write_results(
                out,
                header,
                records,
                "complete",
                warnings=run_warnings(records),
                wall_seconds=time.perf_counter() - start,
            )
            for name in cfg.reports:
                filename, build = REPORTS[name]
                (out / filename).write_text(build(results))
        except BaseException as err:
            status = (
                "interrupted" if isinstance(err, RunInterrupted | KeyboardInterrupt) else "failed"
            )
            write_results(
                out,
                header,
                records,
                status,
                error=f"{type(err).__name__}: {err}",
                warnings=run_warnings(records),
                wall_seconds=time.perf_counter() - start,
            )
            raise
    for warning in results["warnings"]:
        logger.warning("%s", warning)
    logger.info("results in %s", out)
    return results
