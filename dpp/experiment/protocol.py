"""The trial protocol: split, preprocess, choose lambda, fit every method, evaluate. No I/O.

A trial ``t`` (seed ``seed + t``) splits the sets, fits the preprocessing on the training part,
runs k-means once per distinct ``K`` (every method of that ``K`` starts from the same centres),
chooses ``lambda`` by the ``l2_selection`` rule, fits every estimator on the same training
sets and evaluates it on the test sets. It returns one record per method; the caller writes
them (``on_record`` is called after every fit, so a run that fails later keeps them).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from inspect import signature
from typing import NamedTuple

import jax
import numpy as np
from sklearn.base import clone

from dpp.datasets.base import Dataset
from dpp.errors import ConfigError, NonFiniteResultError
from dpp.estimators import DPPClassifierCV, PrototypeClassifier, StandardPrototypeClassifier
from dpp.experiment.compilation import CompileCounter
from dpp.experiment.settings import TrialSettings
from dpp.experiment.splits import block_ids, split_indices
from dpp.init import KMEANS_MAX_ITER, KMEANS_N_INIT, KMEANS_SOLVER, kmeans_centres
from dpp.metrics import evaluate
from dpp.model import FittedModel
from dpp.selection import holdout_split
from dpp.sets import Layout, RaggedSets
from dpp.units import Affine

logger = logging.getLogger(__name__)


class Trial(NamedTuple):
    """What a trial leaves for the first-trial figures, reports and saved models."""

    train: RaggedSets  # preprocessed (the units the models were fitted in)
    models: dict[str, FittedModel]  # the prototype methods' models
    estimators: dict  # every method's fitted estimator (it preprocesses raw sets itself)
    transform: Affine | None  # the trial's fitted preprocessing (None: identity)
    train_idx: np.ndarray  # indices of the training sets in the dataset
    test_idx: np.ndarray
    split: dict  # the split settings (dataset.split)


def _kmeans_cache(train: RaggedSets, seed: int, estimator: PrototypeClassifier):
    """``centres(K) -> (centres, seconds)``: k-means once per distinct ``K`` in a trial."""
    cache: dict[int, tuple[np.ndarray, float]] = {}
    params = estimator.get_params(deep=False)  # the class prior's have no k-means settings
    n_init = params.get("kmeans_n_init", KMEANS_N_INIT)
    max_iter = params.get("kmeans_max_iter", KMEANS_MAX_ITER)
    solver = params.get("kmeans_solver", KMEANS_SOLVER)

    def centres(k: int) -> tuple[np.ndarray, float]:
        if k not in cache:
            t0 = time.perf_counter()
            c = kmeans_centres(np.asarray(train.vectors), k, seed, n_init, max_iter, solver)
            cache[k] = (c, time.perf_counter() - t0)
        return cache[k]

    return centres


def _shared_l2(settings: TrialSettings, train, units, centres, seed, groups) -> tuple[float, dict]:
    """``l2_selection.kind == cv``: one lambda for all methods, by CV of the standard prototype.

    :class:`~dpp.estimators.DPPClassifierCV` over a
    :class:`~dpp.estimators.StandardPrototypeClassifier` with the trial's k-means centres of
    the primary method's ``K`` and its preprocessing: the folds refit only the Theta-step on
    the hard codes (eqs. 1, 2, 16), so the choice is cheap and the same for every method. With
    ``groups`` (the spatial blocks of a ``spatial_blocks`` split) the folds keep every block
    whole, so the selection is as spatially disjoint as the split.
    """
    sel = settings.l2_selection
    primary = next(iter(settings.methods.values()))
    names = StandardPrototypeClassifier().get_params(deep=False)
    standard = StandardPrototypeClassifier(
        **{name: value for name, value in primary.get_params().items() if name in names}
    ).set_params(
        n_prototypes=primary.n_prototypes,
        init=centres(primary.n_prototypes)[0],
        standardize=settings.standardize,
        pca_components=settings.pca_components,
        preprocess=units,
        random_state=seed,
    )
    t0 = time.perf_counter()
    search = DPPClassifierCV(
        standard,
        l2s=sel["grid"],
        cv=sel["folds"],
        max_extensions=sel["max_extensions"],
        select_rounds=False,
        n_jobs=settings.n_jobs,
    ).fit(train, groups=groups)
    info = _selection_info(search, "cv", groups, time.perf_counter() - t0)
    logger.info(
        "lambda = %.3g by %d-fold CV on the training sets (%s of %d values%s; scores %s)",
        search.best_params_["l2"],
        sel["folds"],
        search.best_position_,
        len(info["l2_grid"]),
        f", {len(search.l2s_added_)} added beyond the grid" if search.l2s_added_ else "",
        np.round(info["l2_cv_scores"], 4).tolist(),
    )
    return search.best_params_["l2"], info


def _fit_by_cv(
    estimator, train, settings: TrialSettings, groups
) -> tuple[PrototypeClassifier, dict]:
    """``l2_selection.kind == dpp_cv``: the method's own ``l2`` (and ``K``) by CV of itself."""
    sel = settings.l2_selection
    t0 = time.perf_counter()
    search = DPPClassifierCV(
        estimator,
        l2s=sel["grid"],
        n_prototypes=sel.get("n_prototypes_grid"),
        pooling=sel.get("pooling_grid"),  # null: the method's own (model.pooling)
        embedding=(None,),  # the method's own model: DPP on an embedding is its own method
        cv=sel["folds"],
        max_extensions=sel["max_extensions"],
        select_rounds=sel["select_rounds"],
        rule="best",  # a trial records one model per method
        n_jobs=settings.n_jobs,
    ).fit(train, groups=groups)
    info = _selection_info(search, "dpp_cv", groups, time.perf_counter() - t0)
    return search.best_estimator_, info


