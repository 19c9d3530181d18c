"""Fitted prototype models and the truthful status of a fit.

A :class:`FittedModel` is what every method (DPP and the baselines) returns: prototypes, an
encoder (soft, eq. 3, or hard, eq. 1), the softmax classifier of eq. (16), the objective history
and a status that tells the truth about the fit (:func:`fit_status`). Models are fitted in the
internal units of :mod:`dpp.units` and map new sets into them before encoding. The
experiment layer only talks to this type.
"""

from __future__ import annotations

import dataclasses
import math

import jax
import numpy as np
from jaxtyping import Array, Float

from dpp.encoding import (
    encode_hard,
    encode_soft,
    max_codes,
    membership_codes,
    membership_shares,
)
from dpp.errors import NonFiniteResultError
from dpp.likelihood import Params, log_predictive
from dpp.model.report import (  # noqa: F401  (re-exported)
    CLEAN_STATUSES,
    STATUSES,
    EarlyStopping,
    FitReport,
    PrototypeFacts,
)
from dpp.pooling import MEAN, Pooling, exponent, resolved
from dpp.sets import BUCKET_ALIGN, RaggedSets, bucket_size, sets_bucket, to_device
from dpp.solvers.coordinate_ascent import FitResult
from dpp.units import IDENTITY, Normalizer

#: A code is saturated (one-hot to working precision) when its largest entry exceeds this.
SATURATED_CODE = 1.0 - 1e-6
#: A fit is ``saturated`` when at least this fraction of the training vectors has saturated codes.
SATURATED_FRACTION = 0.99
#: A round without progress still counts as converged when the (mu, beta)-step's gradient norm
#: (of ``-L / sum(w)`` in its well-scaled coordinates) is below this: a stationary point.
STATIONARY_GRAD_NORM = 1e-4

_encode_soft_jit = jax.jit(encode_soft)
_encode_hard_jit = jax.jit(encode_hard)


@jax.jit
def _predict_soft_jit(sets, mu, log_beta, theta, pooling):
    """Eq. (16) on eqs. (2, 3): a bucket's log class probabilities, one program."""
    return log_predictive(encode_soft(sets, mu, log_beta, pooling), theta)


@jax.jit
def _predict_hard_jit(sets, mu, theta):
    """Eq. (16) on the hard encoder's histograms (eq. 1), one program."""
    return log_predictive(encode_hard(sets, mu), theta)


_max_codes = jax.jit(max_codes)
_membership_codes = jax.jit(membership_codes)
_membership_shares = jax.jit(membership_shares)


def saturated_fraction(
    vectors, mu: Float[Array, "K D"], log_beta: Float[Array, "*B"], count: int | None = None
) -> float:
    """Fraction of the vectors whose eq. (3) code is one-hot to working precision.

    Args:
        vectors: ``[U, D]`` vectors, or with ``count`` a device array whose first ``count``
            rows are the vectors (a fit's padded layout: no host copy, and the folds of a
            selection, which share that layout's shape, share one program).
        mu: ``[K, D]`` prototypes.
        log_beta: ``[]`` or ``[K]`` log inverse temperature.
        count: how many leading rows of ``vectors`` count (default: all, padded here).

    Returns:
        The fraction in ``[0, 1]`` of those vectors whose largest code exceeds
        :data:`SATURATED_CODE`.
    """
    if count is None:
        vectors = np.asarray(vectors)
        count = vectors.shape[0]
        padded = np.zeros((bucket_size(count, BUCKET_ALIGN), vectors.shape[1]), vectors.dtype)
        padded[:count] = vectors  # on the host: an eager pad would compile once per size
        vectors = to_device(padded, fresh=True)
    codes = _max_codes(vectors, mu, log_beta)
    return float(np.mean(np.asarray(codes)[:count] > SATURATED_CODE))


