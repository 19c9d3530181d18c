"""The DPP learner: k-means centres, then coordinate ascent (section 4) or a joint fit.

:func:`fit_dpp` runs in named phases: checks, placement on devices, the start in internal units
(:mod:`dpp.units`), the fit (with early stopping's held-out sets as weights on one layout where
it can), and :func:`finish_fit` (finite parameters, the status of
:func:`dpp.model.fitted.fit_status`, the report).
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import time

import jax
import jax.numpy as jnp
import numpy as np

from dpp import params as check
from dpp.init import init_log_beta
from dpp.likelihood import Params
from dpp.model.fitted import FittedModel, finish_fit
from dpp.model.report import EarlyStopping
from dpp.pooling import as_choice, make_pooling
from dpp.selection import HoldOut, stopping_split
from dpp.sets import Layout, RaggedSets, to_device
from dpp.sharding import device_mesh, shard_sets
from dpp.solvers.coordinate_ascent import (
    FitResult,
    FitSettings,
    coordinate_ascent,
    fit_joint,
)
from dpp.solvers.progress import log_rounds, say
from dpp.units import Normalizer

logger = logging.getLogger(__name__)

MODES = ("coordinate_ascent", "joint")
#: The rules of :func:`fit_dpp`'s own arguments (the one home: :class:`dpp.DPPClassifier`'s
#: table includes them).
FIT_RULES: dict[str, check.Rule] = {
    "mode": check.Choice(MODES),
    "validation_fraction": check.Real(low=0, high=1, high_open=True),
}


def fit_dpp(
    train: RaggedSets,
    centres: np.ndarray,
    settings: FitSettings,
    key: jax.Array,
    mode: str = "coordinate_ascent",
    beta_scale: float = 1.0,
    per_prototype_beta: bool = False,
    validation_fraction: float = 0.0,
    start: FittedModel | None = None,
    devices: int | str = 1,
    validation_sets: RaggedSets | None = None,
    round_cap: int | None = None,
    pooling: str = "mean",
    layout: Layout | None = None,
    any_pooling: bool = False,
) -> FittedModel:
    """Learns DPP from k-means centres: eqs. (3), (2), (16) by likelihood maximisation.

    The fit runs in the internal units of :mod:`dpp.units` (an exact reparameterisation of
    the model; the prior on ``beta`` is carried over), so offset or extreme feature scales cost
    no precision. The returned model maps new sets the same way.

    Args:
        train: ``N`` training sets.
        centres: ``[K, D]`` initial centres (k-means on the training vectors), feature units.
        settings: static solver settings (``prototype_solver`` may be Adam; its ``capacity`` is
            filled in here).
        key: PRNG key (mini-batch shuffling).
        mode: ``coordinate_ascent`` (section 4) or ``joint`` (rounds of one solver run on all
            parameters).
        beta_scale: multiplier of the beta heuristic of :func:`dpp.init.init_log_beta`.
        per_prototype_beta: one ``beta`` per prototype instead of one shared.
        validation_fraction: early stopping: if > 0, this fraction of the training sets
            (stratified by the label's argmax, drawn from ``key``) is held out, the fit on the
            rest records the validation log-likelihood per round and stops after
            ``settings.patience`` rounds without improvement, and the model is then refitted on
            all training sets for the best number of rounds. Where that would hold out fewer
            than :data:`~dpp.selection.MIN_VALIDATION_SETS` sets, every set is held out once
            instead, in ``round(1 / validation_fraction)`` folds
            (:func:`dpp.selection.round_folds`), and the best round of their pooled validation
            curve caps the refit (``report.early_stopping.source`` ``cross_validation``);
            with fewer than that many sets in all it is skipped (said in
            ``report.early_stopping``). 0 (the default here; the estimators hold out 0.2) runs
            to the tolerance or ``max_rounds``.
        start: warm start: a fitted DPP model whose prototypes, ``beta`` and ``Theta`` (mapped
            into this fit's internal units) replace ``centres``, the ``beta`` heuristic and
            ``Theta = 0`` as the starting point (a path of ``lambda`` on the same sets).
        devices: a number of devices, or ``"all"``: with more than one, the training sets are
            split across a device mesh (:mod:`dpp.sharding`; whole sets per device, parameters
            replicated) and the likelihood's sums become cross-device reductions. Same result
            as one device up to the order of float additions. Not with mini-batch Adam;
            shared-pool sets run on one device (a warning). ``report.prototypes.devices`` says
            how many the fit used.
        validation_sets: early stopping on given held-out sets (feature units, labelled like
            ``train``; e.g. a cross-validation's held-out fold): their weighted log-likelihood
            per set is recorded after every round, the fit stops once ``settings.patience``
            rounds have not raised it, and the best round's parameters are returned (no refit:
            these sets are not training sets). Not with ``validation_fraction`` or ``round_cap``.
        round_cap: a number of rounds chosen on held-out sets (e.g. by
            :class:`dpp.DPPClassifierCV`): the fit runs at most this many rounds, and one that
            stops there while ``L`` still rises is ``early_stopped``, not ``max_rounds``. Not
            with early stopping.
        pooling: how a set's codes become ``z``: ``mean`` (eq. 2, the paper), ``max`` or
            ``gem`` (a generalised mean whose exponent is learned with the prototypes, from
            ``p = 3``; :mod:`dpp.pooling`). A warm ``start`` brings its own.
        layout: the least shapes of the padded sets (:class:`dpp.sets.Layout`: its
            ``covering`` of every set that several fits hold, raised to the ``of_orders`` of
            their orders: the folds of a selection and its refit, the trials of an
            experiment), so that those fits run one compiled program. On one
            device with a full-batch solver, the held-out sets of early stopping are weights
            on the training layout (:func:`~dpp.solvers.coordinate_ascent.coordinate_ascent`),
            so the early-stopping fit and its refit are one program in any case.
        any_pooling: the pooling's kind as data of the compiled program
            (:class:`dpp.pooling.PoolingChoice`): fits of every pooling (on one layout) then
            run one program, each exactly as with its own (what a selection over poolings
            wants; one pooling alone compiles faster without it).

    Returns:
        The fitted model; ``history`` holds ``L`` per round; ``report`` (a
        :class:`~dpp.model.report.FitReport`) holds the ``status`` of :func:`fit_status` with
        its ``reason``, the rounds, early stopping, and the DPP facts (``beta_init`` and
        ``beta`` in feature units and their ratio, the fraction of saturated training codes,
        per-round inner iterations, accepted steps and line-search failures, devices) and the
        solver's wall-clock ``seconds`` (compilation included).

    Raises:
        ValueError: for an unknown ``mode``, centres of the wrong dimension, a
            ``validation_fraction`` outside ``[0, 1)``, a ``start`` of other shapes,
            ``validation_sets`` of another dimension or label width or together with
            ``validation_fraction``, or a ``round_cap`` outside ``[0, max_rounds]``.
        NonFiniteResultError: for a fit whose parameters are not finite (naming which).
    """
    check.check_table({"mode": mode, "validation_fraction": validation_fraction}, FIT_RULES)
    if centres.ndim != 2 or centres.shape[1] != train.dim:
        raise ValueError(f"centres must be [K, {train.dim}], got {centres.shape}")
    _check_held_out(train, settings, validation_fraction, validation_sets, round_cap)
    place, used_devices = _placement(train, settings, devices)
    normalizer, train, settings, params0 = _internal_start(
        train, centres, settings, start, beta_scale, per_prototype_beta, make_pooling(pooling)
    )
    if any_pooling:
        params0 = params0._replace(pooling=as_choice(params0.pooling))
    t0 = time.perf_counter()
    solve = coordinate_ascent if mode == "coordinate_ascent" else fit_joint
    verbose = settings.verbose  # logged below from the history: one program for both
    settings = dataclasses.replace(settings, verbose=False)
    if used_devices == 1 and settings.prototype_solver.full_batch and train.members is None:
        if validation_sets is not None:
            validation_sets = normalizer.sets(validation_sets)
        result, early, skipped, padded = _fit_on_one_layout(
            solve, params0, train, settings, key, validation_fraction, validation_sets,
            round_cap, layout,
        )  # fmt: skip
    else:  # mini-batch Adam, a device mesh or a shared pool: the held-out sets apart
        result, early, skipped, padded = _fit_apart(
            solve, params0, train, settings, key, validation_fraction, validation_sets,
            round_cap, normalizer, place,
        )  # fmt: skip
    result = jax.block_until_ready(result)
    if verbose and early is not None and early.source == "cross_validation":
        say(
            logger,
            "early stopping by %d folds: a held-out share of %d sets would be too few to tell "
            "the rounds apart; round %d is the best on all %d sets held out once",
            early.folds, int(np.ceil(validation_fraction * train.num_sets)), early.best,
            early.validation_sets,
        )  # fmt: skip
    if skipped and verbose:  # where verbose reaches: stderr in a plain session
        say(logger, "%s", skipped)
    elif skipped:
        logger.info("%s", skipped)
    if verbose:
        log_rounds(result, "coordinate ascent" if mode == "coordinate_ascent" else "joint fit")
    if not isinstance(padded, RaggedSets):  # replicated over a mesh: to this process's device
        result = jax.tree.map(lambda a: jnp.asarray(np.asarray(a)), result)
    seconds = time.perf_counter() - t0
    # the saturated fraction on the bucketed layout the fit used, whose first rows are the
    # training vectors (:meth:`RaggedSets.padded`): no host copy of them (mini-batch Adam's
    # sets are not bucketed: there the fraction pads them itself)
    on_layout = (
        isinstance(padded, RaggedSets)
        and padded.members is None
        and settings.prototype_solver.full_batch
    )
    return finish_fit(
        result,
        params0.log_beta,
        padded.vectors if on_layout else train.vectors,
        normalizer,
        mode,
        seconds,
        devices=used_devices,
        early=early,
        skipped=skipped,
        vector_count=int(train.vectors.shape[0]) if on_layout else None,
    )


def _fit_on_one_layout(
    solve, params0, train, settings, key, fraction, validation_sets, round_cap, layout
):
    """``(result, early, skipped, padded sets)``: the fit, held-out sets as weights on one layout.

    Every solver call here takes the same shapes: the training sets, and the held-out ones
    (early stopping's share or the given ``validation_sets``) after them, padded to a layout
    that holds both orders (:meth:`dpp.sets.Layout.of_orders`, raised to ``layout``); the
    held-out sets weigh 0 in the training weights and the training sets 0 in the validation
    weights. A fit without early stopping gets validation weights of 0. So the early-stopping
    fit, its refit, and (given a ``layout`` that covers them) every fold of a selection and
    the trials of an experiment run one compiled program.
    """
    everything = (
        train if validation_sets is None else RaggedSets.concatenate(train, validation_sets)
    )
    cap = np.int32(settings.max_rounds if round_cap is None else round_cap)  # no program
    early, skipped = None, None
    if validation_sets is not None:
        n, m = train.num_sets, validation_sets.num_sets
        layout = Layout.of_orders([everything.set_sizes()]).union(layout)
        weights = np.asarray(everything.weights)
        fit_w, val_w = weights * (np.arange(n + m) < n), weights * (np.arange(n + m) >= n)
        padded, validation = everything.weighted_twice(fit_w, val_w, layout)
        result = solve(params0, padded, settings, key, validation=validation, round_cap=cap)
        early = _early_record(result, m, source="validation_sets")
        return result, early, skipped, padded
    split, folds = _stopping_split(train, fraction, key)
    skipped = split.skipped
    if folds is not None:  # too few sets to hold some out: every set held out once
        early = _rounds_by_folds(solve, params0, train, settings, key, folds, layout, cap)
        early = dataclasses.replace(early, validation_fraction=fraction)
        cap, skipped = jnp.int32(early.best), None
    elif split.fit is not None:
        fit_idx, val_idx = split.fit, split.validation
        ordered = train.subset(np.concatenate([fit_idx, val_idx]))  # the held-out sets last
        # one shape for both orders: N, B and S only as large as the orders need
        layout = Layout.of_orders([train.set_sizes(), ordered.set_sizes()]).union(layout)
        weights = np.asarray(ordered.weights)
        fit_w = weights * (np.arange(ordered.num_sets) < fit_idx.size)
        padded, validation = ordered.weighted_twice(fit_w, weights - fit_w, layout)
        result = solve(params0, padded, settings, key, validation=validation, round_cap=cap)
        record = _early_record(result, int(val_idx.size), source="validation_fraction")
        early = dataclasses.replace(record, validation_fraction=fraction)
        cap = jnp.int32(early.best)
    weights = np.asarray(train.weights)
    padded, off = train.weighted_twice(weights, np.zeros_like(weights), layout)
    result = solve(params0, padded, settings, key, validation=off, round_cap=cap)
    result = result._replace(validation_history=None, best_round=None)  # no validation here
    if round_cap is not None:
        early = EarlyStopping("round_cap", round_cap=int(round_cap))
    return result, early, skipped, padded


def _stopping_split(train: RaggedSets, fraction: float, key):
    """``(split, folds)``: early stopping's held-out split, or its folds on small data.

    :func:`dpp.selection.stopping_split`, its seeds drawn from ``key`` (the split's) and from
    ``fold_in(key, 1)`` (the folds'), each only where it is used. A skip is said by the fit
    (:func:`fit`: with ``verbose``, where a progress line goes).
    """

    def seed(stream: int) -> int:
        k = key if stream == 0 else jax.random.fold_in(key, stream)
        return int(jax.random.randint(k, (), 0, 2**31 - 1))

    return stopping_split(np.asarray(train.labels), fraction, seed, "stopping by tol")


def _rounds_by_folds(solve, params0, train, settings, key, folds, layout, cap) -> EarlyStopping:
    """Early stopping on small data, on one layout: the best round of the folds' pooled curve.

    Each fold's fit holds its sets out as weights on the one padded layout of ``train`` (one
    compiled program for every fold and the refit); :func:`_pooled_folds` pools their curves.
    """
    weights = np.asarray(train.weights, np.float64)
    records = []
    for _, held in folds:
        mask = np.zeros(train.num_sets, bool)
        mask[held] = True
        padded, validation = train.weighted_twice(
            np.where(mask, 0.0, weights), np.where(mask, weights, 0.0), layout
        )
        result = solve(params0, padded, settings, key, validation=validation, round_cap=cap)
        records.append(_early_record(result, int(held.size), source="cross_validation"))
    return _pooled_folds(records, [weights[held].sum() for _, held in folds], settings)


def _pooled_folds(records: list, totals: list, settings: FitSettings) -> EarlyStopping:
    """One record of the folds' fits: their per-set validation curves pooled, the best round.

    Each fold's curve (:func:`round_scores`) is weighted by its held-out sets' total weight, on
    the rounds that every fold saw; a value that is not finite stays (the fit is ``failed``);
    the first best round is the refit's cap.
    """
    scores, horizons = [], []
    for record in records:
        scores.append(round_scores(record, settings.max_rounds, settings.patience))
        stopped_by_patience = record.monitored - record.best >= settings.patience
        horizons.append(record.monitored if stopped_by_patience else settings.max_rounds)
    monitored = min(horizons)
    pooled = np.average(np.asarray(scores)[:, : monitored + 1], axis=0, weights=totals)
    finite = np.where(np.isfinite(pooled), pooled, -np.inf)
    return EarlyStopping(
        "cross_validation",
        best=int(np.argmax(finite)),
        monitored=monitored,
        validation_sets=int(sum(record.validation_sets for record in records)),
        validation_history=tuple(float(h) if np.isfinite(h) else None for h in pooled),
        folds=len(records),
    )


def round_scores(early: EarlyStopping, max_rounds: int, patience: int) -> np.ndarray:
    """``[max_rounds + 1]`` validation log-likelihood per set after each round of one fit.

    Of a fit monitored on validation sets (its ``early`` record): known up to its last round,
    carried on to ``max_rounds`` when it stopped by ``tol`` or ``max_rounds`` (a fit run longer
    stops there too), NaN after a stop by ``patience`` (rounds not seen).

    Args:
        early: the fit's :class:`~dpp.model.report.EarlyStopping` (``best``, ``monitored`` and
            ``validation_history`` set).
        max_rounds: the fit's round cap.
        patience: the fit's patience, in rounds.

    Returns:
        ``[max_rounds + 1]`` float64 scores, nats per set.
    """
    history = np.asarray([np.nan if h is None else h for h in early.validation_history], np.float64)
    last = early.monitored
    scores = np.full(max_rounds + 1, np.nan)
    scores[: last + 1] = history[: last + 1]
    if last - early.best < patience:  # stopped by tol or max_rounds
        scores[last + 1 :] = history[last]
    return scores


def _fit_apart(
    solve, params0, train, settings, key, fraction, validation_sets, round_cap, normalizer, place
):
    """``(result, early, skipped, placed sets)``: the fit, its held-out sets apart.

    For mini-batch Adam (which samples sets: held-out sets in its batches would change them), a
    device mesh and the shared-pool layout: the held-out sets are their own argument, and the
    early-stopping fit and its refit are two programs.
    """
    early, cap, skipped = _validation_fraction_cap(
        solve, params0, train, settings, key, fraction, place
    )
    if round_cap is not None:
        cap = jnp.int32(round_cap)
    validation = None
    if validation_sets is not None:
        validation = _bucketed(normalizer.sets(validation_sets), settings)
    if cap is None:  # always an array, so that capped and uncapped fits share one program
        cap = jnp.int32(settings.max_rounds)
    padded = place(train)
    result = jax.block_until_ready(
        solve(params0, padded, settings, key, validation=validation, round_cap=cap)
    )
    if validation is not None:
        early = _early_record(result, int(validation_sets.num_sets), source="validation_sets")
    elif round_cap is not None:
        early = EarlyStopping("round_cap", round_cap=int(round_cap))
    return result, early, skipped, padded


def _placement(train: RaggedSets, settings: FitSettings, devices) -> tuple:
    """``(place, devices used)``: how the sets go to the device(s) (:func:`fit_dpp`'s first phase).

    One device: padded to their size bucket (:func:`_bucketed`); a mesh of several: split by set
    (:func:`dpp.sharding.shard_sets`), unless the sets share a pool of vectors (a warning).

    Raises:
        ValueError: several devices with a mini-batch solver.
    """
    place, used_devices = functools.partial(_bucketed, settings=settings), 1
    mesh = None if devices == 1 else device_mesh(devices)
    if mesh is not None and mesh.size > 1:
        if not settings.prototype_solver.full_batch:
            raise ValueError("devices > 1 needs a full-batch optimizer, not mini-batch adam")
        if train.members is None:
            place, used_devices = functools.partial(shard_sets, mesh=mesh), mesh.size
        else:
            logger.warning(
                "devices=%s: shared-pool sets (overlapping windows) cannot be split by set; "
                "the fit runs on one device",
                devices,
            )
    return place, used_devices


def _internal_start(train, centres, settings, start, beta_scale, per_prototype_beta, pooling):
    """``(normalizer, train, settings, params0)`` in internal units (:mod:`dpp.units`).

    The sets, the prior on ``beta`` and the solver settings moved into the internal units, and
    the starting parameters: the centres, the ``beta`` heuristic, ``Theta = 0`` and
    ``pooling``, or a warm ``start``'s parameters (its pooling too).
    """
    normalizer, train = Normalizer.fit_sets(train)
    centres = normalizer.vectors(centres)
    offset = normalizer.log_beta_offset()
    settings = dataclasses.replace(
        settings,
        prior=settings.prior.in_internal_units(offset),
        prototype_solver=settings.prototype_solver.prepare(train),
    )
    dtype = train.vectors.dtype
    if start is not None:
        return (
            normalizer,
            train,
            settings,
            Params(*_warm_start(start, normalizer, train, per_prototype_beta), start.pooling),
        )
    log_beta0 = init_log_beta(
        np.asarray(train.vectors), centres, beta_scale, per_prototype_beta, dtype=dtype
    )
    mu0 = to_device(centres, dtype)  # on the host: no staging program per shape
    theta0 = to_device(np.zeros((centres.shape[0], train.num_classes)), dtype)
    return normalizer, train, settings, Params(mu0, log_beta0, theta0, pooling)


def _validation_fraction_cap(solve, params0, train, settings, key, fraction, place):
    """``(early, cap, skipped)`` of early stopping on a held-out ``fraction`` of the sets.

    On small data, folds instead (:func:`dpp.selection.round_folds`, :func:`_pooled_folds`).

    ``early`` is the record of :func:`_early_stopping` and ``cap`` its best round (``None``
    without early stopping); ``skipped`` says why it was skipped (too few validation sets).
    """
    split, folds = _stopping_split(train, fraction, key)
    if folds is not None:  # too few sets to hold some out: every set held out once
        records = [
            _early_stopping(solve, params0, train, settings, key, HoldOut(fit, held, None), place)
            for fit, held in folds
        ]
        weights = np.asarray(train.weights, np.float64)
        early = _pooled_folds(records, [weights[held].sum() for _, held in folds], settings)
        return dataclasses.replace(early, validation_fraction=fraction), jnp.int32(early.best), None
    if split.fit is None:
        return None, None, split.skipped
    early = _early_stopping(solve, params0, train, settings, key, split, place)
    return dataclasses.replace(early, validation_fraction=fraction), jnp.int32(early.best), None


def _bucketed(sets: RaggedSets, settings: FitSettings) -> RaggedSets:
    """The sets padded to their size bucket, so that fits of similar sizes share a program.

    Mini-batch Adam samples sets, so it gets the sets as they are (padding would change the
    batches).
    """
    return sets.bucketed() if settings.prototype_solver.full_batch else sets


def _warm_start(start: FittedModel, normalizer: Normalizer, train: RaggedSets, per_prototype):
    """A fitted model's parameters in the internal units of ``normalizer``."""
    shape = (train.dim, train.num_classes)
    if start.log_beta is None or (start.mu.shape[1], start.theta.shape[1]) != shape:
        raise ValueError(
            f"a warm start needs a soft model with D = {shape[0]} and C = {shape[1]}; got "
            f"mu {start.mu.shape}, theta {start.theta.shape}"
        )
    if (np.ndim(start.log_beta) == 1) != per_prototype:
        raise ValueError("a warm start must share per_prototype_beta with the fit")
    dtype = train.vectors.dtype
    mu = jnp.asarray(normalizer.vectors(start.prototypes), dtype=dtype)
    log_beta = np.log(start.beta) + normalizer.log_beta_offset()
    return mu, jnp.asarray(log_beta, dtype=dtype), jnp.asarray(start.theta, dtype=dtype)


def _early_stopping(
    solve, params0, train: RaggedSets, settings: FitSettings, key, split, place
) -> EarlyStopping:
    """Best number of rounds by the validation log-likelihood on the held-out ``split``."""
    fit_part, val_part = train.subset(split.fit), train.subset(split.validation)
    fit_part, validation = place(fit_part), _bucketed(val_part, settings)
    result = solve(params0, fit_part, settings, key, validation=validation)
    return _early_record(result, int(val_part.num_sets), source="validation_fraction")


def _early_record(result: FitResult, validation_sets: int, source: str) -> EarlyStopping:
    """What early stopping saw: the best round and the validation log-likelihood per round."""
    rounds = int(result.num_rounds)
    history = np.asarray(result.validation_history, np.float64)[: rounds + 1]
    return EarlyStopping(
        source,
        best=int(result.best_round),
        monitored=rounds,
        validation_sets=validation_sets,  # the real sets, not the padded count
        validation_history=tuple(float(h) if np.isfinite(h) else None for h in history),
    )


def _check_held_out(
    train: RaggedSets,
    settings: FitSettings,
    validation_fraction: float,
    validation_sets: RaggedSets | None,
    round_cap: int | None,
) -> None:
    """The errors of :func:`fit_dpp`'s ``validation_sets`` and ``round_cap``."""
    if validation_sets is not None:
        if validation_fraction > 0:
            raise ValueError("give validation_sets or a validation_fraction > 0, not both")
        shape = (validation_sets.dim, validation_sets.num_classes)
        if shape != (train.dim, train.num_classes):
            raise ValueError(
                f"validation_sets must have D = {train.dim} and C = {train.num_classes} like "
                f"the training sets, got D = {shape[0]}, C = {shape[1]}"
            )
    if round_cap is not None:
        if validation_fraction > 0 or validation_sets is not None:
            raise ValueError("a round_cap excludes early stopping (validation_fraction, _sets)")
        if not 0 <= int(round_cap) <= settings.max_rounds:
            raise ValueError(
                f"round_cap must lie in [0, max_rounds = {settings.max_rounds}], got {round_cap}"
            )
