"""The experiment layer: runs a composed Hydra config and writes its outputs.

``run(cfg)`` is what ``experiments/run.py`` calls. Concerns are split:
:mod:`dpp.experiment.settings` turns the config into estimators and typed settings (methods are
``_target_`` classes), :mod:`dpp.experiment.protocol` runs one trial and returns its records
(no I/O), and
this module owns the outputs: ``results.json``/``results.csv``/``table.md`` after each fit, the
heartbeat, resumption, signals, the first trial's fitted models (``models/<method>.npz``) and
figures, the run figures and the paper tables.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import time
import warnings
from pathlib import Path

import hydra
import jax
import numpy as np
from omegaconf import DictConfig, OmegaConf
from tqdm.auto import tqdm
from tqdm.contrib.logging import logging_redirect_tqdm

import dpp.experiment.config_store  # noqa: F401  (registers the model/optimizer defaults with Hydra)
from dpp.datasets.base import Dataset, default_cache_dir, default_data_dir
from dpp.errors import ConfigError, DataError, FitWarning
from dpp.experiment import discovery, plots, run_folder, tracking
from dpp.experiment.config_check import check_config
from dpp.experiment.protocol import Trial, run_trial
from dpp.experiment.reporting import (
    Recorder,
    finished_units,
    process_identity,
    write_results,
)
from dpp.experiment.settings import method_configs, trial_settings
from dpp.experiment.splits import check_split
from dpp.experiment.tables import REPORTS
from dpp.model import CLEAN_STATUSES, FitReport
from dpp.sharding import initialize_distributed
from dpp.solvers.cache import enable_persistent_cache, off_by_environment

logger = logging.getLogger(__name__)

#: When this module was imported: earlier than any run folder a launch of this process makes
#: (Hydra makes it before calling the task), so a refused launch can remove its own, empty one.
_IMPORTED_AT = time.time()


class _NoMissingBackendNotice(logging.Filter):
    """Drops JAX's INFO notice that an absent accelerator backend (TPU, ...) did not start.

    On a CPU or GPU machine it is noise in every run log; real errors are warnings and pass.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        return not (
            record.levelno <= logging.INFO
            and record.getMessage().startswith("Unable to initialize backend")
        )


logging.getLogger("jax._src.xla_bridge").addFilter(_NoMissingBackendNotice())

OmegaConf.register_new_resolver("dpp_data_dir", lambda: str(default_data_dir()), replace=True)
OmegaConf.register_new_resolver("dpp_cache_dir", lambda: str(default_cache_dir()), replace=True)


# ---------------------------------------------------------------------- figures
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
        centres = trial.transform.inverse(centres)
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


