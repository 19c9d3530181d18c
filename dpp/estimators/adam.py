"""Adam-trained set models: the member of a fit, early stopping, and members trained together.

What :class:`~dpp.estimators.neural.NeuralSetClassifier` (attention MIL, Deep Sets) and
:class:`~dpp.estimators.embedded.EmbeddedDPPClassifier` share (:class:`AdamTrained`): a fit is a
:class:`Member` (preprocessed sets, the start, Adam's settings, the seed), trained with early
stopping on a held-out share (:func:`train_with_early_stopping`), alone or batched with others
of the same shapes (:func:`fit_together`); with several weight decays, the one held out best is
kept (:func:`best_held_out`). The numerics are :mod:`dpp.networks`.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import ClassVar, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from dpp import model_file
from dpp import params as check
from dpp.model import EarlyStopping, FitReport, epoch_status
from dpp.networks import training
from dpp.selection import hold_out
from dpp.sets import RaggedSets, to_device
from dpp.solvers.coordinate_ascent import vectorise_members
from dpp.solvers.progress import say

logger = logging.getLogger(__name__)


def network_leaves(network: eqx.Module) -> dict[str, np.ndarray]:
    """A network's arrays as a model file's ``net_000``, ``net_001``, ... (float64)."""
    leaves = jax.tree.leaves(eqx.filter(network, eqx.is_array))
    return {f"net_{i:03d}": np.asarray(leaf, np.float64) for i, leaf in enumerate(leaves)}


def restore_network(path: Path, skeleton: eqx.Module, arrays: dict) -> eqx.Module:
    """``skeleton`` with its arrays replaced by a model file's ``net_*`` arrays, checked.

    Raises:
        ModelFileError: a missing or extra array, or one of another shape than the network
            its parameters describe.
    """
    params, static = eqx.partition(skeleton, eqx.is_array)
    leaves, treedef = jax.tree.flatten(params)
    names = sorted(n for n in arrays if n.startswith("net_"))
    if names != [f"net_{i:03d}" for i in range(len(leaves))]:
        raise model_file.bad(
            path, "arrays", f"net_* must be {len(leaves)} arrays net_000 ..., got {names}"
        )
    loaded = []
    for name, leaf in zip(names, leaves, strict=True):
        if arrays[name].shape != leaf.shape:
            raise model_file.bad(
                path, f"array {name}",
                f"has shape {arrays[name].shape}; the network the parameters describe needs "
                f"{tuple(leaf.shape)}",
            )  # fmt: skip
        loaded.append(jnp.asarray(arrays[name], leaf.dtype))
    return eqx.combine(jax.tree.unflatten(treedef, loaded), static)


class Member(NamedTuple):
    """One Adam-trained fit: what :func:`train_with_early_stopping` gets.

    Attributes:
        make: ``(sets, key) -> network``, the initial network for training sets (the same key
            gives the same start: the refit starts where the monitored fit did, or from its
            own k-means where the start depends on the sets).
        sets: preprocessed, labelled training sets.
        settings: Adam and early stopping.
        fraction: share of the sets held out (stratified); early stopping is skipped, and the
            network trained for ``max_epochs``, when fewer than 10 sets would be held out
            (unless ``widen``).
        seed: seed of the split, the start, the order of the sets and dropout.
        method: the method's name, for the report.
        verbose: a progress line after the monitored fit and after the refit
            (:func:`dpp.solvers.progress.say`).
        fitted_start: whether ``make`` gives a fitted model (DPP on an embedding: k-means
            prototypes and a Theta-step) rather than a random network; its status then calls
            a best epoch of 0 an early stop (:func:`~dpp.model.epoch_status`).
        widen: where ``fraction`` holds out fewer than 10 sets, hold out 10 if 20 or more are
            given, rather than train ``max_epochs`` unmonitored (:func:`dpp.selection.hold_out`;
            :class:`~dpp.EmbeddedDPPClassifier`'s ``widen_validation``).
    """

    make: Callable
    sets: RaggedSets
    settings: training.TrainSettings
    fraction: float
    seed: int
    method: str
    verbose: bool = False
    fitted_start: bool = False
    widen: bool = False


@dataclasses.dataclass(frozen=True)
class MemberPlan:
    """A member's host-side part: its split, padded buckets and initial networks.

    Attributes:
        member: the :class:`Member`.
        skipped: why early stopping is skipped (too few held-out sets), or ``None``.
        monitored: whether a monitored fit runs (early stopping on ``validation``).
        held_sets: the held-out sets.
        start: the monitored fit's initial network, on the part it fits (``None`` unmonitored).
        buckets: that part's buckets (``None`` unmonitored).
        refit_start: the refit's initial network, on all the sets.
        refit_buckets: all the sets' buckets.
        validation: the held-out sets' buckets.
        train_key: the PRNG key of both fits' epochs.
    """

    member: Member
    skipped: str | None  # why early stopping is skipped (too few held-out sets)
    monitored: bool
    held_sets: int
    start: eqx.Module | None  # the monitored fit's start, on the part it fits
    buckets: tuple | None  # that part's buckets
    refit_start: eqx.Module
    refit_buckets: tuple
    validation: tuple
    train_key: jax.Array


def plan_member(member: Member) -> MemberPlan:
    """Splits, lays out and starts one member (the same for it alone or in a batch).

    What :func:`train_with_early_stopping`, :func:`train_together` and
    ``benchmarks/lab/diagnosis.py`` start from.
    """
    sets, settings, fraction, seed = member.sets, member.settings, member.fraction, member.seed
    init_key, train_key = _member_keys(jax.random.key(seed))
    classes = sets.num_classes
    split = hold_out(
        np.asarray(sets.labels), fraction, seed,
        f"trained for max_epochs = {settings.max_epochs} epochs", widen=member.widen,
    )  # fmt: skip
    skipped, monitored = split.skipped, split.fit is not None
    if monitored:
        fit_idx, val_idx = split.fit, split.validation
        held = sets.subset(val_idx)
    else:  # the refit records the log-likelihood of a few of its own sets (not used)
        held = sets.subset(np.arange(min(8, sets.num_sets)))
    sizes = sets.set_sizes()
    shape = training.layout(sizes, settings.batch_size)  # shared by both fits
    held_shape = training.layout(sizes, settings.batch_size, held.num_sets)  # by every seed's
    validation, _ = training.bucketize(held, settings.batch_size, classes, held_shape)
    start = buckets = None
    if monitored:
        part = sets.subset(fit_idx)
        buckets, _ = training.bucketize(part, settings.batch_size, classes, shape)
        start = member.make(part, init_key)
    refit_buckets, _ = training.bucketize(sets, settings.batch_size, classes, shape)
    return MemberPlan(
        member, skipped, monitored, int(held.num_sets), start, buckets,
        member.make(sets, init_key), refit_buckets, validation, train_key,
    )  # fmt: skip


@jax.jit
def _member_keys(key):
    """``(init key, train key)``: a seed's key split in one program (eager: two, the unstack's)."""
    keys = jax.random.split(key)
    return keys[0], keys[1]


def _chosen(plan: MemberPlan, result: training.TrainResult | None):
    """``(epochs, early, history)``: the refit's epochs from the monitored fit's result."""
    settings = plan.member.settings
    if result is None:
        return settings.max_epochs, None, np.zeros(0)
    ran = int(result.epochs)
    epochs = int(result.best_epoch)
    history = np.asarray(result.history, np.float64)[: ran + 1]
    early = EarlyStopping(
        "validation_fraction",
        best=epochs,
        monitored=ran,
        validation_sets=plan.held_sets,
        validation_fraction=plan.member.fraction,
        validation_history=tuple(float(h) for h in history),
        unit="epoch",
    )
    return epochs, early, history


def _report(plan: MemberPlan, epochs: int, early, seconds: float) -> FitReport:
    settings = plan.member.settings
    status, reason = epoch_status(
        early, plan.skipped, settings.max_epochs, plan.member.fitted_start
    )
    if early is None:
        early = EarlyStopping(skipped=plan.skipped or "off", unit="epoch")
    return FitReport(
        plan.member.method, status, reason, epochs, unit="epoch", seconds=seconds,
        early_stopping=early,
    )  # fmt: skip


def train_with_early_stopping(
    make: Callable,
    sets: RaggedSets,
    settings: training.TrainSettings,
    fraction: float,
    seed: int,
    method: str,
    verbose: bool = False,
    fitted_start: bool = False,
    widen: bool = False,
) -> tuple[eqx.Module, FitReport, np.ndarray]:
    """Trains a network with early stopping on held-out sets, then refits it on all the sets.

    The arguments are the fields of a :class:`Member` (``make``, ``sets``, ``settings``,
    ``fraction``, ``seed``, ``method``, ``verbose``, ``fitted_start``, ``widen``), documented
    there: the fit :func:`fit_together` runs batched with others.

    Returns:
        ``(network, report, history)``: the refitted network, the fit's
        :class:`~dpp.model.report.FitReport` (``status``, ``reason``, ``rounds`` in epochs,
        ``early_stopping`` ...), and the held-out log-likelihood per epoch.
    """
    t0 = time.perf_counter()
    member = Member(make, sets, settings, fraction, seed, method, verbose, fitted_start, widen)
    plan = plan_member(member)
    first = None
    if plan.monitored:
        first = training.train(
            plan.start,
            plan.buckets,
            plan.validation,
            plan.train_key,
            settings,
            np.int32(settings.max_epochs),
            np.asarray(True),
        )  # fmt: skip (traced cap and flag: one program for both fits)
    epochs, early, history = _chosen(plan, first)
    if verbose:
        _say_monitored(plan, early, time.perf_counter() - t0)
    refit = training.train(
        plan.refit_start, plan.refit_buckets, plan.validation, plan.train_key, settings,
        np.int32(epochs), np.asarray(False),
    )  # fmt: skip
    report = _report(plan, epochs, early, time.perf_counter() - t0)
    if verbose:
        say(logger, "%s: %s in %.1f s (%s)", method, report.status, report.seconds, report.reason)
    return refit.model, report, history


def _say_monitored(plan: MemberPlan, early: EarlyStopping | None, seconds: float) -> None:
    """The progress line of a verbose fit after its monitored fit."""
    method = plan.member.method
    if early is None:
        say(logger, "%s: %s; training on all %d sets", method,
            plan.skipped or "early stopping off", plan.member.sets.num_sets)  # fmt: skip
        return
    say(
        logger,
        "%s: early stopping on %d held-out sets: best epoch %d of %d (validation "
        "log-likelihood per set %s), %.1f s; refitting on all %d sets",
        method, early.validation_sets, early.best, early.monitored,
        _fmt(early.validation_history[early.best]), seconds, plan.member.sets.num_sets,
    )  # fmt: skip


def _fmt(value) -> str:
    return "not finite" if value is None or not math.isfinite(value) else f"{value:.4f}"


def held_out_score(report: FitReport) -> float:
    """The best held-out log-likelihood per set of a fit's early stopping (``-inf``: none).

    What a fit with several candidate weight decays keeps the best of
    (:meth:`AdamTrained.decay_candidates`): every candidate is monitored on the same held-out
    sets (one seed, one split), so their scores compare.
    """
    history = report.early_stopping.validation_history if report.early_stopping else ()
    values = [v for v in history if v is not None and math.isfinite(v)]
    return max(values) if values else -math.inf


def best_held_out(reports: list[FitReport]) -> int:
    """The index of the report with the best :func:`held_out_score` (the first at a tie)."""
    scores = [held_out_score(r) for r in reports]
    return max(range(len(scores)), key=lambda i: (scores[i], -i))


def default_chunk(members: int) -> int:
    """Members ``vmap``-ped at a time by default: all on an accelerator, one on the CPU.

    On the CPU a fit is compute-bound, so vectorising members gains little, and a chunk runs
    until its slowest member stops; one at a time, each member is also bit for bit its fit
    alone (:func:`dpp.networks.training.train_batch`). ``python benchmarks/bench.py --together``
    prints both.
    """
    return members if vectorise_members() else 1


def train_together(
    members: list[Member], chunk: int | None = None
) -> list[tuple[eqx.Module, FitReport, np.ndarray]]:
    """:func:`train_with_early_stopping` of several members, batched into one program per shape.

    Fixed-step epochs: members (e.g. a selection's folds x ``l2`` values x
    seeds) whose networks, buckets and validation sets have the same shapes and whose
    :class:`~dpp.networks.training.TrainSettings` are equal but for the learning rate and the
    weight decay (traced: :meth:`~dpp.networks.training.TrainSettings.rates`) run their
    monitored fits as one
    program (:func:`dpp.networks.training.train_batch`), then their refits as another call of
    it, each member for its own number of epochs. Member ``i`` ends where
    ``train_with_early_stopping`` on it alone ends: its split, start, shuffles, dropout and
    early stopping are its own. One member at a time in the program (``chunk=1``, the CPU's
    default) it ends there bit for bit, whichever members ran beside it; vectorised, only
    float32 rounding differs (within 3e-7 over a short training, ``tests/test_neural.py``;
    Adam on mini-batches of one set amplifies it over tens of epochs). The host-side parts
    (splits, k-means of a start) run member by member.

    Args:
        members: the fits.
        chunk: members vectorised at a time (:func:`~dpp.networks.training.train_batch`);
            default :func:`default_chunk`.

    Returns:
        ``[(network, report, history)]`` per member, as :func:`train_with_early_stopping`;
        a report's ``seconds`` is the batch's wall time over the number of members.
    """
    t0 = time.perf_counter()
    plans = [plan_member(m) for m in members]
    firsts: list = [None] * len(plans)
    monitored = [i for i, p in enumerate(plans) if p.monitored]
    caps = [p.member.settings.max_epochs for p in plans]
    for group in _same_shapes(plans, monitored, lambda p: (p.start, p.buckets)):
        results = _run(plans, group, "start", "buckets", caps, True, chunk)
        firsts = _placed(firsts, group, results)
    chosen = [_chosen(p, f) for p, f in zip(plans, firsts, strict=True)]
    epochs = [c[0] for c in chosen]
    refits: list = [None] * len(plans)
    everyone = list(range(len(plans)))
    for group in _same_shapes(plans, everyone, lambda p: (p.refit_start, p.refit_buckets)):
        results = _run(plans, group, "refit_start", "refit_buckets", epochs, False, chunk)
        refits = _placed(refits, group, results)
    seconds = (time.perf_counter() - t0) / max(len(plans), 1)
    return [
        (refit.model, _report(p, e, early, seconds), history)
        for p, refit, (e, early, history) in zip(plans, refits, chosen, strict=True)
    ]


def _signature(tree) -> tuple:
    """What must agree for pytrees to stack: structure, array shapes and dtypes, other leaves."""
    leaves, treedef = jax.tree.flatten(tree)
    return treedef, tuple(
        (leaf.shape, str(leaf.dtype)) if eqx.is_array(leaf) else leaf for leaf in leaves
    )


def _same_shapes(plans: list[MemberPlan], members: list[int], parts) -> list[list[int]]:
    """``members`` grouped by settings (but the traced rates) and shapes of their parts."""
    groups: dict = {}
    for i in members:
        p = plans[i]
        key = (p.member.settings.structure(), _signature((parts(p), p.validation)))
        groups.setdefault(key, []).append(i)
    return list(groups.values())


def _placed(out: list, group: list[int], results: list) -> list:
    """``out`` with ``results[j]`` at index ``group[j]``."""
    out = list(out)
    for i, result in zip(group, results, strict=True):
        out[i] = result
    return out


def _stack(trees: list):
    """The members' pytrees stacked leaf by leaf, on the host.

    ``jnp.stack`` would compile a program per leaf shape; :func:`~dpp.sets.to_device` none.
    """
    return jax.tree.map(
        lambda *xs: to_device(np.stack([np.asarray(x) for x in xs])) if eqx.is_array(xs[0])
        else xs[0],
        *trees,
    )  # fmt: skip


def _stacked_keys(keys: list) -> jax.Array:
    """``[B]`` PRNG keys stacked on the host (``jnp.stack`` compiles a program)."""
    data = np.stack([np.asarray(jax.random.key_data(k)) for k in keys])
    return jax.random.wrap_key_data(to_device(data))


def _unstacked(result, count: int) -> list:
    """``count`` pytrees, member ``j``'s leaves ``leaf[j]``, split on the host.

    Indexing on the device would compile a slice per leaf shape.
    """
    host = jax.tree.map(lambda a: np.asarray(a) if eqx.is_array(a) else a, result)
    return [
        jax.tree.map(lambda a, j=j: to_device(a[j]) if eqx.is_array(a) else a, host)
        for j in range(count)
    ]


def _run(plans, group, start: str, buckets: str, caps, monitor: bool, chunk) -> list:
    """One :func:`~dpp.networks.training.train_batch` call for a group; the members' results."""
    chosen = [plans[i] for i in group]
    chunk = default_chunk(len(group)) if chunk is None else min(int(chunk), len(group))
    result = training.train_batch(
        _stack([getattr(p, start) for p in chosen]),
        _stack([getattr(p, buckets) for p in chosen]),
        _stack([p.validation for p in chosen]),
        _stacked_keys([p.train_key for p in chosen]),
        chosen[0].member.settings,
        to_device(np.asarray([caps[i] for i in group], np.int32)),
        to_device(np.full(len(group), bool(monitor))),
        chunk,
        np.stack([p.member.settings.rates() for p in chosen]),
    )  # fmt: skip
    return _unstacked(result, len(group))


