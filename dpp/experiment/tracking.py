"""Experiment tracking with MLflow (``tracking=mlflow``; the optional extra ``tracking``).

A run logs, to an MLflow tracking store (by default the local folder ``mlruns/``: a SQLite file
``mlruns/mlflow.db`` and the artifacts in ``mlruns/artifacts/``; or any tracking URI):

* parameters: the resolved config, flattened (``model.l2``, ``dataset.name``, ...); the config
  files as artifacts;
* metrics: every method's test and training metrics per trial (``<method>/<metric>``, step =
  trial), and for every fit its training ``L`` and ``beta`` per coordinate-ascent round
  (``<method>/train_L/trial<t>``, ``<method>/beta/trial<t>``, step = round);
* tags: each fit's status (``<method>/status/trial<t>``), the run folder, the run's status;
* artifacts: the run folder's figures, tables, ``results.json`` and model files, at the end.

In a multirun (and an Optuna sweep) :class:`MlflowSweepCallback` opens one parent run for the
sweep, and each job is a child run of it (MLflow's ``mlflow.parentRunId`` tag), whatever process
or node the launcher runs it in. A resumed run continues its MLflow run (its id is kept in the
run folder's ``tracking.json``).

Everything goes through ``mlflow.tracking.MlflowClient`` with explicit run ids, so jobs run in
one process never share an active run.
"""

from __future__ import annotations

import json
import logging
import math
import time
from pathlib import Path

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from dpp.experiment.run_folder import flatten
from dpp.model import FitReport

logger = logging.getLogger(__name__)

#: Per-trial record fields logged as metrics (those present).
RECORD_METRICS = (
    "accuracy", "balanced_accuracy", "test_log_likelihood", "kl_bits", "train_accuracy",
    "final_objective", "fit_seconds", "kmeans_seconds", "validation_log_likelihood",
    "validation_accuracy",
)  # fmt: skip
#: Where the run's MLflow ids are kept, in the run folder and the sweep folder.
RUN_FILE = "tracking.json"
PARENT_FILE = "tracking_parent.json"
_TERMINAL = {"complete": "FINISHED", "failed": "FAILED", "interrupted": "KILLED"}


def _client(uri: str):
    try:
        from mlflow.tracking import MlflowClient
    except ImportError:  # pragma: no cover - the extra is part of .[test]
        from dpp.errors import ConfigError

        raise ConfigError("tracking=mlflow needs MLflow: pip install -e '.[tracking]'") from None
    return MlflowClient(tracking_uri=_uri(uri))


def _uri(uri: str) -> str:
    """A tracking URI; a plain path is a local store folder: ``sqlite:///<folder>/mlflow.db``.

    (MLflow 3 keeps its ``./mlruns`` file store in maintenance mode and refuses it by default;
    a SQLite file in the folder is its recommended local store.)
    """
    if "://" in uri or uri.startswith("file:"):
        return uri
    folder = Path(uri).expanduser().resolve()
    folder.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{folder / 'mlflow.db'}"


def _artifact_root(uri: str) -> str | None:
    """For a local store folder, ``<folder>/artifacts``; else the server's default (``None``)."""
    if "://" in uri or uri.startswith("file:"):
        return None
    return (Path(uri).expanduser().resolve() / "artifacts").as_uri()


def _experiment_id(client, name: str, uri: str) -> str:
    experiment = client.get_experiment_by_name(name)
    if experiment is not None:
        return experiment.experiment_id
    return client.create_experiment(name, artifact_location=_artifact_root(uri))