def _selection_info(search: DPPClassifierCV, kind: str, groups, seconds: float) -> dict:
    """The record's account of a selection: the candidates, their scores, where the choice lies."""
    results = search.cv_results_
    info = {
        "l2_selection": kind,
        "l2_folds": "groups of blocks" if groups is not None else "sets",
        "l2_grid": [float(v) for v in results["param_l2"]],
        "l2_cv_scores": results["mean_test_score"].tolist(),
        "l2_cv_fit_status": [str(v) for v in results["fit_status"]],
        "l2_position": search.best_position_,
        "l2_added": search.l2s_added_,
        "cv_prior_score": search.prior_score_,
    }
    if kind == "dpp_cv":
        info["n_prototypes_grid"] = [int(v) for v in results["param_n_prototypes"]]
        info["pooling_grid"] = [None if v is None else str(v) for v in results["param_pooling"]]
        info["best_params"] = search.best_params_
        info["cv_rounds"] = search.best_rounds_
    info["l2_selection_seconds"] = seconds
    return info


def _check_prototypes(settings: TrialSettings, train: RaggedSets, trial: int) -> None:
    """Refuses a ``K`` larger than the training vectors before any k-means runs.

    Raises:
        ConfigError: naming the config key, ``K`` and the number of training vectors.
    """
    vectors = int(np.asarray(train.vectors).shape[0])
    keys = {}
    for index, (name, estimator) in enumerate(settings.methods.items()):
        if estimator.uses_centres:
            keys["model" if index == 0 else f"baselines.{name}"] = estimator.n_prototypes
    grid = settings.l2_selection.get("n_prototypes_grid")
    if settings.l2_selection["kind"] == "dpp_cv" and grid:
        keys["l2_selection.n_prototypes_grid"] = max(grid)
    for key, k in keys.items():
        if k > vectors:
            name = key if key.endswith("grid") else f"{key}.n_prototypes"
            raise ConfigError(
                f"{name}={k} but the training sets of trial {trial} hold {vectors} vectors; "
                f"k-means needs K <= {vectors}"
            )