@dataclasses.dataclass(frozen=True)
class FittedModel:
    """A trained prototype model.

    Attributes:
        method: name of the method that produced it (``dpp``, ``standard``, ...).
        mu: ``[K, D]`` prototypes in the model's internal units (``normalizer``); the
            prototypes in the units of the features are :attr:`prototypes`.
        log_beta: ``[]`` or ``[K]`` log inverse temperature of the soft encoder of eq. (3), in
            internal units (:attr:`beta` gives feature units), or ``None`` for the hard encoder
            of eq. (1).
        theta: ``[K, C]`` softmax classifier weights.
        history: objective values recorded during training (method-specific meaning).
        report: the fit's typed report (:class:`~dpp.model.report.FitReport`: status, rounds,
            inner iterations, final ``beta``, ...); :attr:`info` is its JSON form.
        normalizer: map from feature units to internal units, applied to every set encoded.
        pooling: how the soft encoder pools a set's codes (:mod:`dpp.pooling`; eq. 2's mean
            by default); the hard encoder of eq. (1) always takes the mean (a histogram).
    """

    method: str
    mu: Float[Array, "K D"]
    log_beta: Float[Array, "*B"] | None
    theta: Float[Array, "K C"]
    history: np.ndarray
    report: FitReport
    normalizer: Normalizer = IDENTITY
    pooling: Pooling = MEAN

    @property
    def info(self) -> dict:
        """The report's JSON form (:meth:`~dpp.model.report.FitReport.to_dict`)."""
        return self.report.to_dict()

    @property
    def prototypes(self) -> np.ndarray:
        """``[K, D]`` float64 prototypes in the units of the features."""
        return self.normalizer.inverse_vectors(np.asarray(self.mu))

    def input_prototypes(self, preprocess) -> np.ndarray:
        """``[K, D]`` float64 prototypes in the input units.

        Args:
            preprocess: the estimator's fitted :class:`~dpp.units.Affine` (or ``None``), whose
                inverse takes the prototypes back to the input units.
        """
        prototypes = self.prototypes
        return prototypes if preprocess is None else preprocess.inverse(prototypes)

    @property
    def beta(self) -> np.ndarray | None:
        """Inverse temperature in 1 / squared feature units (``[]`` or ``[K]``), or ``None``."""
        if self.log_beta is None:
            return None
        return np.exp(np.asarray(self.log_beta, np.float64) - self.normalizer.log_beta_offset())

    @property
    def params(self) -> Params:
        """The soft model's parameters in internal units (use with :meth:`internal_sets`)."""
        return Params(self.mu, self.log_beta, self.theta, self.pooling)

    def internal_sets(self, sets: RaggedSets) -> RaggedSets:
        """The sets with their vectors mapped into the model's internal units."""
        if sets.dim != self.mu.shape[1]:
            raise ValueError(
                f"the sets have D = {sets.dim} features but the model was fitted on "
                f"D = {self.mu.shape[1]}"
            )
        return self.normalizer.sets(sets)

    def _encode_bucketed(self, sets: RaggedSets) -> Float[Array, "Nb K"]:
        """Codes of the sets padded to their bucket (compiled once per bucket); first N real."""
        sets = self.internal_sets(sets).bucketed()
        if self.log_beta is None:
            return _encode_hard_jit(sets, self.mu)
        return _encode_soft_jit(sets, self.mu, self.log_beta, self.pooling)

    def encode(self, sets: RaggedSets) -> np.ndarray:
        """``[N, K]`` set representations ``z`` (eq. 2 over eq. 3 or eq. 1), a host array.

        Cut to the ``N`` real sets on the host: a slice of the device array would compile a
        program per ``N``.
        """
        return np.asarray(self._encode_bucketed(sets))[: sets.num_sets]

    def log_predictive(self, sets: RaggedSets) -> np.ndarray:
        """``[N, C]`` log class probabilities of eq. (16) for each set, a host array.

        Finite for every finite input: the encoders of :mod:`dpp.encoding` are finite for every
        ``beta`` and the log-softmax is stable. One compiled program per bucket of the sets'
        shapes (:meth:`~dpp.sets.RaggedSets.bucketed`): the encoding and eq. (16) together.
        """
        padded = self.internal_sets(sets).bucketed()
        if self.log_beta is None:
            log_p = _predict_hard_jit(padded, self.mu, self.theta)
        else:
            log_p = _predict_soft_jit(padded, self.mu, self.log_beta, self.theta, self.pooling)
        return np.asarray(log_p)[: sets.num_sets]

    def _memberships_padded(self, sets: RaggedSets) -> RaggedSets:
        """Internal-unit sets padded to bucketed ``N``, ``T`` (and ``U``), unpacked.

        Padding is appended, so the first ``T`` memberships are the sets' own, in order.
        """
        sets = self.internal_sets(sets)
        pool = None if sets.members is None else bucket_size(sets.vectors.shape[0], BUCKET_ALIGN)
        return sets.padded(
            sets_bucket(sets.num_sets), bucket_size(sets.num_memberships, BUCKET_ALIGN), pool
        )

    def membership_codes(self, sets: RaggedSets) -> np.ndarray:
        """``[T, K]`` float64 code of every membership (eq. 3, or eq. 1 for the hard encoder).

        Rows in the order of ``sets.set_ids`` (each set's vectors in their given order).
        """
        padded = self._memberships_padded(sets)
        codes = _membership_codes(padded, self.mu, self.log_beta)
        return np.asarray(codes, np.float64)[: sets.num_memberships]

    def membership_shares(self, sets: RaggedSets) -> np.ndarray:
        """``[T, K]`` float64 each membership's share of its set's ``z``: a set's rows sum to it.

        :func:`dpp.encoding.membership_shares` with the model's pooling (the hard encoder's
        histogram is a mean).
        """
        padded = self._memberships_padded(sets)
        log_beta = self.log_beta
        shares = _membership_shares(padded, self.mu, log_beta, self.pooling)
        return np.asarray(shares, np.float64)[: sets.num_memberships]

    def instance_scores(self, sets: RaggedSets) -> np.ndarray:
        r"""``[T, C]`` float64 each membership's contribution to its set's class scores.

        Row ``x`` of set ``n`` is :math:`s_x \Theta`, its share of ``z`` (eqs. 2-3,
        :meth:`membership_shares`) times eq. (16)'s weights; the rows of a set sum to its class
        scores :math:`z \Theta`, whose log-softmax is :meth:`log_predictive` (eq. 16 has no
        intercept).
        """
        return self.membership_shares(sets) @ np.asarray(self.theta, np.float64)