def fit_together(estimators: list, training: list, chunk: int | None = None) -> list:
    """Fits Adam-trained estimators on their training sets as batched programs.

    Each estimator ends as ``estimator.fit(sets)`` alone would (bit for bit with ``chunk=1``):
    its own preprocessing, split, start, shuffles and early stopping; only the epochs run
    batched (:func:`train_together`). What a selection gives it: inner folds x candidates x
    seeds (``DPPClassifierCV`` over DPP on an embedding).

    Args:
        estimators: unfitted estimators trained by Adam epochs (:class:`AdamTrained`:
            :class:`NeuralSetClassifier` subclasses and ``EmbeddedDPPClassifier``; for batching,
            of equal ``batch_size``, ``max_epochs`` and ``patience``; their learning rates and
            weight decays may differ; others run in a batch of their own).
        training: each estimator's labelled training sets (:class:`~dpp.sets.RaggedSets`).
        chunk: members vectorised at a time (:func:`train_together`).

    Returns:
        The estimators, fitted.

    Raises:
        ValueError: lists of different lengths, an estimator that is not trained by Adam
            epochs, and the errors of each estimator's ``fit``.
    """
    if len(estimators) != len(training):
        raise ValueError(
            f"fit_together needs one training set per estimator: {len(estimators)} "
            f"estimators, {len(training)} training sets"
        )
    members, owners = [], []
    for i, (est, sets) in enumerate(zip(estimators, training, strict=True)):
        if not isinstance(est, AdamTrained):
            raise ValueError(
                f"fit_together batches Adam-trained fits: {type(est).__name__} is not one"
            )
        for decay in est.decay_candidates():  # one member each (one for a single decay)
            members.append(est.training_member(sets, weight_decay=decay))
            owners.append((i, decay))
    results = train_together(members, chunk)
    out = []
    for i, est in enumerate(estimators):
        mine = [(decay, r) for (owner, decay), r in zip(owners, results, strict=True) if owner == i]
        reports = [r[1] for _, r in mine]
        best = best_held_out(reports)
        scores = tuple((d, held_out_score(r)) for (d, _), r in zip(mine, reports, strict=True))
        network, report, _ = mine[best][1]
        out.append(
            est.finish_training(network, report, weight_decay=mine[best][0], held_out=scores)
        )
    return out