def run_trial(
    settings: TrialSettings,
    dataset: Dataset,
    trial: int,
    on_record: Callable[[dict], None] | None = None,
) -> tuple[list[dict], Trial]:
    """Runs trial ``trial``: every method on the same split, evaluated on the test sets.

    Args:
        settings: the run's settings (:func:`dpp.experiment.settings.trial_settings`).
        dataset: all sets.
        trial: trial index (seed ``settings.seed + trial``).
        on_record: called with each method's record as soon as it exists.

    Returns:
        ``(records, trial)``: one record per method, and the trial's sets and models.

    Raises:
        NonFiniteResultError: a fit produced non-finite parameters, predictions or metrics
            (naming the method and the trial).
    """
    seed = settings.seed + trial
    train_idx, test_idx, groups, split_info = _split(settings, dataset, seed)
    train_raw, test_raw = dataset.sets.subset(train_idx), dataset.sets.subset(test_idx)
    fit_vectors = train_raw.vectors
    if dataset.anchors is not None:  # e.g. the training pixels' own spectra, not their windows
        fit_vectors = np.asarray(dataset.sets.vectors)[dataset.anchors[train_idx]]
    units = Affine.fit(fit_vectors, settings.standardize, settings.pca_components)
    train = train_raw if units is None else units.sets(train_raw)
    primary = next(iter(settings.methods.values()))
    _check_prototypes(settings, train, trial)
    centres = _kmeans_cache(train, seed, primary)
    folds_groups = groups if settings.l2_selection["group_folds"] else None
    shared_l2, shared_info = None, {}
    if settings.l2_selection["kind"] == "cv":
        shared_l2, shared_info = _shared_l2(settings, train_raw, units, centres, seed, folds_groups)
    validation = {}
    if settings.validation["metric"] in ("validation_log_likelihood", "validation_accuracy"):
        estimator = _prepared(primary, seed, units, dataset.anchors is not None)
        fraction = settings.validation["fraction"]
        validation = _held_out_scores(estimator, train_raw, seed, fraction, trial)
    # every trial's DPP fits (early stopping's and the refit) padded alike: one program a run
    layout = Layout.covering(dataset.sets.set_sizes(), train_raw.num_sets)
    records, models, estimators = [], {}, {}
    for index, (name, template) in enumerate(settings.methods.items()):
        estimator = _prepared(template, seed, units, dataset.anchors is not None)
        params = estimator.get_params()
        kmeans_seconds = 0.0
        if estimator.uses_centres and "init" in params:
            init, kmeans_seconds = centres(estimator.n_prototypes)
            estimator.set_params(init=init)
        if shared_l2 is not None and "l2" in params:
            estimator.set_params(l2=shared_l2)
        t0 = time.perf_counter()
        try:
            with CompileCounter() as compiled:  # compilation apart from the fit's own seconds
                estimator, l2_info = _fit(estimator, train_raw, settings, folds_groups, layout)
                if getattr(estimator, "model_", None) is not None:  # the prototype methods'
                    jax.block_until_ready(estimator.model_.theta)
        except NonFiniteResultError as err:
            raise NonFiniteResultError(f"trial {trial}, method {name}: {err}") from err
        wall = time.perf_counter() - t0
        compile_seconds = min(compiled.seconds + compiled.prepare_seconds, wall)
        fit_seconds = wall - compile_seconds
        if shared_l2 is not None and "l2" in params:
            l2_info = shared_info
        record = {
            "trial": trial,
            "seed": seed,
            "method": name,
            **_evaluate_finite(estimator, test_raw, "test", name, trial),
            "train_accuracy": _evaluate_finite(estimator, train_raw, "training", name, trial)[
                "accuracy"
            ],
            "fit_seconds": fit_seconds,
            "compile_seconds": compile_seconds,
            "kmeans_seconds": kmeans_seconds,
            **_method_fields(estimator, params, l2_info),
            **(validation if index == 0 else {}),
            "num_train": train_raw.num_sets,
            "num_test": test_raw.num_sets,
            **({"split": split_info} if split_info else {}),
            **_fit_fields(estimator),
        }
        records.append(record)
        estimators[name] = estimator
        if getattr(estimator, "model_", None) is not None:  # the prototype methods'
            models[name] = estimator.model_
        logger.info("%s", summary_line(record))
        if on_record is not None:
            on_record(record)
    done = Trial(train, models, estimators, units, train_idx, test_idx, settings.split)
    return records, done


