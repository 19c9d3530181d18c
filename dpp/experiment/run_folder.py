"""A run folder: accepted or refused before anything in it is written, resumed without loss.

A run owns one folder (``hydra.run.dir``, or a multirun job's folder). Hydra is configured
(``configs/config.yaml``) to write nothing into it before the run is accepted: no
``.hydra/`` (``hydra.output_subdir: null``) and a log file that holds its lines in memory
(:class:`DeferredFileHandler`). :func:`accept` then decides, writing nothing:

* a folder that holds no run is accepted as a new run;
* a folder that holds a run (``results.json`` or ``config_resolved.yaml``) is refused unless
  ``resume=true``, and refused while the process that owns it is alive;
* a resumed run continues the *recorded* config: keys the command line names must agree with
  the recorded run (except :data:`RESUMABLE_KEYS`), the number of trials is the recorded one
  unless ``trials`` is named, and never so few that a finished trial would be dropped.

Only then does :func:`record` write ``.hydra/config.yaml``, ``.hydra/overrides.yaml`` and
``.hydra/hydra.yaml`` (as Hydra would), ``config_resolved.yaml``, and release the log lines, so
a folder's config, overrides and results always describe the same run.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from dpp.errors import ConfigError
from dpp.experiment.reporting import load_results, run_state

#: Config keys whose value may change when a run is resumed (they change no result); keys under
#: ``distributed.`` (a new launch has a new coordinator) and ``tracking.`` also may.
RESUMABLE_KEYS = ("resume", "trials", "verbose", "compilation_cache", "n_jobs")
#: The file whose presence says that a folder holds an accepted run.
RECORD = "config_resolved.yaml"

OmegaConf.register_new_resolver(
    "dpp_path_safe", lambda text: str(text).replace("/", "_").replace("\\", "_"), replace=True
)


def _resumable(key: str) -> bool:
    return key in RESUMABLE_KEYS or key.split(".")[0] in ("distributed", "tracking")


# ---------------------------------------------------------------------- log file
class DeferredFileHandler(logging.FileHandler):
    """A log file that keeps its lines in memory until the run is accepted.

    Hydra's job logging opens the run's log before the task starts; this handler (named in
    ``configs/config.yaml``) writes nothing until :func:`accept_logs`, so a refused run leaves
    the folder's log untouched. Lines before acceptance are then written in order.
    """

    def __init__(self, filename, mode: str = "a", encoding=None, delay: bool = True):
        super().__init__(filename, mode, encoding, delay=True)
        self._pending: list[logging.LogRecord] = []
        self._accepted = False

    def emit(self, record: logging.LogRecord) -> None:
        """Writes ``record`` once accepted; holds it until then."""
        if self._accepted:
            super().emit(record)
        elif len(self._pending) < 10_000:
            self._pending.append(record)

    def accept(self) -> None:
        """Writes the held lines and every later one to the file."""
        self._accepted = True
        pending, self._pending = self._pending, []
        for record in pending:
            super().emit(record)


def accept_logs() -> None:
    """Releases the held lines of every :class:`DeferredFileHandler` of the root logger."""
    for handler in logging.getLogger().handlers:
        if isinstance(handler, DeferredFileHandler):
            handler.accept()


# ---------------------------------------------------------------------- the launch
@dataclasses.dataclass(frozen=True)
class Launch:
    """What started this run: Hydra's task overrides and config-group choices.

    ``overrides`` is ``None`` for a run started from Python with a composed config (then every
    key counts as named).
    """

    overrides: tuple[str, ...] | None = None
    choices: dict | None = None
    hydra_cfg: DictConfig | None = None

    @classmethod
    def current(cls) -> Launch:
        """The Hydra launch of the running job, or an empty one outside Hydra."""
        from hydra.core.hydra_config import HydraConfig

        if not HydraConfig.initialized():
            return cls()
        hydra_cfg = HydraConfig.get()
        return cls(
            tuple(hydra_cfg.overrides.task),
            dict(OmegaConf.to_container(hydra_cfg.runtime.choices)),
            HydraConfig.instance().cfg,
        )


def _parse(overrides):
    from hydra.core.override_parser.overrides_parser import OverridesParser

    return OverridesParser.create().parse_overrides(list(overrides))


def check_overrides(launch: Launch) -> None:
    """Refuses command-line overrides that would be silently ignored.

    Raises:
        ConfigError: ``+key=value`` for a key that is not a config group (dpp reads no key
            it does not define; a ``+`` adds a new one).
    """
    if launch.overrides is None:
        return
    for override in _parse(launch.overrides):
        key = override.key_or_group
        if override.is_add() and key not in (launch.choices or {}):
            raise ConfigError(
                f"{override.input_line}: dpp reads no key {key!r} (a '+' adds a key the config "
                "does not have); drop the '+' to change an existing key, or check the spelling"
            )


# ---------------------------------------------------------------------- accept or refuse
def holds_run(out: Path) -> bool:
    """Whether ``out`` holds an accepted run (its config or its results)."""
    return (out / "results.json").is_file() or (out / RECORD).is_file()


def _finished(previous: dict) -> list[int]:
    return sorted({r["trial"] for r in previous.get("trials", [])})


def _flat_resolved(cfg: DictConfig) -> dict:
    return flatten(OmegaConf.to_container(cfg, resolve=True))


def flatten(tree: dict, prefix: str = "") -> dict:
    """``{"a.b": value}`` for the leaves of a nested dict (lists are leaves)."""
    out = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flatten(value, name + "."))
        else:
            out[name] = value
    return out


def _select(cfg: DictConfig, key: str):
    value = OmegaConf.select(cfg, key, default="__absent__")
    if OmegaConf.is_config(value):
        return OmegaConf.to_container(value, resolve=True)
    return value


def _recorded(out: Path) -> tuple[DictConfig | None, list[str] | None, dict | None]:
    """The recorded config (unresolved where Hydra's copy exists), overrides and choices."""
    hydra_dir = out / ".hydra"
    config = None
    if (hydra_dir / "config.yaml").is_file():
        config = OmegaConf.load(hydra_dir / "config.yaml")
    elif (out / RECORD).is_file():
        config = OmegaConf.load(out / RECORD)
    overrides = choices = None
    if (hydra_dir / "overrides.yaml").is_file():
        overrides = [str(o) for o in OmegaConf.load(hydra_dir / "overrides.yaml")]
    if (hydra_dir / "hydra.yaml").is_file():
        saved = OmegaConf.load(hydra_dir / "hydra.yaml")
        found = OmegaConf.select(saved, "hydra.runtime.choices")
        choices = None if found is None else dict(OmegaConf.to_container(found))
    return config, overrides, choices


@dataclasses.dataclass
class Accepted:
    """The outcome of :func:`accept`: the config the run uses and what it continues."""

    cfg: DictConfig
    previous: dict | None = None  # results.json of the resumed run
    recorded_overrides: list[str] | None = None
    resumed: bool = False
    notes: list[str] = dataclasses.field(default_factory=list)


def accept(out: Path, cfg: DictConfig, launch: Launch) -> Accepted:
    """Accepts ``out`` for a run of ``cfg``, or refuses; writes nothing.

    Args:
        out: the run folder.
        cfg: the composed config of this launch.
        launch: its overrides (:meth:`Launch.current`).

    Returns:
        The config to run (the recorded one when resuming, with the resumable keys of this
        launch) and the earlier results.

    Raises:
        ConfigError: ``out`` holds a run and ``resume`` is false; its process is still alive;
            the keys this launch names differ from the recorded run's (naming them); or
            ``trials`` is named below the number of finished trials.
    """
    if not holds_run(out):
        if cfg.resume:
            logging.getLogger(__name__).info("resume=true: %s holds no run yet; starting it", out)
        return Accepted(cfg)
    previous = load_results(out) if (out / "results.json").is_file() else None
    if not cfg.resume:
        status = "accepted, no results yet" if previous is None else previous.get("status")
        raise ConfigError(
            f"{out} already holds the results of a run (status {status!r}); nothing in it was "
            "changed. Pass resume=true to continue it, or choose another output directory "
            "(hydra.run.dir=...)"
        )
    if previous is not None:
        state, why = run_state(out)
        if state == "running":
            raise ConfigError(f"{out} is still running ({why}); resume it once it has stopped")
    recorded, recorded_overrides, recorded_choices = _recorded(out)
    if recorded is None:
        raise ConfigError(f"{out} holds results but no recorded config ({RECORD}); cannot resume")
    if launch.overrides is None:
        effective, named_trials = _compare_all(out, cfg, recorded)
    else:
        effective, named_trials = _compare_named(out, cfg, recorded, launch, recorded_choices)
    finished = _finished(previous or {})
    notes = []
    if named_trials and finished and cfg.trials <= finished[-1]:
        raise ConfigError(
            f"resume=true with trials={cfg.trials} would drop the finished trial(s) "
            f"{[t for t in finished if t >= cfg.trials]} of the run in {out} (recorded "
            f"trials={recorded.trials}); pass trials>={finished[-1] + 1} or leave trials out"
        )
    if not named_trials and recorded.trials != cfg.trials:
        notes.append(f"trials={recorded.trials} as recorded (name trials=N to run more)")
    return Accepted(effective, previous, recorded_overrides, True, notes)


def _changed_error(out: Path, changed) -> ConfigError:
    return ConfigError(
        f"resume=true but the config differs from the run in {out} in: {', '.join(changed)}"
    )


def _compare_all(out: Path, cfg: DictConfig, recorded: DictConfig):
    """From Python: every key of ``cfg`` is named; it must equal the recorded run's."""
    old, new = _flat_resolved(recorded), _flat_resolved(cfg)
    changed = sorted(
        k for k in set(old) | set(new) if not _resumable(k) and old.get(k) != new.get(k)
    )
    if changed:
        raise _changed_error(out, changed)
    return cfg, True


def _compare_named(out, cfg, recorded, launch: Launch, recorded_choices):
    """From the command line: the recorded config, with the resumable keys the launch names.

    A named group must have the recorded choice; a named key the recorded value.
    """
    effective = OmegaConf.create(OmegaConf.to_container(recorded, resolve=False))
    recorded_values = OmegaConf.create(OmegaConf.to_container(recorded, resolve=True))
    changed, named_trials = [], False
    for override in _parse(launch.overrides):
        key = override.key_or_group
        if key in (launch.choices or {}):  # a config group: experiment=..., dataset=...
            if recorded_choices is None:
                raise ConfigError(
                    f"{override.input_line}: the run in {out} has no record of its config "
                    "groups (.hydra/hydra.yaml); resume it without naming groups"
                )
            if recorded_choices.get(key) != launch.choices[key]:
                changed.append(f"{key} (recorded {recorded_choices.get(key)})")
            continue
        if _resumable(key):
            if key != "resume":
                OmegaConf.update(effective, key, _select(cfg, key), force_add=True)
            named_trials |= key == "trials"
            continue
        old = _select(recorded_values, key)
        if old != _select(cfg, key):
            changed.append(f"{key} (recorded {old!r})")
    if changed:
        raise _changed_error(out, changed)
    OmegaConf.update(effective, "resume", True)
    return effective, named_trials


def discard_unused(out: Path, since: float) -> bool:
    """Removes ``out`` if it is an empty folder made at or after ``since``: a refused launch's.

    Hydra makes a run's folder before dpp sees the run; a launch refused before it starts (a bad
    config value, a folder it may not use, a bad ``devices``) writes nothing in it, and would
    otherwise leave it behind, empty. A folder that holds anything, or that is older than
    ``since`` (one the user made), is kept.

    Args:
        out: the run folder.
        since: a time (seconds since the epoch) before the launch made its folder.

    Returns:
        Whether the folder was removed.
    """
    try:
        if not out.is_dir() or any(out.iterdir()) or out.stat().st_mtime < since - 1.0:
            return False
        out.rmdir()
    except OSError:  # another process wrote into it meanwhile: keep it
        return False
    return True


def is_complete(previous: dict | None, kept_trials: set[int], trials: int) -> bool:
    """Whether a resumed run has nothing left to do: recorded ``complete`` with every trial kept.

    Args:
        previous: the run's ``results.json`` (``None``: no results).
        kept_trials: the trials whose records (every method) and files are on disk.
        trials: the trials the resumed run asks for.
    """
    return (
        previous is not None
        and previous.get("status") == "complete"
        and kept_trials >= set(range(trials))
    )


# ---------------------------------------------------------------------- record
def _write(path: Path, text: str) -> None:
    """Writes ``text`` to ``path`` atomically (a temporary file renamed over it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def _overrides(accepted: Accepted, launch: Launch) -> list[str]:
    """This launch's overrides, or on resume the recorded ones with the resumable keys named."""
    if not accepted.resumed or accepted.recorded_overrides is None:
        return list(launch.overrides or ())
    lines = {o.key_or_group: o.input_line for o in _parse(accepted.recorded_overrides)}
    for override in _parse(launch.overrides or ()):
        if _resumable(override.key_or_group) and override.key_or_group != "resume":
            lines[override.key_or_group] = override.input_line
    return list(lines.values())


def record(out: Path, accepted: Accepted, launch: Launch) -> None:
    """Writes the accepted run's config files and releases its log lines.

    ``.hydra/config.yaml``, ``.hydra/overrides.yaml`` and ``.hydra/hydra.yaml`` for a Hydra
    launch (on resume the recorded ``hydra.yaml`` is kept: it names the original launch), and
    ``config_resolved.yaml`` always, each written atomically.
    """
    if launch.overrides is not None:
        hydra_dir = out / ".hydra"
        _write(hydra_dir / "config.yaml", OmegaConf.to_yaml(accepted.cfg))
        overrides = OmegaConf.create(_overrides(accepted, launch))
        _write(hydra_dir / "overrides.yaml", OmegaConf.to_yaml(overrides))
        if launch.hydra_cfg is not None and not (
            accepted.resumed and (hydra_dir / "hydra.yaml").is_file()
        ):
            _write(hydra_dir / "hydra.yaml", OmegaConf.to_yaml(launch.hydra_cfg))
    _write(out / RECORD, OmegaConf.to_yaml(accepted.cfg, resolve=True))
    accept_logs()
