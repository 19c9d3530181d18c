"""The typed report of a fit: :class:`FitReport`, one vocabulary of statuses for every method.

Every fitted estimator carries one as ``fit_report_``. Its JSON form (:meth:`FitReport.to_dict`,
the ``info`` of results records and model files) has a schema version (``schema``,
:data:`SCHEMA_VERSION`) and one key per field, each sub-report nested under its own key; files
written before the version (one flat dict) still read back (:meth:`FitReport.from_dict`). The
parsing lives here and nowhere else, and everything that reads a fit's outcome reads attributes.

Fields common to every method sit on :class:`FitReport`; what only some methods have sits in
typed sub-reports (``None`` where a method has none): :class:`EarlyStopping` (DPP and the
networks), :class:`PrototypeFacts` (DPP: ``beta``, saturation, devices, per-round steps),
:class:`InfoLossFacts`, :class:`CSelection` (the pooled logistic regressions' ``C``) and the
class prior's ``prior``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

#: Fit statuses, for every method: only ``converged`` and ``early_stopped`` are clean; the others
#: are warnings (the estimators log them and raise :class:`dpp.errors.FitWarning`).
#: ``max_rounds`` is a cap of rounds (or a logistic regression's ``max_iter``) reached while the
#: objective still improved, ``max_epochs`` the same for a fit trained by Adam epochs (DPP on
#: an embedding, the networks: ``unit`` ``epoch``); ``failed``: the training diverged (a
#: network's validation log-likelihood became NaN or infinite), its reason names the epoch.
STATUSES = (
    "converged", "early_stopped", "max_rounds", "max_epochs", "stalled", "saturated", "failed"
)  # fmt: skip
#: Statuses of a fit that met its stopping rule (the others are logged as warnings).
CLEAN_STATUSES = ("converged", "early_stopped")
#: The version of :meth:`FitReport.to_dict`'s form: 2, nested sub-reports (1, never written as
#: a number: the flat dict of the files before it).
SCHEMA_VERSION = 2
#: Older names of a status, read from files written before the vocabulary was one.
_OLD_STATUSES = {"iteration_limit": "max_rounds"}


def _floats(values) -> tuple[float | None, ...]:
    """A tuple of floats, ``None`` for a value not measured (JSON null, NaN)."""
    out = []
    for v in values:
        v = None if v is None else float(v)
        out.append(None if v is None or not math.isfinite(v) else v)
    return tuple(out)


def as_tuples(value):
    """Nested lists of numbers as nested tuples of floats (hashable, frozen)."""
    if isinstance(value, list | tuple):
        return tuple(as_tuples(v) for v in value)
    return float(value)


def as_lists(value):
    """Nested tuples as nested lists (the JSON form)."""
    return [as_lists(v) for v in value] if isinstance(value, tuple) else value


def _drop_none(d: dict) -> dict:
    return {k: v for k, v in d.items() if v is not None}


@dataclasses.dataclass(frozen=True)
class EarlyStopping:
    """What early stopping did, for DPP (rounds) and the networks (epochs).

    Attributes:
        source: ``validation_fraction`` (a held-out part of the training sets),
            ``validation_sets`` (given held-out sets), ``cross_validation`` (every training set
            held out once, in ``folds``: small data), ``round_cap`` (a number of rounds chosen
            by a cross-validation), or ``None`` when it did not run (``skipped`` says why).
        best: the best round or epoch on the validation sets (``None`` when not monitored).
        monitored: rounds or epochs run while monitoring.
        validation_sets: held-out sets (real ones, not padding).
        validation_fraction: the share held out, where one was.
        validation_history: ``[monitored + 1]`` validation log-likelihood per set after each
            round or epoch (``None`` where not measured).
        round_cap: the cap a ``round_cap`` fit ran under.
        skipped: why it did not run (too few sets, or ``off``).
        folds: ``source="cross_validation"``: the folds whose held-out sets chose the rounds
            (small data, :func:`dpp.selection.round_folds`); ``validation_history`` is then
            pooled over them and ``validation_sets`` counts every set once.
        unit: ``round`` (DPP's coordinate ascent) or ``epoch`` (Adam-trained networks).
    """

    source: str | None = None
    best: int | None = None
    monitored: int | None = None
    validation_sets: int | None = None
    validation_fraction: float | None = None
    validation_history: tuple[float | None, ...] = ()
    round_cap: int | None = None
    skipped: str | None = None
    folds: int | None = None
    unit: str = "round"

    def to_dict(self) -> dict:
        """The JSON form (the keys the dict reports had)."""
        best, monitored = ("best_epoch", "epochs_monitored") if self.unit == "epoch" else (
            "best_round", "rounds_monitored")  # fmt: skip
        d = {
            "source": self.source,
            "validation_sets": self.validation_sets,
            best: self.best,
            monitored: self.monitored,
            "validation_history": list(self.validation_history) if self.best is not None else None,
            "validation_fraction": self.validation_fraction,
            "round_cap": self.round_cap,
            "skipped": self.skipped,
            "folds": self.folds,
        }
        return _drop_none(d)

    @classmethod
    def from_dict(cls, d: Mapping, unit: str = "round") -> EarlyStopping:
        """Reads :meth:`to_dict`'s form (``unit``: the report's, ``round`` or ``epoch``)."""
        best = d.get("best_epoch", d.get("best_round"))
        monitored = d.get("epochs_monitored", d.get("rounds_monitored"))
        return cls(
            source=d.get("source"),
            best=None if best is None else int(best),
            monitored=None if monitored is None else int(monitored),
            validation_sets=None if d.get("validation_sets") is None else int(d["validation_sets"]),
            validation_fraction=d.get("validation_fraction"),
            validation_history=_floats(d.get("validation_history") or ()),
            round_cap=None if d.get("round_cap") is None else int(d["round_cap"]),
            skipped=d.get("skipped"),
            folds=None if d.get("folds") is None else int(d["folds"]),
            unit=unit,
        )


@dataclasses.dataclass(frozen=True)
class PrototypeFacts:
    """DPP's facts: ``beta`` (1 / squared feature units), saturation, devices, steps.

    Attributes:
        beta: the learned inverse temperature, one or ``[K]`` (``None`` for a network's DPP).
        beta_init: the starting ``beta`` (geometric mean where per prototype).
        beta_ratio: ``max(beta) / beta_init``.
        saturated_fraction: share of the training vectors whose codes are one-hot.
        devices: devices the fit used.
        steps: per round (``rounds + 1`` entries each): inner iterations, accepted steps,
            line-search failures, gradient norm, ``beta``, ... (``None`` where not measured).
        pooling_p: the generalised mean's learned exponent (``pooling="gem"``).
        embedding: the widths of a learned embedding (DPP on an embedding), else ``None``.
        weight_decay: the weight decay on the embedding that the fit kept (DPP on an
            embedding), else ``None``.
        weight_decay_held_out: ``((decay, held-out log-likelihood per set), ...)`` of every
            candidate decay, where several were fitted and the best held out kept (``None``
            where not measured).
    """

    beta: float | tuple[float, ...] | None = None
    beta_init: float | None = None
    beta_ratio: float | None = None
    saturated_fraction: float | None = None
    devices: int | None = None
    steps: Mapping[str, tuple] = dataclasses.field(default_factory=dict)
    pooling_p: float | None = None
    embedding: tuple[int, ...] | None = None
    weight_decay: float | None = None
    weight_decay_held_out: tuple[tuple[float, float], ...] | None = None

    def to_dict(self) -> dict:
        """The JSON form: the keys of the dict report's top level."""
        beta = list(self.beta) if isinstance(self.beta, tuple) else self.beta
        d = {
            "beta_init": self.beta_init,
            "beta": beta,
            "beta_ratio": self.beta_ratio,
            "saturated_fraction": self.saturated_fraction,
            "devices": self.devices,
            "steps": {k: list(v) for k, v in self.steps.items()} or None,
            "pooling_p": self.pooling_p,
            "embedding": None if self.embedding is None else list(self.embedding),
            "weight_decay": self.weight_decay,
            "weight_decay_held_out": None
            if self.weight_decay_held_out is None
            else [list(pair) for pair in self.weight_decay_held_out],
        }
        return _drop_none(d)

    @classmethod
    def from_dict(cls, d: Mapping, nested: bool = False) -> PrototypeFacts | None:
        """Reads :meth:`to_dict`'s form; ``None`` when a flat (older) report has no DPP keys.

        Raises:
            ValueError: ``steps`` that is not an object.
        """
        keys = (
            "beta_init",
            "saturated_fraction",
            "steps",
            "pooling_p",
            "embedding",
            "weight_decay",
        )
        if not nested and not any(k in d for k in keys):
            return None
        steps = d.get("steps") or {}
        if not isinstance(steps, Mapping):
            raise ValueError(f"steps must be an object, got {type(steps).__name__}")
        beta = d.get("beta")
        beta = tuple(float(b) for b in beta) if isinstance(beta, list | tuple) else beta
        embedding = d.get("embedding")
        return cls(
            beta=None if beta is None else beta if isinstance(beta, tuple) else float(beta),
            beta_init=d.get("beta_init"),
            beta_ratio=d.get("beta_ratio"),
            saturated_fraction=d.get("saturated_fraction"),
            devices=None if d.get("devices") is None else int(d["devices"]),
            steps={k: tuple(v) for k, v in steps.items()},
            pooling_p=d.get("pooling_p"),
            embedding=None if embedding is None else tuple(int(w) for w in embedding),
            weight_decay=None if d.get("weight_decay") is None else float(d["weight_decay"]),
            weight_decay_held_out=None
            if d.get("weight_decay_held_out") is None
            else tuple(
                (float(a), -math.inf if b is None else float(b))  # JSON's null: none held out
                for a, b in d["weight_decay_held_out"]
            ),
        )


@dataclasses.dataclass(frozen=True)
class InfoLossFacts:
    """InfoLoss's facts: its fixed ``beta`` and ``gamma`` and the learned ``pi`` (nested tuples)."""

    beta: float
    gamma: float
    pi: tuple

    def to_dict(self) -> dict:
        """The JSON form."""
        return {"beta": self.beta, "gamma": self.gamma, "pi": as_lists(self.pi)}

    @classmethod
    def from_dict(cls, d: Mapping) -> InfoLossFacts:
        """Reads :meth:`to_dict`'s form."""
        return cls(float(d["beta"]), float(d["gamma"]), as_tuples(d["pi"]))


@dataclasses.dataclass(frozen=True)
class CSelection:
    """A pooled logistic regression's choice of ``C`` on its grid.

    Attributes:
        C: the chosen inverse regularisation strength.
        position: where it lies in its grid (``interior``, ``lower edge``, ``upper edge``...).
        added: values the grid was extended by, in order.
    """

    C: float
    position: str | None
    added: tuple[float, ...] = ()

    def to_dict(self) -> dict:
        """The JSON form."""
        return {"C": self.C, "C_position": self.position, "Cs_added": list(self.added)}

    @classmethod
    def from_dict(cls, d: Mapping) -> CSelection:
        """Reads :meth:`to_dict`'s form."""
        added = tuple(float(c) for c in d.get("Cs_added") or ())
        return cls(float(d["C"]), d.get("C_position"), added)


@dataclasses.dataclass(frozen=True)
class FitReport:
    """How a fit went, typed: every fitted estimator's ``fit_report_``.

    Attributes:
        method: the method's name (``dpp``, ``standard``, ``infoloss``, ``pooling``, ...).
        status: one of :data:`STATUSES` (every estimator gives one: the standard prototype its
            Theta-step's, the class prior ``converged``, its closed form); ``None`` only in
            files written before every estimator had one.
        reason: a sentence saying why the status is what it is (``""`` without a status).
        rounds: coordinate-ascent rounds, epochs of a network, or InfoLoss's rounds (0 where
            there are none); ``unit`` says which.
        unit: ``round``, or ``epoch`` for the Adam-trained networks.
        history: the objective per round where one is recorded (DPP: ``L``).
        seconds: wall-clock seconds of the fit, compilation included, where measured.
        early_stopping: what early stopping did (DPP and the networks), else ``None``.
        prototypes: DPP's facts, else ``None``.
        infoloss: InfoLoss's facts, else ``None``.
        selection: a pooled logistic regression's choice of ``C``, else ``None``.
        prior: the class prior's ``[C]`` class frequencies, else ``None``.
    """

    method: str
    status: str | None = None
    reason: str = ""
    rounds: int = 0
    unit: str = "round"
    history: tuple[float, ...] = ()
    seconds: float | None = None
    early_stopping: EarlyStopping | None = None
    prototypes: PrototypeFacts | None = None
    infoloss: InfoLossFacts | None = None
    selection: CSelection | None = None
    prior: tuple[float, ...] | None = None

    def __post_init__(self):
        if self.unit not in ("round", "epoch"):
            raise ValueError(f"unit must be 'round' or 'epoch', got {self.unit!r}")
        if self.status is not None and self.status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES} or None, got {self.status!r}")

    @property
    def clean(self) -> bool:
        """Whether the fit met its stopping rule (a status of :data:`CLEAN_STATUSES`, or none)."""
        return self.status is None or self.status in CLEAN_STATUSES

    @property
    def iterative(self) -> bool:
        """Whether the method iterates (rounds or epochs): DPP, InfoLoss and the networks."""
        if self.infoloss is not None:
            return True
        return self.status is not None and self.selection is None and self.prior is None

    @property
    def converged(self) -> bool:
        """Whether the status is ``converged``."""
        return self.status == "converged"

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: the ``info`` of results records and model files.

        ``schema`` (:data:`SCHEMA_VERSION`), then one key per field (``method`` and ``history``
        are stored beside it), each sub-report under its own key (``early_stopping``,
        ``prototypes``, ``infoloss``, ``selection``); ``None`` values are left out.
        """
        d: dict[str, Any] = {
            "schema": SCHEMA_VERSION,
            "status": self.status,
            "reason": self.reason or None,
            "rounds": self.rounds,
            "unit": self.unit,
            "seconds": self.seconds,
            "prior": None if self.prior is None else list(self.prior),
        }
        for name in _PARTS:
            part = getattr(self, name)
            d[name] = None if part is None else part.to_dict()
        return _drop_none(d)

    @classmethod
    def from_dict(cls, method: str, info: Mapping, history=()) -> FitReport:
        """Reads :meth:`to_dict`'s form, and the flat dict reports of older files.

        Args:
            method: the method's name.
            info: the JSON form.
            history: the objective per round (stored beside ``info`` in model files).

        Raises:
            ValueError: a status outside :data:`STATUSES` (and its older names), a schema newer
                than :data:`SCHEMA_VERSION`, an unknown key, or a sub-report that is not an
                object.
        """
        schema = info.get("schema")
        if schema is None:
            return cls._from_flat(method, info, history)
        if schema != SCHEMA_VERSION:
            raise ValueError(
                f"schema {schema!r} is not one this dpp reads (it writes {SCHEMA_VERSION}): "
                "written by a newer dpp?"
            )
        unknown = sorted(set(info) - _KEYS)
        if unknown:
            raise ValueError(f"unknown key {unknown[0]!r} (known: {', '.join(sorted(_KEYS))})")
        for name in _PARTS:
            if info.get(name) is not None and not isinstance(info[name], Mapping):
                raise ValueError(f"{name} must be an object, got {type(info[name]).__name__}")
        unit = info.get("unit", "round")
        parts = {
            "early_stopping": lambda d: EarlyStopping.from_dict(d, unit),
            "prototypes": lambda d: PrototypeFacts.from_dict(d, nested=True),
            "infoloss": InfoLossFacts.from_dict,
            "selection": CSelection.from_dict,
        }
        status = _OLD_STATUSES.get(info.get("status"), info.get("status"))
        if unit == "epoch" and status == "max_rounds":  # written before epochs had their own
            status = "max_epochs"
        prior = info.get("prior")
        return cls(
            method=method,
            status=status,
            reason=info.get("reason") or "",
            rounds=int(info.get("rounds") or 0),
            unit=unit,
            history=tuple(float(h) for h in history),
            seconds=None if info.get("seconds") is None else float(info["seconds"]),
            prior=None if prior is None else tuple(float(q) for q in prior),
            **{
                name: None if info.get(name) is None else read(info[name])
                for name, read in parts.items()
            },
        )

    @classmethod
    def _from_flat(cls, method: str, info: Mapping, history=()) -> FitReport:
        """Reads the flat dict reports of the files written before :data:`SCHEMA_VERSION`."""
        status = info.get("status")
        status = _OLD_STATUSES.get(status, status)
        early = info.get("early_stopping")
        if early is not None and not isinstance(early, Mapping):
            raise ValueError(f"early_stopping must be an object, got {type(early).__name__}")
        infoloss = None
        if "gamma" in info and "pi" in info:
            infoloss = InfoLossFacts.from_dict(info)
        selection = None
        if info.get("C") is not None:
            selection = CSelection.from_dict(info)
        unit = "epoch" if "epochs" in info else "round"
        rounds = info.get("rounds", info.get("epochs", 0))
        prior = info.get("prior")
        return cls(
            method=method,
            status=status,
            reason=info.get("status_reason") or "",
            rounds=int(rounds or 0),
            unit=unit,
            history=tuple(float(h) for h in history),
            seconds=None if info.get("seconds") is None else float(info["seconds"]),
            early_stopping=None if early is None else EarlyStopping.from_dict(early, unit),
            prototypes=None if infoloss is not None else PrototypeFacts.from_dict(info),
            infoloss=infoloss,
            selection=selection,
            prior=None if prior is None else tuple(float(q) for q in prior),
        )


#: The sub-reports of :class:`FitReport`, each under its own key of the JSON form.
_PARTS = ("early_stopping", "prototypes", "infoloss", "selection")
#: Every key of the JSON form.
_KEYS = frozenset({"schema", "status", "reason", "rounds", "unit", "seconds", "prior", *_PARTS})