def _split(settings: TrialSettings, dataset: Dataset, seed: int):
    """``(train_idx, test_idx, groups, split_info)`` of a trial's split.

    With a ``spatial_blocks`` split, ``groups`` are the training sets' blocks (the selection's
    folds keep them whole) and ``split_info`` the per-class counts; otherwise ``None`` and
    ``{}``.
    """
    split_cfg = settings.split
    labels = np.asarray(dataset.sets.labels)
    train_idx, test_idx = split_indices(labels, seed=seed, positions=dataset.positions, **split_cfg)
    if split_cfg["kind"] != "spatial_blocks":
        return train_idx, test_idx, None, {}
    groups = block_ids(dataset.positions[train_idx], split_cfg["block_size"])
    split_info = _class_counts(labels, train_idx, test_idx, dataset.class_names)
    split_info["train_blocks"] = int(np.unique(groups).size)
    return train_idx, test_idx, groups, split_info


def _fit(
    estimator, train: RaggedSets, settings: TrialSettings, groups, layout: Layout | None = None
) -> tuple[object, dict]:
    """Fits one method on the training sets: ``(fitted estimator, its selection's record)``.

    With ``l2_selection.kind=dpp_cv`` the prototype methods with centres are
    :class:`~dpp.estimators.DPPClassifierCV`'s refitted best; the others fit themselves (with
    ``groups`` when their own selection takes them, and the run's ``layout`` when their fit
    takes one: DPP's). The record is ``{}`` where the method made no choice of ``l2`` here.
    """
    if settings.l2_selection["kind"] == "dpp_cv" and _tuned_by_dpp_cv(estimator):
        estimator.set_params(init="k-means")  # every fold and K runs its own k-means
        estimator, info = _fit_by_cv(estimator, train, settings, groups)
        return estimator, {**info, "cv_score": max(info["l2_cv_scores"])}
    parameters = signature(estimator.fit).parameters
    extra = {"layout": layout} if layout is not None and "layout" in parameters else {}
    if groups is not None and "groups" in parameters:
        estimator.fit(train, groups=groups, **extra)  # its own CV keeps the blocks whole
    else:
        estimator.fit(train, **extra)
    return estimator, {}


def _method_fields(estimator, params: dict, l2_info: dict) -> dict:
    """The record's ``K``, ``l2``, ``C`` (the pooled baselines') and the selection's account."""
    selection = estimator.fit_report_.selection
    return {
        **({"K": int(estimator.n_prototypes)} if "n_prototypes" in params else {}),
        **({"l2": float(estimator.l2)} if "l2" in params else {}),
        **({"C": selection.C, "C_position": selection.position} if selection else {}),
        **l2_info,
    }


def _fit_fields(estimator) -> dict:
    """The record's objective history, final objective, status and the fit's ``info``."""
    report = estimator.fit_report_
    history = [float(v) for v in getattr(estimator, "history_", ())]
    return {
        "final_objective": history[-1] if history else None,
        "objective_history": history,
        **({"fit_status": report.status} if report.status is not None else {}),
        "info": report.to_dict(),
    }