def _finite(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


class MlflowRun:
    """One experiment run's MLflow run (see the module docstring).

    Args:
        cfg: the run's config (with a ``tracking`` node: ``uri``, ``experiment``).
        out: the run folder.
        parent_id: the sweep's parent run, or ``None``.
        run_name: the MLflow run's name (default: the folder's name).
    """

    def __init__(self, cfg: DictConfig, out: Path, parent_id: str | None = None, run_name=None):
        from mlflow.entities import Param, RunTag

        self.client = _client(cfg.tracking.uri)
        self.out = Path(out)
        previous = self.out / RUN_FILE
        if previous.is_file():  # a resumed run continues its MLflow run
            self.run_id = json.loads(previous.read_text())["run_id"]
            self.client.update_run(self.run_id, status="RUNNING")
            logger.info("tracking: continuing MLflow run %s", self.run_id)
            return
        tags = {"dpp.run_dir": str(self.out.resolve()), "dpp.status": "running"}
        if parent_id is not None:
            tags["mlflow.parentRunId"] = parent_id
        experiment = _experiment_id(self.client, str(cfg.tracking.experiment), cfg.tracking.uri)
        run = self.client.create_run(experiment, run_name=run_name or self.out.name, tags=tags)
        self.run_id = run.info.run_id
        flat = flatten(OmegaConf.to_container(cfg, resolve=True))
        params = [Param(k, str(v)[:6000]) for k, v in sorted(flat.items())]
        for start in range(0, len(params), 100):  # MLflow takes 100 parameters a batch
            self.client.log_batch(self.run_id, params=params[start : start + 100])
        self.client.log_batch(self.run_id, tags=[RunTag("dpp.experiment", str(cfg.name))])
        previous.write_text(json.dumps({"run_id": self.run_id, "uri": _uri(cfg.tracking.uri)}))
        logger.info("tracking: MLflow run %s in %s", self.run_id, _uri(cfg.tracking.uri))

    def log_record(self, record: dict) -> None:
        """Logs one (trial, method) record: its metrics, its per-round ``L`` and ``beta``."""
        from mlflow.entities import Metric, RunTag

        trial, method = int(record["trial"]), record["method"]
        now = int(time.time() * 1000)  # milliseconds, as MLflow records them
        metrics = [
            Metric(f"{method}/{name}", float(record[name]), now, trial)
            for name in RECORD_METRICS
            if _finite(record.get(name))
        ]
        history = record.get("objective_history") or []
        metrics += [
            Metric(f"{method}/train_L/trial{trial}", float(v), now, step)
            for step, v in enumerate(history)
            if _finite(v)
        ]
        facts = FitReport.from_dict(method, record.get("info") or {}).prototypes
        betas = (facts.steps.get("beta") if facts is not None else None) or []
        metrics += [
            Metric(f"{method}/beta/trial{trial}", float(v), now, step)
            for step, v in enumerate(betas)
            if _finite(v)
        ]
        tags = []
        if record.get("fit_status") is not None:
            tags.append(RunTag(f"{method}/status/trial{trial}", str(record["fit_status"])))
        for start in range(0, len(metrics), 1000):  # MLflow takes 1000 metrics a batch
            self.client.log_batch(self.run_id, metrics=metrics[start : start + 1000])
        if tags:
            self.client.log_batch(self.run_id, tags=tags)

    def finish(self, results: dict) -> None:
        """Logs the summary and the run folder's files, and ends the run with its status."""
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        metrics = [
            Metric(f"{method}/{name}_mean", float(stat["mean"]), now, 0)
            for method, stats in (results.get("summary") or {}).items()
            for name, stat in stats.items()
            if _finite(stat.get("mean"))
        ]
        validation = results.get("validation") or {}
        if _finite(validation.get("value")):
            name = f"objective/{validation['metric']}"
            metrics.append(Metric(name, float(validation["value"]), now, 0))
        if metrics:
            self.client.log_batch(self.run_id, metrics=metrics)
        status = results.get("status", "failed")
        self.client.set_tag(self.run_id, "dpp.status", status)
        if results.get("warnings"):
            self.client.set_tag(self.run_id, "dpp.warnings", "\n".join(results["warnings"])[:5000])
        for path in sorted(self.out.iterdir()):
            if path.name in (RUN_FILE, "heartbeat.json") or path.name.endswith(".tmp"):
                continue
            if path.is_dir():
                self.client.log_artifacts(self.run_id, str(path), path.name)
            elif path.is_file():
                self.client.log_artifact(self.run_id, str(path))
        self.client.set_terminated(self.run_id, _TERMINAL.get(status, "FAILED"))


def start(cfg: DictConfig, out: Path) -> MlflowRun | None:
    """The run's tracker when ``cfg.tracking`` is set, else ``None``.

    In a Hydra multirun the job becomes a child of the sweep's parent run (written to the sweep
    folder by :class:`MlflowSweepCallback`).
    """
    tracking = cfg.get("tracking")
    if not tracking or tracking.get("kind") != "mlflow":
        return None
    parent_id, run_name = None, None
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    if HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN:
        parent_file = Path(HydraConfig.get().sweep.dir) / PARENT_FILE
        if parent_file.is_file():
            parent_id = json.loads(parent_file.read_text())["run_id"]
        run_name = f"job {HydraConfig.get().job.num}: {HydraConfig.get().job.override_dirname}"
    return MlflowRun(cfg, out, parent_id, run_name)


class MlflowSweepCallback(Callback):
    """Hydra callback (``configs/tracking/mlflow.yaml``): one parent MLflow run per multirun.

    ``on_multirun_start`` creates it and writes its id to ``<sweep dir>/tracking_parent.json``,
    where every job finds it; ``on_multirun_end`` writes the sweep table and figure
    (:func:`dpp.experiment.sweep.write_sweep`), logs them with the sweep's files (Optuna's
    ``optimization_results.yaml``) and ends it.
    """

    def on_multirun_start(self, config: DictConfig, **kwargs) -> None:
        """Creates the sweep's parent run."""
        tracking = config.get("tracking")
        if not tracking or tracking.get("kind") != "mlflow":
            return
        client = _client(tracking.uri)
        sweep_dir = Path(config.hydra.sweep.dir)
        sweep_dir.mkdir(parents=True, exist_ok=True)
        experiment = _experiment_id(client, str(tracking.experiment), tracking.uri)
        overrides = list(config.hydra.overrides.task)
        run = client.create_run(
            experiment,
            run_name=f"sweep {sweep_dir.name}",
            tags={"dpp.sweep_dir": str(sweep_dir.resolve()), "dpp.overrides": " ".join(overrides)},
        )
        (sweep_dir / PARENT_FILE).write_text(json.dumps({"run_id": run.info.run_id}))
        logger.info("tracking: MLflow parent run %s for the sweep", run.info.run_id)

    def on_multirun_end(self, config: DictConfig, **kwargs) -> None:
        """Logs the sweep folder's own files and ends the parent run."""
        tracking = config.get("tracking")
        parent_file = Path(config.hydra.sweep.dir) / PARENT_FILE
        if not tracking or not parent_file.is_file():
            return
        client = _client(tracking.uri)
        run_id = json.loads(parent_file.read_text())["run_id"]
        sweep_dir = Path(config.hydra.sweep.dir)
        # the sweep's table and figure (dpp/experiment/sweep.py), as scripts/collect.py writes them
        try:
            from dpp.experiment.sweep import write_sweep

            write_sweep(sweep_dir)
        except (FileNotFoundError, ValueError) as err:
            logger.warning("tracking: no sweep table for the parent run (%s)", err)
        for pattern in ("*.yaml", "sweep.*"):
            for path in sorted(sweep_dir.glob(pattern)):
                client.log_artifact(run_id, str(path))
        client.set_terminated(run_id, "FINISHED")