class AdamTrained:
    """What every Adam-trained set model shares: its training parameters' rules and settings.

    :class:`NeuralSetClassifier` and :class:`~dpp.estimators.embedded.EmbeddedDPPClassifier`:
    ``embedding`` widths, ``dropout``, Adam's ``learning_rate`` and ``weight_decay``,
    ``batch_size``, ``max_epochs``, ``patience`` (epochs), ``validation_fraction`` and
    ``verbose``, and a model file holding the network's arrays
    (``net_000`` ...).
    """

    #: The rules of the training parameters; classes extend them.
    TRAIN_RULES: ClassVar[dict[str, check.Rule]] = {
        "embedding": check.Widths(),
        "dropout": check.Real(low=0, high=1, high_open=True),
        "learning_rate": check.Real(low=0, low_open=True),
        "weight_decay": check.Real(low=0),
        "batch_size": check.Int(1),
        "max_epochs": check.Int(1),
        "patience": check.Int(1),
        "validation_fraction": check.Real(low=0, high=1, high_open=True),
        "verbose": check.Bool(),
    }

    def check_params(self) -> None:
        """Checks every parameter by the class's table.

        Raises:
            ValueError: naming the parameter, the rule and the value.
        """
        check.check_table(self, self.PARAMETER_RULES)

    def training_member(self, X, y=None, sample_weight=None, weight_decay=None) -> Member:
        """Checks the parameters and inputs, fits the preprocessing: the fit's :class:`Member`.

        What ``fit`` trains, :func:`fit_together` batches and
        ``benchmarks/lab/diagnosis.py`` steps epoch by epoch.

        Args:
            X: ``N`` training sets (as ``fit`` takes them).
            y: ``[N]`` class labels or ``[N, C]`` soft labels; ``None`` for labelled
                ``RaggedSets``.
            sample_weight: optional ``[N]`` per-set weights.
            weight_decay: the candidate decay to train with (one of
                :meth:`decay_candidates`); ``None``: the only one.

        Returns:
            The :class:`Member` (preprocessed sets, the start's maker, settings, seed).

        Raises:
            ValueError: bad parameters or inputs, as ``fit``; ``weight_decay=None`` where
                ``weight_decay`` holds several candidates.
        """
        sets, seed = self.prepare_sets(X, y, sample_weight)
        return self._member(sets, seed, self._one_decay(weight_decay))

    def decay_candidates(self) -> tuple[float, ...]:
        """The weight decays a fit trains with: ``(weight_decay,)``, or each of a sequence.

        With several, each is trained on the same split and start, and the one whose early
        stopping held out the best log-likelihood per set is kept (:func:`best_held_out`).
        """
        decay = self.weight_decay
        if isinstance(decay, list | tuple):
            return tuple(float(d) for d in decay)
        return (float(decay),)

    def _one_decay(self, weight_decay) -> float:
        candidates = self.decay_candidates()
        if weight_decay is not None:
            return float(weight_decay)
        if len(candidates) > 1:
            raise ValueError(
                f"weight_decay holds {len(candidates)} candidates {candidates}: pass "
                "weight_decay= one of them to train a single member"
            )
        return candidates[0]

    def _train_settings(self, weight_decay: float) -> training.TrainSettings:
        return training.TrainSettings(
            learning_rate=float(self.learning_rate),
            weight_decay=float(weight_decay),
            batch_size=int(self.batch_size),
            max_epochs=int(self.max_epochs),
            patience=int(self.patience),
        )

    def _widths(self) -> tuple[int, ...]:
        return check.Widths()("embedding", self.embedding)

    def file_arrays(self) -> tuple[frozenset, frozenset, str | None]:
        """No fixed arrays: the network's are ``net_000``, ... (checked by ``restore_arrays``)."""
        return frozenset(), frozenset(), "net_"