def first_non_finite(early: EarlyStopping | None) -> int | None:
    """The first round (or epoch) whose held-out log-likelihood was not finite, if any.

    NaN compares as no improvement, so such a fit would read as early stopping: every status
    function here calls it ``failed`` instead, naming that round.
    """
    if early is None:
        return None
    for step, value in enumerate(early.validation_history):
        if value is None or not math.isfinite(value):
            return step
    return None


def _failed(early: EarlyStopping, step: int, refit: str) -> tuple[str, str]:
    return "failed", (
        f"the validation log-likelihood was not finite at {early.unit} {step} of "
        f"{early.monitored}: the training diverged; {refit}"
    )


def epoch_status(
    early: EarlyStopping | None, skipped: str | None, max_epochs: int, fitted_start: bool = False
) -> tuple[str, str]:
    """The truthful status of a fit trained by Adam epochs, and a sentence saying why.

    DPP on an embedding and the networks (:func:`~dpp.estimators.adam.train_with_early_stopping`):
    ``failed`` (a held-out value that is not finite, :func:`first_non_finite`), ``stalled``
    (no epoch beat the untrained start, a random network: the refit is its start),
    ``max_epochs`` (still rising at ``max_epochs``, or no early stopping), else
    ``early_stopped``. Where the start is itself a fitted model (``fitted_start``: DPP on an
    embedding starts from k-means prototypes in its initial embedding with ``Theta`` fitted by a
    Theta-step), no epoch beating it is an early stop at epoch 0, as a DPP fit whose best round
    on the validation sets is round 0 (the k-means start with its Theta-step).

    Args:
        early: the early-stopping record (``unit="epoch"``), ``None`` without early stopping.
        skipped: why early stopping was skipped, if it was (:func:`dpp.selection.hold_out`).
        max_epochs: the epoch cap.
        fitted_start: whether the start is a fitted model rather than a random network.

    Returns:
        ``(status, reason)`` with ``status`` in :data:`STATUSES`.
    """
    if early is None:
        return "max_epochs", skipped or (
            f"early stopping off (validation_fraction = 0): trained for max_epochs = "
            f"{max_epochs} epochs"
        )
    best, monitored = early.best, early.monitored
    step = first_non_finite(early)
    if step is not None:
        return _failed(
            early, step, f"refitted for {best} epochs, the last finite best (a smaller "
            "learning_rate?)"
        )  # fmt: skip
    if best == 0 and fitted_start:
        return "early_stopped", (
            f"no epoch of {monitored} raised the validation log-likelihood above the start's "
            f"({early.validation_history[0]:.4f}: k-means prototypes in the initial embedding, "
            "Theta by its Theta-step): refitted for 0 epochs, the start"
        )
    if best == 0:
        start = early.validation_history[0]
        return "stalled", (
            f"no epoch of {monitored} raised the validation log-likelihood above the untrained "
            f"network's ({start:.4f}): refitted for 0 epochs, the network is its random start "
            "(inputs on a small scale? standardize=True)"
        )
    if best == max_epochs:
        return "max_epochs", (
            f"the validation log-likelihood was still rising at max_epochs = {max_epochs}; "
            "refitted for that many epochs"
        )
    return "early_stopped", (
        f"refitted on all training sets for {best} epochs, the best of {monitored} on the "
        "validation sets"
    )