def _contour_evidence(out_dir, trial: Trial, dataset: Dataset, shapes: int = 4):
    """MPEG-7: the first test shape of ``shapes`` classes, each point coloured by DPP's evidence.

    A point's evidence is its row of ``instance_scores`` centred over the classes, at the
    shape's true class: its share of that class's score beyond the mean class score.
    """
    if "dpp" not in trial.estimators or not dataset.item_paths:
        raise ValueError("contour_evidence needs the dpp model and a dataset of shape files")
    from scipy.special import softmax

    from dpp.datasets.mpeg7 import kept_points

    labels = np.asarray(dataset.sets.labels).argmax(1)
    test = np.asarray(trial.test_idx)
    classes = list(dict.fromkeys(labels[test]))
    chosen = np.array(
        [test[labels[test] == c][0] for c in classes[:: max(len(classes) // shapes, 1)][:shapes]]
    )
    estimator = trial.estimators["dpp"]
    sets = dataset.sets.subset(chosen)
    scores = estimator.instance_scores(sets)
    probability = softmax(np.stack([s.sum(0) for s in scores]) + estimator.intercept_, axis=1)
    drawn = []
    for n, index in enumerate(chosen):  # a handful of shapes to draw
        c = labels[index]
        evidence = scores[n][:, c] - scores[n].mean(axis=1)
        points = kept_points(dataset.item_paths[index], int(dataset.info["keep_every"]))
        title = f"{dataset.class_names[c]}: p = {probability[n, c]:.2f}"
        drawn.append({"points": points, "evidence": evidence, "title": title})
    plots.contour_evidence(drawn, out_dir / "contour_evidence.png")


#: Figures and reports drawn from the first trial's models.
TRIAL_FIGURES = {
    "figure1": _figure1,
    "prototypes": _prototypes,
    "partition_map": _partition_map,
    "contour_evidence": _contour_evidence,
}
#: The file each trial figure writes last (written atomically: present means complete).
TRIAL_FIGURE_FILES = {
    "figure1": "figure1.png",
    "prototypes": "prototypes.png",
    "partition_map": "partition_map.png",
    "contour_evidence": "contour_evidence.png",
}
#: Methods a trial figure needs; a figure whose methods are not in the run is skipped (noted).
TRIAL_FIGURE_NEEDS = {
    "figure1": ("dpp", "standard"),
    "prototypes": ("dpp",),
    "contour_evidence": ("dpp",),
}
RUN_FIGURES = {
    "loglik": lambda out, records, name: plots.loglik_bars(records, out / f"{name}.png"),
    "figure2a": lambda out, records, name: plots.loglik_bars(
        records, out / f"{name}.png", "Figure 2(a): MPEG-7 test log-likelihood"
    ),
    "figure2b": lambda out, records, name: plots.loglik_bars(
        records, out / f"{name}.png", "Figure 2(b): Indian Pines test log-likelihood"
    ),
    "history": lambda out, records, name: plots.objective_histories(records, out / f"{name}.png"),
    "accuracy": lambda out, records, name: plots.accuracy_dots(records, out / f"{name}.png"),
    "kl_bits": lambda out, records, name: _kl_bits(out, records, name),
}


def _kl_bits(out: Path, records: list[dict], name: str):
    if not any("kl_bits" in r for r in records):
        logger.info("figure %s skipped: the labels are hard (no KL in bits recorded)", name)
        return None
    return plots.kl_bits(records, out / f"{name}.png")


# ---------------------------------------------------------------------- run
def _output_path(output_dir) -> Path:
    """The run folder: ``output_dir``, else Hydra's, else ``outputs/<date>_<time>``; not made."""
    if output_dir is None:
        from hydra.core.hydra_config import HydraConfig

        output_dir = (
            HydraConfig.get().runtime.output_dir
            if HydraConfig.initialized()
            else Path("outputs") / time.strftime("%Y-%m-%d_%H-%M-%S")
        )
    return Path(output_dir)


def validation_value(records: list[dict], metric: str | None) -> float | None:
    """The value ``experiments/run.py`` returns for Hydra's sweepers.

    ``metric`` of the primary method (the first record of each trial), averaged over trials;
    ``None`` without a metric.

    Raises:
        ValueError: if a record of the primary method lacks ``metric``.
    """
    if metric is None or not records:
        return None
    primary = records[0]["method"]
    values = [r[metric] for r in records if r["method"] == primary and metric in r]
    if len(values) != len({r["trial"] for r in records}):
        raise ValueError(f"validation.metric {metric!r} is missing from the {primary} records")
    return float(np.mean(values))


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
            reason = FitReport.from_dict(r["method"], r["info"]).reason  # the record's report
            warnings.append(f"trial {r['trial']} {r['method']}: {r['fit_status']}: {reason}")
    return warnings


@contextlib.contextmanager
def _fit_warnings_logged():
    """Every :class:`~dpp.errors.FitWarning` of the run becomes a warning line of its log.

    (Python would print each distinct message once on stderr, outside the run's log.)
    """
    fit_logger = logging.getLogger("dpp.fit")
    default_show = warnings.showwarning

    def show(message, category, filename, lineno, file=None, line=None):
        if issubclass(category, FitWarning):
            fit_logger.warning("%s", message)
        else:
            default_show(message, category, filename, lineno, file, line)

    with warnings.catch_warnings():
        warnings.simplefilter("always", FitWarning)
        warnings.showwarning = show
        yield


def _trial_figures(
    cfg: DictConfig, methods, quiet: bool = False
) -> tuple[list[str], dict[str, str]]:
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
        elif name == "contour_evidence" and cfg.dataset.name != "mpeg7":
            skipped[name] = "needs the mpeg7 dataset (its shape files)"
        else:
            names.append(name)
            continue
        if not quiet:
            logger.info("figure %s skipped: %s", name, skipped[name])
    return names, skipped


def save_models(folder: Path, trial: Trial, class_names=()) -> dict[str, Path]:
    """Saves a trial's fitted estimators as ``<folder>/<method>.npz`` (:mod:`dpp.estimators.io`).

    Each estimator was fitted on the trial's raw training sets with the trial's preprocessing
    (``preprocess``), so the file predicts on sets in the dataset loader's units (what
    ``scripts/predict.py`` reads). The dataset's class names become ``classes_`` of the saved
    copy. Every method of :data:`dpp.estimators.ESTIMATORS` writes one (the pooled and
    bag-of-words regressions too); an estimator class without ``save`` is skipped.
    """
    paths = {}
    for name, estimator in trial.estimators.items():
        if not saves_model(type(estimator)):
            continue
        saved = copy.copy(estimator)
        if len(class_names) == len(saved.classes_):
            saved.classes_ = np.asarray(class_names)
        paths[name] = folder / f"{name}.npz"
        saved.save(paths[name])
    return paths


def saves_model(cls) -> bool:
    """Whether a method's estimator class writes a model file (:mod:`dpp.estimators.io`)."""
    return callable(getattr(cls, "save", None))


def _check_devices(devices) -> None:
    """Refuses ``devices`` beyond what JAX sees, before any data is read.

    Raises:
        ConfigError: naming the count and the devices JAX sees.
    """
    if devices == "all" or int(devices) <= jax.device_count():
        return
    platform = jax.devices()[0].platform
    raise ConfigError(
        f"devices={devices} but JAX sees {jax.device_count()} {platform} device(s); use "
        "devices=all, or start more (GPUs, or XLA_FLAGS=--xla_force_host_platform_device_count"
        "=N on CPU)"
    )


def _check_dataset(dataset: Dataset, cfg: DictConfig) -> None:
    """Refuses data the split cannot use (a class too small), naming the class and the file.

    Raises:
        DataError: naming the data file (or the dataset) and the class.
    """
    try:
        check_split(dataset.sets.labels, dataset.class_names, **cfg.dataset.split)
    except ValueError as err:
        raise DataError(f"{dataset.info.get('path', dataset.name)}: {err}") from None


def _kept_records(out: Path, cfg: DictConfig, methods, previous: dict | None) -> list[dict]:
    """Records of the earlier run's fully finished trials (every method), in trial order.

    Trial 0 counts as finished only once its models and figures are on disk (they are written
    after its records); otherwise it is fitted again, with the same seed and the same numbers.
    """
    if previous is None:
        return []
    figures, _ = _trial_figures(cfg, methods, quiet=True)
    trial0_files = [
        out / "models" / f"{m}.npz"
        for m, method_cfg in methods.items()
        if saves_model(hydra.utils.get_class(method_cfg._target_))
    ]
    trial0_files += [out / TRIAL_FIGURE_FILES[name] for name in figures]

    def keep(trial: int) -> bool:
        return trial < cfg.trials and (trial > 0 or all(p.is_file() for p in trial0_files))

    kept = finished_units(previous.get("trials", []), lambda r: r["trial"], methods, keep)
    return sorted(kept, key=lambda r: r["trial"])  # stable: each trial's methods in order


def run(cfg: DictConfig, output_dir: str | Path | None = None) -> dict:
    """Runs an experiment described by a composed config and writes its outputs.

    Every config value is checked before any data is read. ``results.json`` carries the run's
    status (``running``, ``complete``, ``failed``, ``interrupted``), the process's pid, host and
    start time, and fit warnings (a DPP fit whose status is not ``converged``); ``heartbeat.json``
    is refreshed while the process lives, so :func:`dpp.experiment.reporting.run_state`
    recognises a killed run. With ``resume=true`` a run continues in the same directory from its
    finished trials; a directory that already holds a run is otherwise refused.

    Args:
        cfg: the root config (``configs/config.yaml`` with overrides).
        output_dir: run directory; defaults to Hydra's output directory.

    Returns:
        The content of ``results.json``; with ``validation.metric`` set, ``["validation"]``
        holds the metric's name and its value (:func:`validation_value`).

    Raises:
        ConfigError: a bad config value, ``devices`` beyond JAX's count, or a folder that holds
            a run it may not continue (all before anything is written,
            :mod:`dpp.experiment.run_folder`);
            a ``K`` beyond a trial's training vectors (before k-means; ``status = "failed"``).
        DataError: a class too small for the split, naming the class and the file.
        NonFiniteResultError: a fit or metric is not finite; ``results.json`` then holds the
            trials finished so far with ``status = "failed"``.
        RunInterrupted: SIGTERM or SIGINT; ``status = "interrupted"``.
        ValueError, FileNotFoundError: for bad data; ``status = "failed"``.
    """
    out = _output_path(output_dir)
    try:  # a launch refused before it starts leaves no folder behind
        check_config(cfg, [*TRIAL_FIGURES, *RUN_FIGURES], REPORTS)
        launch = run_folder.Launch.current()
        run_folder.check_overrides(launch)
        distributed = initialize_distributed(**cfg.distributed)  # before JAX starts its backends
        _check_devices(cfg.devices)
        if distributed and jax.process_index() > 0:  # every process fits; process 0 owns out
            out = out / f"process{jax.process_index()}"
        accepted = run_folder.accept(out, cfg, launch)  # refuses before anything is written
        cfg = accepted.cfg
        if accepted.resumed:
            check_config(cfg, [*TRIAL_FIGURES, *RUN_FIGURES], REPORTS)
    except BaseException:
        run_folder.discard_unused(out, _IMPORTED_AT)
        raise
    methods = method_configs(cfg)
    records = _kept_records(out, cfg, methods, accepted.previous)
    kept = {r["trial"] for r in records}
    if accepted.resumed and run_folder.is_complete(accepted.previous, kept, cfg.trials):
        logger.info(
            "%s is complete (%d of %d trials recorded): nothing to resume, nothing changed",
            out, len(kept), cfg.trials,
        )  # fmt: skip
        return accepted.previous
    out.mkdir(parents=True, exist_ok=True)
    enable_persistent_cache(None if off_by_environment() else cfg.get("compilation_cache"))
    run_folder.record(out, accepted, launch)
    for note in accepted.notes:
        logger.info("resuming %s: %s", out, note)
    header = _header(cfg, methods, records, out, accepted.resumed)

    def write(records: list[dict], status: str, **extra) -> dict:
        return write_results(out, header, records, status, warnings=run_warnings(records), **extra)

    recorder = Recorder(out, write, records)  # heartbeat, a write per fit, the final status
    with _fit_warnings_logged(), recorder:  # recorder: SIGTERM and SIGINT end the run
        tracker = tracking.start(cfg, out)  # its failure is a failed run, with its record
        if tracker is not None:
            recorder.on_record, recorder.on_end = tracker.log_record, tracker.finish
        _run_trials(cfg, out, header, recorder)
        recorder.check()
        results = _complete(cfg, out, header, recorder)
    for warning in results["warnings"]:
        logger.warning("%s", warning)
    logger.info("results in %s", out)
    return results


def _header(cfg: DictConfig, methods, records: list[dict], out: Path, resumed: bool) -> dict:
    """The head of ``results.json``: what runs, the process, resumed trials, skipped figures.

    A resumed run always lists the trials it kept (``resumed_trials``), even none: an earlier
    run stopped inside trial 0 (before its models were written) keeps nothing and says so.
    """
    header = {
        "experiment": cfg.name,
        "dataset": cfg.dataset.name,
        "methods": list(methods),
        "num_trials": cfg.trials,
        **process_identity(),
    }
    done_trials = sorted({r["trial"] for r in records})
    if resumed or done_trials:
        header["resumed_trials"] = done_trials
        logger.info("resuming %s: trials %s already finished", out, done_trials)
    _, skipped_figures = _trial_figures(cfg, methods)
    if skipped_figures:
        header["skipped_figures"] = skipped_figures
    return header


def _run_trials(cfg: DictConfig, out: Path, header: dict, recorder: Recorder) -> None:
    """Loads the dataset and runs every trial not yet finished, keeping each record at once.

    Each record goes to ``recorder`` (``results.json`` is rewritten after every fit, and a
    signal received ends the run there); trial 0 then writes its models and figures.
    """
    settings = trial_settings(cfg)
    methods = method_configs(cfg)
    trial_figures, _ = _trial_figures(cfg, methods, quiet=True)
    done_trials = set(header.get("resumed_trials", ()))
    # a partial, called here, so that the loader's own errors reach the user unwrapped
    dataset: Dataset = hydra.utils.instantiate(cfg.dataset.loader, _partial_=True)()
    header["data_seconds"] = recorder.seconds()
    header["dataset_info"] = dataset.info
    _check_dataset(dataset, cfg)
    logger.info(
        "dataset %s: %d sets, %d classes (%.1f s)",
        dataset.name,
        dataset.sets.num_sets,
        dataset.sets.num_classes,
        header["data_seconds"],
    )
    bar = tqdm(
        total=cfg.trials, initial=len(done_trials), desc=str(cfg.name), unit="trial", disable=None
    )
    with bar, logging_redirect_tqdm():
        for trial in range(cfg.trials):
            recorder.check()
            if trial in done_trials:
                continue
            _, done = run_trial(settings, dataset, trial, on_record=recorder.keep)
            bar.update()
            if trial == 0:
                save_models(out / "models", done, dataset.class_names)
                for name in trial_figures:
                    TRIAL_FIGURES[name](out, done, dataset)


def _complete(cfg: DictConfig, out: Path, header: dict, recorder: Recorder) -> dict:
    """Writes ``results.json`` with status ``complete`` and returns it.

    The records are sorted, the sweep's metric added, and the run figures and reports drawn.
    """
    methods = list(method_configs(cfg))
    records = recorder.records
    records.sort(key=lambda r: (r["trial"], methods.index(r["method"])))
    metric = cfg.validation.metric
    if metric is not None:
        header["validation"] = {
            "metric": metric,
            "value": validation_value(records, metric),
            **({"fraction": cfg.validation.fraction} if metric != "cv_score" else {}),
        }
        logger.info(
            "%s = %.6g (the value returned to a sweeper)", metric, header["validation"]["value"]
        )
    for name in cfg.figures:
        if name in RUN_FIGURES:
            RUN_FIGURES[name](out, records, name)

    def reports(results: dict) -> None:
        for name in cfg.reports:
            filename, build = REPORTS[name]
            (out / filename).write_text(build(results))

    return recorder.finish(then=reports)