def summary_line(record: dict) -> str:
    """One line per fitted method of a trial.

    The method's ``K`` (where it has prototypes), accuracy, test log-likelihood, KL in bits
    (soft labels), fit seconds (XLA's compilation apart, named where it took 0.05 s or more)
    and status.
    """
    kl = f"  KL {record['kl_bits']:.4f} bits" if "kl_bits" in record else ""
    status = record.get("fit_status")
    k = f"K={record['K']}" if "K" in record else ""
    seconds = record.get("compile_seconds", 0.0)
    compiled = f" (+ {seconds:.1f} s compiling)" if seconds >= 0.05 else ""
    return (
        f"trial {record['trial']} {record['method']:<12} {k:<6} "
        f"accuracy {100 * record['accuracy']:.2f}%"
        f"  test log-lik {record['test_log_likelihood']:.4f}{kl}"
        f"  fit {record['fit_seconds']:.1f} s{compiled}{'' if status is None else f'  ({status})'}"
    )


def _prepared(template, seed: int, units: Affine | None, anchored: bool):
    """An unfitted copy of a method's estimator with the trial's seed and preprocessing.

    The trial's map ``units`` is handed over prefit where the estimator could not fit the same
    map itself: when the dataset chooses the vectors it is fitted on (``anchored``), or when the
    estimator has no ``pca_components`` of its own (the pooled baselines). Otherwise the
    estimator fits the identical map from ``standardize`` and ``pca_components``, as it does
    for a Python user and inside each fold of a selection.
    """
    estimator = clone(template)
    params = estimator.get_params()
    if "random_state" in params:  # not the class prior's: it draws nothing
        estimator.set_params(random_state=seed)
    if (
        units is not None
        and "preprocess" in params
        and (anchored or "pca_components" not in params)
    ):
        estimator.set_params(preprocess=units)
    return estimator


def _held_out_scores(estimator, train: RaggedSets, seed: int, fraction: float, trial: int) -> dict:
    """The validation metrics of a sweep, from the training sets only.

    ``estimator`` (:func:`_prepared`) is fitted on ``1 - fraction`` of the training sets (with
    its own k-means) and scored on the rest. The test sets are never touched.

    Raises:
        ValueError: if fewer than two sets would be held out.
        NonFiniteResultError: for non-finite predictions on the held-out sets.
    """
    fit_idx, held_idx = holdout_split(np.asarray(train.labels), fraction, seed)
    if len(held_idx) < 2 or len(fit_idx) < 2:
        raise ValueError(
            f"validation.fraction={fraction} of {train.num_sets} training sets leaves "
            f"{len(fit_idx)} to fit and {len(held_idx)} to validate; both need at least 2"
        )
    if estimator.uses_centres:
        estimator.set_params(init="k-means")
    held_out = train.subset(held_idx)
    estimator.fit(train.subset(fit_idx))
    name = estimator.method
    metrics = _evaluate_finite(estimator, held_out, "validation", name, trial)
    logger.info(
        "trial %d validation (%d of the training sets held out): accuracy %.2f%%  log-lik %.4f",
        trial,
        len(held_idx),
        100 * metrics["accuracy"],
        metrics["test_log_likelihood"],
    )
    return {
        "validation_log_likelihood": metrics["test_log_likelihood"],
        "validation_accuracy": metrics["accuracy"],
        "validation_sets": int(len(held_idx)),
    }


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


def _tuned_by_dpp_cv(estimator) -> bool:
    """Whether ``l2_selection.kind=dpp_cv`` selects this method's ``l2`` (and ``K``).

    The prototype methods with centres; the pooled baselines choose their own ``C``.
    """
    return isinstance(estimator, PrototypeClassifier) and estimator.uses_centres


def _evaluate_finite(estimator, sets: RaggedSets, part: str, name: str, trial: int):
    """:func:`dpp.metrics.evaluate` on a fitted estimator's predictions for ``sets``.

    Its refusal of non-finite predictions is raised again naming the method, the trial and the
    part (test or training sets).
    """
    try:
        return evaluate(estimator.predict_log_proba(sets), np.asarray(sets.labels))
    except NonFiniteResultError as err:
        raise NonFiniteResultError(f"trial {trial}, method {name}, {part} sets: {err}") from err