def fit_status(
    result: FitResult,
    saturated_fraction: float,
    mode: str,
    round_cap: int | None = None,
    cap_source: str = "validation_fraction",
    early: EarlyStopping | None = None,
) -> tuple[str, str]:
    """The truthful status of a DPP fit, and a sentence saying why.

    * ``failed``: a held-out log-likelihood of ``early`` was not finite
      (:func:`first_non_finite`, the rule of :func:`epoch_status` too);

    * ``saturated``: at least :data:`SATURATED_FRACTION` of the training vectors have one-hot
      codes: the gradients vanish, so the fit stopped at the hard assignments of eq. (1) to its
      current centres, whatever the stopping rule said;
    * ``converged``: the stopping rule was met after a round that raised ``L``, or at a
      stationary point (gradient norm below :data:`STATIONARY_GRAD_NORM`);
    * ``stalled``: the last round raised ``L`` by nothing although the gradient is not small
      (the line searches found no better point);
    * ``early_stopped``: the fit stopped at ``round_cap``, a number of rounds chosen on
      held-out sets (early stopping's refit, or a cross-validation's choice), or it returns an
      earlier round than its last, the best on given validation sets;
    * ``max_rounds``: the round cap (or, in joint mode, the solver's iteration cap) was reached
      while ``L`` was still rising.

    Args:
        result: output of :func:`~dpp.solvers.coordinate_ascent.coordinate_ascent` or
            :func:`~dpp.solvers.coordinate_ascent.fit_joint`.
        saturated_fraction: fraction of training vectors with saturated codes.
        mode: ``coordinate_ascent`` or ``joint``.
        round_cap: the number of rounds, chosen on held-out sets, the fit was capped at, if any.
        cap_source: what chose ``round_cap``: ``validation_fraction`` (early stopping),
            ``cross_validation`` (early stopping's folds on small data) or ``round_cap`` (a
            cross-validation of a selection).
        early: the fit's early-stopping record, if any.

    Returns:
        ``(status, reason)`` with ``status`` in :data:`STATUSES`.
    """
    step = first_non_finite(early)
    if step is not None:
        return _failed(early, step, "the parameters kept are those of the last finite best")
    diag = result.diagnostics
    last = int(result.num_rounds)
    # read on the host: indexing a device array compiles a program per call site
    progress = bool(np.asarray(diag.prototype_accepted)[last]) or bool(
        np.asarray(diag.theta_accepted)[last]
    )
    grad_norm = float(np.asarray(diag.grad_norm)[last])
    if saturated_fraction >= SATURATED_FRACTION:
        return "saturated", (
            f"{100 * saturated_fraction:.1f}% of the training vectors have one-hot codes, where "
            "the gradients vanish: the fit stopped at hard assignments to its centres (eq. 1)"
        )
    if round_cap is not None and not bool(result.converged) and last == round_cap:
        if cap_source == "cross_validation":
            folds = early.folds if early is not None else None
            return "early_stopped", (
                f"stopped after round {last}, the best on the training sets held out in "
                f"{folds} folds (too few sets to hold some out)"
            )
        if cap_source == "round_cap":
            return "early_stopped", (
                f"stopped after round {last}, the number of rounds chosen on held-out sets"
            )
        return "early_stopped", f"stopped after round {last}, the best on the validation sets"
    if result.best_round is not None and int(result.best_round) < last:
        return "early_stopped", (
            f"returned round {int(result.best_round)} of {last}, the best on the validation sets"
        )
    if last == 0:
        return "max_rounds", "no round was run (max_rounds = 0)"
    if not bool(result.converged):
        history = np.asarray(result.history)[: last + 1]
        gain = (history[-1] - history[-2]) / max(abs(history[-2]), 1e-30)
        return "max_rounds", (
            f"stopped at the round cap ({last} rounds) while L was still rising "
            f"({gain:.2g} relative in the last round)"
        )
    if progress or grad_norm <= STATIONARY_GRAD_NORM:
        return "converged", "the stopping rule was met"
    return "stalled", (
        f"the last round did not raise L although the gradient norm is {grad_norm:.3g}"
    )


def finish_fit(
    result: FitResult,
    log_beta0: Float[Array, "*B"],
    train_vectors,
    normalizer: Normalizer,
    mode: str,
    seconds: float,
    devices: int = 1,
    early: dict | None = None,
    skipped: str | None = None,
    vector_count: int | None = None,
) -> FittedModel:
    """The :class:`FittedModel` of one finished fit: its checks, status and report.

    The last phase of :func:`fit_dpp`, apart so that anything that runs the solver itself gets
    the same checks and the same ``info``.

    Args:
        result: the fit's :class:`~dpp.solvers.coordinate_ascent.FitResult`.
        log_beta0: the starting ``log beta`` (internal units).
        train_vectors: ``[U, D]`` training vectors in internal units (for the saturated
            fraction), or with ``vector_count`` the fit's padded device array of them.
        normalizer: the map into internal units.
        mode: ``coordinate_ascent`` or ``joint``.
        seconds: wall-clock seconds of the fit.
        devices: devices the fit used.
        early: the early-stopping record (:class:`~dpp.model.report.EarlyStopping`, its
            ``source``: ``validation_fraction``, ``validation_sets`` or ``round_cap``), if any.
        skipped: why early stopping was skipped, if it was.
        vector_count: ``U``, where ``train_vectors`` holds padding rows after the vectors.

    Returns:
        The fitted model (see :func:`fit_dpp` for its ``report``).

    Raises:
        NonFiniteResultError: for non-finite parameters (naming which).
    """
    params = result.params._replace(pooling=resolved(result.params.pooling))
    for name, value in zip(Params._fields, params, strict=True):
        if not all(np.all(np.isfinite(np.asarray(leaf))) for leaf in jax.tree.leaves(value)):
            raise NonFiniteResultError(f"DPP fit produced non-finite {name} ({mode})")
    saturated = saturated_fraction(train_vectors, params.mu, params.log_beta, vector_count)
    source = None if early is None else early.source
    best = early and early.best
    cap = {"validation_fraction": best, "cross_validation": best}
    cap["round_cap"] = early and early.round_cap
    status, reason = fit_status(result, saturated, mode, cap.get(source), source, early)
    rounds = int(result.num_rounds)
    history = np.asarray(result.history)[: rounds + 1]
    steps = {}
    for name, values in result.diagnostics._asdict().items():
        values = np.asarray(values)[: rounds + 1].tolist()
        # NaN (not measured) as None, so records compare equal and serialise as JSON null
        steps[name] = tuple(
            None if isinstance(x, float) and not np.isfinite(x) else x for x in values
        )
    offset = normalizer.log_beta_offset()
    # beta after each round (the geometric mean of per-prototype betas), in feature units
    steps["beta"] = tuple(np.exp(np.asarray(steps.pop("log_beta"), np.float64) - offset).tolist())
    beta = np.exp(np.asarray(params.log_beta, np.float64) - offset)
    beta_init = float(np.exp(np.mean(np.asarray(log_beta0, np.float64)) - offset))
    if early is None and skipped is not None:
        early = EarlyStopping(skipped=skipped)
    facts = PrototypeFacts(
        beta=float(beta) if beta.ndim == 0 else tuple(float(b) for b in beta),
        beta_init=beta_init,
        beta_ratio=float(np.max(beta) / beta_init),
        saturated_fraction=saturated,
        devices=devices,
        steps=steps,
        pooling_p=exponent(params.pooling),  # the generalised mean's learned p, else None
    )
    report = FitReport(
        "dpp", status, reason, rounds, history=tuple(float(h) for h in history),
        seconds=seconds, early_stopping=early, prototypes=facts,
    )  # fmt: skip
    return FittedModel(
        "dpp", params.mu, params.log_beta, params.theta, history, report, normalizer,
        params.pooling,
    )  # fmt: skip
