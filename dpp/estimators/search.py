"""The search of :class:`~dpp.DPPClassifierCV`: its candidates, their fold fits, scores and rules.

- **Candidates** (:class:`Group`, :func:`candidate_groups`): the grid's ``(K, pooling,
  embedding)`` groups, each crossed with the ``l2`` path, and the estimators, refits and names
  they make.
- **Fold fits** (:class:`CandidateSearch`): every candidate on every fold, the paper's model's
  ``l2`` path as one compiled program per group
  (:func:`~dpp.solvers.coordinate_ascent.fit_classifier_paths`), scored on the held-out sets.
- **Rules** (:data:`RULES`, :func:`choose`): each member's best candidate combined
  (``ensemble``), or the one best candidate (``best``).
- **Beside** (:class:`Beside`): an embedded member's fits in a second thread while the paper's
  model's candidates compile and fit (``n_jobs=None``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections import Counter
from typing import NamedTuple

import numpy as np
from joblib import Parallel, delayed
from scipy.special import log_softmax
from sklearn.base import clone

from dpp import params as check
from dpp.errors import (
    NonFiniteResultError,
    caller_location,
    statuses_recorded,
    warn_caller,
    warnings_attributed_to,
)
from dpp.estimators.adam import fit_together
from dpp.estimators.base import PrototypeClassifier
from dpp.estimators.baselines import ClassPriorClassifier
from dpp.estimators.dpp import DPPClassifier
from dpp.estimators.embedded import WIDTHS, EmbeddedDPPClassifier
from dpp.estimators.ensemble import combined_log_proba
from dpp.metrics import weighted_score
from dpp.model.fit import round_scores
from dpp.model.report import CLEAN_STATUSES
from dpp.pooling import POOLINGS, simplicity
from dpp.selection import early_stopping_runs
from dpp.sets import Layout, RaggedSets
from dpp.solvers import options as solver_options
from dpp.solvers.coordinate_ascent import fit_classifier_paths

logger = logging.getLogger(__name__)

#: The held-out share with which a candidate on an embedding stops early within a fold.
DEFAULT_VALIDATION_FRACTION = 0.2


def check_grids(l2s, n_prototypes, pooling, embedding, mu_prior_scales=None) -> None:
    """Checks :class:`DPPClassifierCV`'s candidate values before any fit.

    Raises:
        ValueError: an empty or negative ``l2s``, a ``K`` below 1, an empty or string list of
            poolings or embeddings (but ``embedding="auto"``), an unknown pooling, bad widths,
            an empty ``mu_prior_scales`` or one that is neither ``None`` nor positive.
    """
    values = [float(v) for v in l2s]
    if not values or min(values) < 0:
        raise ValueError(f"l2s must be a non-empty list of values >= 0, got {l2s!r}")
    for k in n_prototypes or ():
        check.int_at_least("n_prototypes", k, 1)
    auto = isinstance(embedding, str) and embedding == "auto"
    for name, value in (("pooling", pooling), ("embedding", None if auto else embedding)):
        if value is not None and (isinstance(value, str) or not list(value)):
            extra = ", 'auto'" if name == "embedding" else ""
            raise ValueError(
                f"{name} must be a non-empty list of candidates{extra} or None, got {value!r}"
            )
    for p in pooling or ():
        check.choice("pooling", p, POOLINGS)
    for e in () if auto else embedding or ():
        if e is not None:
            check.Widths()("embedding", e)
    if mu_prior_scales is not None:
        scales = [] if isinstance(mu_prior_scales, str) else list(mu_prior_scales)
        rule = check.Optional(check.Real(low=0, low_open=True))
        if not scales:
            raise ValueError(
                f"mu_prior_scales must be a non-empty list of scales (None: no prior) or None, "
                f"got {mu_prior_scales!r}"
            )
        for scale in scales:
            rule("mu_prior_scales", scale)


def resolved_embeddings(base, embedding, embedding_grid: str) -> tuple:
    """``(embedding, embedding_grid)`` with :class:`DPPClassifierCV`'s ``"auto"`` resolved.

    ``embedding="auto"``: the paper's model and ``EmbeddedDPPClassifier()``'s widths
    (:data:`~dpp.estimators.embedded.WIDTHS`) over a :class:`~dpp.DPPClassifier`, the
    estimator's own (``(None,)``) over any other; ``embedding_grid="auto"``: ``grid`` over an
    :class:`~dpp.EmbeddedDPPClassifier` (its settings are what is tuned), else ``own`` (the
    added member fits as ``EmbeddedDPPClassifier()`` does alone). Other values pass through.
    """
    embedded = isinstance(base, EmbeddedDPPClassifier)
    if isinstance(embedding, str) and embedding == "auto":
        embedding = (None, WIDTHS) if isinstance(base, DPPClassifier) else (None,)
    if embedding_grid == "auto":
        embedding_grid = "grid" if embedded else "own"
    return embedding, embedding_grid


def monitored_embeddings(
    base, embedding, groups: list, own: dict, num_sets: int
) -> tuple[list, dict]:
    """``(groups, own)`` without ``embedding="auto"``'s member where its model cannot stop early.

    The member on an embedding that ``"auto"`` adds to a :class:`~dpp.DPPClassifier` holds out
    :data:`DEFAULT_VALIDATION_FRACTION` of each fit's training sets for early stopping, widened
    to 10 sets from 20 (``EmbeddedDPPClassifier(widen_validation=True)``, the default;
    :func:`dpp.selection.early_stopping_runs`). Where the training sets are too few for that
    (under 20; without the widening, under 46), its refit, the model the selection would
    return, would train for ``max_epochs`` unmonitored, which no benchmark covered: ``"auto"``
    then leaves it out, and says so in the log. Otherwise it is kept, though its fits on the
    inner folds' smaller parts may train unmonitored (parts under 20 sets): measured on 20, 40,
    50 and 60 training sets, it helps (``docs/defaults.md``, "The embedded member on small
    data", "The widened hold-out"). Explicit embeddings, and an
    :class:`~dpp.EmbeddedDPPClassifier`'s own, are kept.

    Args:
        base: the tuned estimator.
        embedding: :class:`DPPClassifierCV`'s ``embedding``.
        groups: :func:`candidate_groups`' groups.
        own: :func:`candidate_groups`' groups scored at one ``l2``.
        num_sets: the number of training sets (the refit's).
    """
    auto = isinstance(embedding, str) and embedding == "auto" and isinstance(base, DPPClassifier)
    default = EmbeddedDPPClassifier().widen_validation
    widen = all(
        dict(g.settings).get("widen_validation", default) for g in groups if g.embedding is not None
    )
    stops = early_stopping_runs(num_sets, DEFAULT_VALIDATION_FRACTION, widen)
    if not auto or stops or all(g.embedding is None for g in groups):
        return groups, own
    logger.info(
        "DPPClassifierCV: embedding='auto' leaves out the member on an embedding: on %d "
        "training sets its early stopping could hold none out and it would train unmonitored; "
        "embedding=(None, %s) keeps it", num_sets, WIDTHS,
    )  # fmt: skip
    kept = [g for g in groups if g.embedding is None]
    return kept, {g: v for g, v in own.items() if g in kept}


class Group(NamedTuple):
    """A candidate of :class:`DPPClassifierCV` but its ``l2``: ``K``, pooling, embedding, seed.

    ``pooling`` and ``embedding`` are ``None`` where the estimator keeps its own (or has
    none); ``l2`` runs along a path within a group. ``random_state``: the seed of one more
    member on an embedding (:func:`seeded_embeddings`), ``None`` for the estimator's own.
    ``settings``: ``(name, value)`` pairs of the other parameters a member on an embedding
    over a paper's model fits with (:class:`DPPClassifierCV`'s ``embedding_options``).
    """

    n_prototypes: int
    pooling: str | None = None
    embedding: tuple[int, ...] | None = None
    random_state: int | None = None
    settings: tuple = ()

    def params(self) -> dict:
        """The estimator parameters this group sets (:func:`candidate` fits them)."""
        out = {"n_prototypes": self.n_prototypes, **dict(self.settings)}
        if self.pooling is not None:
            out["pooling"] = self.pooling
        if self.embedding is not None:
            out["embedding"] = self.embedding
        if self.random_state is not None:
            out["random_state"] = self.random_state
        return out

    def member(self) -> tuple:
        """The ensemble's member of this group: ``(pooling, embedding)``, and its seed."""
        seed = () if self.random_state is None else (self.random_state,)
        return self.pooling, self.embedding, *seed

    def simplicity(self) -> tuple:
        """Larger for simpler models, the tie-break of equal scores.

        Fewer prototypes first, then no embedding, then the paper's mean pooling before max
        and max before the generalised mean.
        """
        return (-self.n_prototypes, self.embedding is None, simplicity(self.pooling))


def candidate(base, group: Group, **params):
    """The unfitted estimator of ``group`` (with ``params`` set), from the tuned ``base``.

    ``base`` cloned with the group's parameters; for a group on an embedding over a paper's
    model, the :class:`~dpp.EmbeddedDPPClassifier` with ``base``'s shared parameters
    (:meth:`~dpp.EmbeddedDPPClassifier.like`).
    """
    if group.embedding is None or isinstance(base, EmbeddedDPPClassifier):
        return clone(base).set_params(**group.params(), **params)
    return EmbeddedDPPClassifier.like(base, **group.params(), **params)


#: ``EmbeddedDPPClassifier`` parameters that :class:`DPPClassifierCV` sets itself on a member
#: on an embedding (its grid, seeds and early stopping), never ``embedding_options``.
SET_BY_SEARCH = ("embedding", "random_state", "validation_fraction")


def embedded_settings(base, options) -> dict:
    """:class:`DPPClassifierCV`'s ``embedding_options`` checked: ``{}`` for ``None``.

    ``n_prototypes``, ``pooling`` and ``l2`` among them are the member's own with
    ``embedding_grid="own"``; on the grid, the grid's values are fitted instead
    (:func:`candidate_groups`).

    Raises:
        ValueError: not a dict; a name that is not an :class:`~dpp.EmbeddedDPPClassifier`
            parameter or is one of :data:`SET_BY_SEARCH`; a value that cannot be hashed (a
            candidate is a key); options over a tuned ``EmbeddedDPPClassifier`` (set them on
            it).
    """
    if options is None:
        return {}
    if not isinstance(options, dict):
        raise ValueError(f"embedding_options must be a dict or None, got {options!r}")
    if options and isinstance(base, EmbeddedDPPClassifier):
        raise ValueError(
            "embedding_options set the members on an embedding over a paper's model; the tuned "
            f"EmbeddedDPPClassifier's own parameters are its members': set them on it ({options})"
        )
    known = set(EmbeddedDPPClassifier().get_params()) - set(SET_BY_SEARCH)
    for name, value in options.items():
        if name not in known:
            raise ValueError(
                f"embedding_options: {name!r} is not an EmbeddedDPPClassifier parameter the "
                f"search leaves to its members (those: {sorted(known)})"
            )
        try:
            hash(value)
        except TypeError:
            raise ValueError(
                f"embedding_options: {name}={value!r} must be a hashable value"
            ) from None
    return dict(options)


def candidate_groups(
    base,
    n_prototypes,
    pooling,
    embedding,
    embedding_grid: str = "grid",
    options=None,
    mu_prior_scales=None,
) -> tuple[list[Group], dict[Group, float]]:
    """The candidate groups of :class:`DPPClassifierCV` over ``base``, and those not on a path.

    Every embedding (``None``: the paper's model) crossed with every pooling and ``K`` (each
    ``None`` where ``base`` has no such parameter or keeps its own), ``l2`` running along a path
    within each; with ``embedding_grid="own"``, an embedding is instead one group on the
    embedded estimator's own ``K`` and pooling (``base``'s for an
    :class:`~dpp.EmbeddedDPPClassifier`, else ``EmbeddedDPPClassifier(**options)``'s), scored
    at its own ``l2`` alone.

    Args:
        base: the tuned prototype estimator.
        n_prototypes: the ``K`` values (``None``: ``base``'s own).
        pooling: the poolings (``None``: ``base``'s own, or none).
        embedding: the embeddings, widths or ``None`` for the paper's model (``None``: none),
            or ``"auto"`` (:func:`resolved_embeddings`).
        embedding_grid: one of :data:`EMBEDDING_GRIDS`.
        options: ``embedding_options``, the other parameters of the members on an embedding
            over a paper's model (:func:`embedded_settings`; their ``K``, pooling and ``l2``
            only where ``embedding_grid="own"``, the grid's otherwise).
        mu_prior_scales: the ``mu_prior_scale`` values of the groups on the raw vectors of a
            :class:`~dpp.DPPClassifier` (``None``: ``base``'s own alone). Each is a group of
            the same member (pooling), so a member's scale is chosen among its candidates as
            its ``l2`` is.

    Returns:
        ``(groups, own)``: the distinct groups in order, and ``own``: group -> its one ``l2``.

    Raises:
        ValueError: an unknown pooling, bad widths, bad ``options``, ``mu_prior_scales`` for an
            estimator without ``mu_prior_scale``.
    """
    options = embedded_settings(base, options)
    settings = tuple(
        sorted((k, v) for k, v in options.items() if k not in ("n_prototypes", "pooling", "l2"))
    )
    embedding, embedding_grid = resolved_embeddings(base, embedding, embedding_grid)
    ks = [base.n_prototypes] if n_prototypes is None else list(n_prototypes)
    params = base.get_params()
    if mu_prior_scales is not None and "mu_prior_scale" not in params:
        raise ValueError(
            f"mu_prior_scales chooses a DPPClassifier's prior on mu; {type(base).__name__} has "
            "none: leave mu_prior_scales=None"
        )
    poolings = [None]
    if pooling is not None and "pooling" in params:
        poolings = [check.choice("pooling", p, POOLINGS) for p in pooling]
    embeddings = [None]  # embedding candidates: over the paper's model or the embedded one
    if embedding is not None and isinstance(base, DPPClassifier | EmbeddedDPPClassifier):
        embeddings = list(embedding)
    if isinstance(base, EmbeddedDPPClassifier):  # None: its own widths (it has no other)
        embeddings = [tuple(params["embedding"]) if e is None else e for e in embeddings]
    groups, own = [], {}
    for e in embeddings:
        widths = None if e is None else check.Widths()("embedding", e)
        extra = () if widths is None else settings
        if widths is not None and embedding_grid == "own":  # the embedded class's settings
            embedded = isinstance(base, EmbeddedDPPClassifier)
            alone = base if embedded else EmbeddedDPPClassifier(**options)
            group = Group(int(alone.n_prototypes), alone.pooling, widths, settings=extra)
            groups.append(group)
            own[group] = float(alone.l2)
        elif widths is None and mu_prior_scales is not None and "mu_prior_scale" in params:
            scales = [
                (("mu_prior_scale", None if s is None else float(s)),) for s in mu_prior_scales
            ]
            groups += [
                Group(int(k), p, None, settings=m) for p in poolings for m in scales for k in ks
            ]
        else:
            groups += [Group(int(k), p, widths, settings=extra) for p in poolings for k in ks]
    return list(dict.fromkeys(groups)), own


def refit_params(key: tuple, rounds: int | None) -> dict:
    """The parameters that make the tuned estimator candidate ``key``'s refit.

    Its grid values (``K``, pooling, embedding, ``l2``) and how it stops: after ``rounds``
    coordinate-ascent rounds where they were chosen (``round_cap``, early stopping off), or on
    its own held-out share for a candidate on an embedding. ``best_params_`` (and each member's
    ``params``) hold them: ``clone(estimator).set_params(**best_params_)`` fitted on the same
    sets is the refit.

    Args:
        key: ``(Group, l2)``.
        rounds: the chosen rounds, or ``None``.
    """
    group, l2 = key
    params = {**group.params(), "l2": l2}
    if group.embedding is not None:
        params["validation_fraction"] = DEFAULT_VALIDATION_FRACTION
    elif rounds is not None:
        params.update(validation_fraction=0.0, round_cap=int(rounds))
    return params


def refit_estimator(base, key: tuple, rounds: int | None):
    """The unfitted refit of candidate ``key``: :func:`candidate` with :func:`refit_params`."""
    group = key[0]
    extra = {k: v for k, v in refit_params(key, rounds).items() if k not in group.params()}
    return candidate(base, group, **extra)


def member_name(member: tuple) -> str:
    """A member's name: its pooling (``own`` without one), ``_embedded``, ``_seed<n>``."""
    pooling, embedding, *seed = member
    name = (pooling or "own") + ("" if embedding is None else "_embedded")
    return name + "".join(f"_seed{s}" for s in seed)


def seeded_embeddings(groups: list, own: dict, seeds: int, seed: int) -> tuple[list, dict]:
    """``(groups, own)`` with each ``own`` member on an embedding over ``seeds`` seeds.

    The group (the estimator's own seed) and ``seeds - 1`` more, seeded ``seed + 1``,
    ``seed + 2``, ..., each a member of the ensemble (a network's fit varies with
    its start, split, set order and dropout; an average over seeds, a deep ensemble,
    Lakshminarayanan, Pritzel & Blundell 2017, varies less).

    Args:
        groups: :func:`candidate_groups`' groups (after :func:`monitored_embeddings`).
        own: those scored at one ``l2``.
        seeds: how many seeds (>= 1; 1 returns ``groups`` and ``own`` as they are).
        seed: the tuned estimator's seed (its folds').
    """
    out, scored = [], {}
    for g in groups:
        more = seeds if g.embedding is not None and g in own else 1
        for i in range(more):
            copy = g if i == 0 else g._replace(random_state=int(seed) + i)
            out.append(copy)
            if g in own:
                scored[copy] = own[g]
    return out, scored


def candidate_name(key: tuple) -> str:
    """``pooling='max', n_prototypes=4, l2=0.1``: a candidate ``(Group, l2)`` by its grid values.

    Floats as the shortest form that reads back (``%g``), as a user writes a grid.
    """
    group, l2 = key
    params = {**group.params(), "l2": l2}
    return ", ".join(
        f"{k}={v:g}" if isinstance(v, float) else f"{k}={v!r}" for k, v in params.items()
    )


def warn_unclean_choice(owner: str, key: tuple, statuses: list, refit) -> None:
    """:class:`~dpp.errors.FitWarning` s for a chosen candidate whose fits did not end clean.

    One per status of its fold fits that is not clean (its score came from them), and one for
    its refit on every training set; each names the candidate by its grid values (pooling,
    ``K``, embedding, ``l2``), not by the settings the search gave its fits. The other
    candidates' statuses are rows of ``cv_results_`` (``split<i>_fit_status``,
    ``fit_status``), not warnings: the search chose around them.

    Args:
        owner: the search's class name.
        key: ``(Group, l2)`` of the chosen candidate.
        statuses: its fold fits' statuses.
        refit: the fitted refit (its ``fit_report_``).
    """
    name = candidate_name(key)
    for status, count in Counter(s for s in statuses if s not in CLEAN_STATUSES).items():
        warn_caller(
            f"{owner}: the chosen candidate ({name}) ended {status} in {count} of "
            f"{len(statuses)} fold fits, whose scores chose it (cv_results_['split<i>_fit_status'])"
        )
    report = refit.fit_report_
    if not report.clean:
        warn_caller(
            f"{owner}: the refit of the chosen candidate ({name}) ended {report.status}: "
            f"{report.reason}"
        )


#: Why :class:`DPPClassifierCV` refuses an estimator, and what tunes it instead.
NOT_TUNED = {
    name: "DPPClassifierCV tunes the prototype estimators' l2, K and pooling; {name} chooses its "
    "C by its own cross-validation (its Cs and cv parameters): fit it directly"
    for name in ("PoolingClassifier", "BagOfWordsClassifier")
} | {
    name: "DPPClassifierCV tunes the prototype estimators' l2, K and pooling; choose {name}'s "
    "learning_rate and weight_decay with sklearn.model_selection.GridSearchCV"
    for name in ("AttentionMILClassifier", "DeepSetsClassifier")
}
NOT_TUNED[None] = (
    "DPPClassifierCV tunes the prototype estimators (DPPClassifier, EmbeddedDPPClassifier, "
    "StandardPrototypeClassifier, InfoLossClassifier, ClassPriorClassifier); got {name}"
)


class MemberChoice(NamedTuple):
    """One member's choice in :class:`~dpp.DPPClassifierCV`: what its result is written from."""

    name: str  # the member's name in an ensemble ("" alone)
    key: tuple  # (Group, l2)
    rounds: int | None  # the chosen rounds (select_rounds), else None
    score: float  # its validation score by the rule
    position: str  # where its l2 lies among the values scored
    added: list  # l2 values added past an edge of its grown path
    fitted: object  # its refit on every training set (None until refitted)
    edge: str | None = None  # the warning of an l2 at its grid's edge, said if it is kept


#: How :class:`DPPClassifierCV` picks among its scored candidates: each member's best
#: candidate, the members combined (``ensemble``), or the one best candidate (``best``).
RULES = ("ensemble", "best")


def choose(scores: dict):
    """The chosen ``(group, l2)`` key of ``scores`` (``key -> [folds]`` validation scores).

    The highest mean score; ties go to the stronger ``l2``, then the simpler model (the
    group's ``simplicity()``: a :class:`Group`, larger for fewer
    prototypes, no embedding, the paper's mean pooling before max before gem). A pure function
    of the scores.
    """
    mean = {key: float(np.mean(v)) for key, v in scores.items()}
    return max(mean, key=lambda c: (mean[c], c[1], c[0].simplicity()))


def member_scores(scores: dict, member) -> dict:
    """The scores of the candidates of one ensemble member (``None``: every candidate).

    Args:
        scores: ``(group, l2) -> [folds]`` validation scores; a group's ``member()`` is its
            ``(pooling, embedding)``.
        member: a ``(pooling, embedding)`` pair, or ``None``.

    Returns:
        The entries of ``scores`` whose group belongs to ``member`` (all of them for ``None``).
    """
    return {k: v for k, v in scores.items() if member is None or k[0].member() == member}


def cores() -> int:
    """The CPU cores this process may run on.

    Its affinity mask where the OS keeps one (Linux: a container's or ``taskset``'s share),
    else every core (``os.cpu_count``).
    """
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


class Beside:
    """Calls run one after another in a thread of their own: :meth:`result` waits for one.

    The thread says its warnings at ``caller`` (the user's line, as a joblib worker does); a
    call's failure is raised by :meth:`result` in the thread that waits, and the calls after
    it do not run. :meth:`stop` skips the calls not yet started and waits for the one running:
    the owner calls it before it returns or raises, so no thread outlives the fit (one killed
    inside a compiled program at the interpreter's exit aborts the process).
    """

    def __init__(self, calls: list, caller=None):
        self._out: list = [None] * len(calls)
        self._done = [threading.Event() for _ in calls]
        self._stopped = threading.Event()

        def run():
            with warnings_attributed_to(caller):
                for i, (fn, *args) in enumerate(calls):
                    try:
                        if self._stopped.is_set():
                            raise RuntimeError("stopped before it ran")
                        self._out[i] = (fn(*args), None)
                    except BaseException as err:  # raised where result() is called
                        self._out[i:] = [(None, err)] * (len(calls) - i)
                        for event in self._done[i:]:
                            event.set()
                        return
                    self._done[i].set()

        self._thread = threading.Thread(target=run, name="dpp-beside")
        self._thread.start()

    def result(self, i: int = 0):
        """Call ``i``'s return value, once it has finished; its exception, raised here."""
        self._done[i].wait()
        value, error = self._out[i]
        if error is not None:
            raise error
        return value

    def stop(self) -> None:
        """Skips the calls not yet started, and waits for the thread to end."""
        self._stopped.set()
        self._thread.join()


@contextlib.contextmanager
def stopped(pending: dict):
    """On leaving the block (a return or an error), every :class:`Beside` stopped and ended.

    ``pending``: a dict whose values are the :class:`Beside` objects.
    """
    try:
        yield
    finally:
        for work in pending.values():
            work.stop()


#: How a candidate kind's folds are fitted (each estimator class's ``fold_fits``).
FOLD_FITS = ("path", "theta_paths", "rounds", "adam")


class CandidateSearch:
    """The folds' fits of a :class:`DPPClassifierCV`, and their scores per ``(K, l2)``.

    Attributes:
        parts: ``(fitted part, held-out fold)`` per fold.
        scores: ``(K, l2) -> [folds]`` validation scores (at the best round with ``by_round``).
        rounds: ``(K, l2) -> `` the best round (``by_round`` only).
        fit_times, score_times: ``(K, l2) -> [folds]`` seconds of each fold's fit and of
            scoring its held-out fold (:meth:`times`).
        held_log_probas: ``(K, l2, fold) -> [N_f, C]`` held-out log-probabilities of the
            folds' fits that are their candidate's refit on the fold (DPP on an embedding:
            both stop on their own held-out share), so :meth:`member_log_probas` reuses them.
    """

    def __init__(
        self,
        base,
        sets: RaggedSets,
        folds,
        scoring: str,
        by_round: bool,
        n_jobs: int | None = None,
        candidates: list[Group] = (),
    ):
        self.base, self.scoring, self.by_round, self.n_jobs = base, scoring, by_round, n_jobs
        self.sets, self.folds = sets, folds
        self.codes: dict[int, np.ndarray] = {}  # K -> [F, N, K] each fold's codes of every set
        self.centres: dict[tuple[int, int], np.ndarray] = {}  # (fold, K) -> k-means centres
        self.thetas: dict[int, dict[float, np.ndarray]] = {}  # K -> l2 -> [F, K, C] maximisers
        weights = np.asarray(sets.weights, np.float64)
        self.parts = [
            (sets.subset(np.sort(fit_idx)), sets.subset(np.sort(val_idx)))
            for fit_idx, val_idx in folds
        ]
        # a grid value means the same strength on every fit: l2 times the part's weight share
        self.shrink = [weights[fit_idx].sum() / weights.sum() for fit_idx, _ in folds]
        self.scores: dict[tuple[int, float], np.ndarray] = {}
        self.rounds: dict[tuple[int, float], int] = {}
        self.per_round: dict[tuple[int, float], np.ndarray] = {}  # [folds, R] of each key
        self.fit_times: dict[tuple[int, float], np.ndarray] = {}
        self.score_times: dict[tuple[int, float], np.ndarray] = {}
        self.held_log_probas: dict[tuple, np.ndarray] = {}
        #: ``(group, l2) -> Beside``: fold fits and refit started in a thread (:meth:`beside`)
        self.pending: dict[tuple, Beside] = {}
        #: ``(K, l2) -> [folds]`` each fold fit's status (``fit_report_.status``)
        self.statuses: dict[tuple[int, float], list] = {}
        self.last: dict[tuple[int, int], PrototypeClassifier] = {}  # (fold, K) -> weakest l2
        #: DPP's folds (their held-out sets after the fitted ones) and the refit padded to one
        #: layout, so that each candidate group runs one compiled coordinate-ascent program;
        #: with several poolings, the pooling is data of that program (one for all of them)
        self.fit_params = {}
        #: the verbose fit's progress bar (:func:`dpp.solvers.progress.bar`; ``None``: none)
        self.bar = None
        #: fits already in the bar's total and not yet planned (:meth:`more`)
        self.planned = 0
        if base.fold_fits == "rounds":  # every fold's order: fitted sets, then held out
            sizes = sets.set_sizes()
            orders = [sizes] + [
                np.concatenate([sizes[np.sort(i)], sizes[np.sort(j)]]) for i, j in folds
            ]
            self.fit_params = {"layout": Layout.covering(sizes).union(Layout.of_orders(orders))}
            poolings = {g.pooling for g in candidates if g.embedding is None}
            if len(poolings) > 1:
                self.fit_params["any_pooling"] = True

    def fold_fits(self, group: Group) -> str:
        """How ``group``'s candidate is fitted on the folds: its estimator's ``fold_fits``.

        One of :data:`FOLD_FITS`, as the candidate's class declares it
        (:attr:`dpp.estimators.base.PrototypeClassifier.fold_fits`); ``rounds`` reads
        ``path`` when the rounds are not chosen (``by_round`` false).
        """
        kind = candidate(self.base, group).fold_fits
        if kind not in FOLD_FITS:
            raise ValueError(f"fold_fits must be one of {FOLD_FITS}, got {kind!r}")
        return "path" if kind == "rounds" and not self.by_round else kind

    def cross_validate(self, groups: list[Group], path: list[float], warm: bool) -> None:
        """Scores ``(group, l2)`` for each group and each l2 of ``path`` (strongest first).

        Each group's candidate says how its folds are fitted (its ``fold_fits``,
        :meth:`fold_fits`). ``theta_paths``: an estimator whose encoder does not depend on
        ``l2`` (``fold_codes``: the standard prototype) is encoded once per fold and ``K``, and
        the Theta-steps of every fold and ``l2`` run as one program (:meth:`_theta_steps`).
        ``adam``: DPP on an embedding stops early on its own held-out share of each fold (its
        rounds are epochs, not chosen here), every fit batched (:meth:`_together`).
        ``rounds`` (with ``by_round``): one fit per (group, fold, ``l2``) from the fold's
        k-means centres; ``path`` (and ``rounds`` without ``by_round``): one path per (group,
        fold), each fold continuing from the weakest ``l2`` fitted so far with ``warm``. These
        run ``n_jobs`` at once (:meth:`_run`); the scores are recorded in the order of the
        sequential loop.
        """
        units = []
        for group in groups:
            kind = self.fold_fits(group)
            if kind == "theta_paths":
                self.more(len(self.parts) * len(path))
                self._theta_steps(group, path)
                self.done(len(self.parts) * len(path))
                self._log(group, path)
            elif kind == "adam":
                self.more(len(self.parts) * len(path))
                self._together(group, path)
                self.done(len(self.parts) * len(path))
                self._log(group, path)
            elif kind == "rounds":  # every candidate starts afresh from the fold's centres
                units += [(group, f, (l2,)) for f in range(len(self.parts)) for l2 in path]
            else:
                units += [(group, f, tuple(path)) for f in range(len(self.parts))]
        if not units:
            return
        self.more(sum(len(p) for _, _, p in units))
        if self.by_round:  # k-means once per fold and K, before any fit runs
            for group, f, _ in units:
                self._centres(f, candidate(self.base, group))
        results = self._run(units, warm)
        by_key: dict = {}  # (group, l2) -> [fold results], in the sequential loop's order
        for (group, f, _), (est, fits) in zip(units, results, strict=True):
            if warm or (f, group) not in self.last:
                self.last[f, group] = est
            for l2, value, status, fit_s, score_s in fits:
                by_key.setdefault((group, l2), []).append((f, value))
                self._status(group, l2, f, status)
                self._time(group, l2, f, fit_s, score_s)
        for key, folds in by_key.items():
            if self.by_round:
                per_round = np.stack([v for _, v in sorted(folds, key=lambda fv: fv[0])])
                best = int(np.nanargmax(np.mean(per_round, axis=0)))  # all-NaN rounds skipped
                self.scores[key], self.rounds[key] = per_round[:, best], best
                self.per_round[key] = per_round
            else:
                scores = self.scores.setdefault(key, np.zeros(len(self.parts)))
                for f, value in folds:
                    scores[f] = value
        for group in dict.fromkeys(g for g, _, _ in units):
            self._log(group, path)

    def _run(self, units: list, warm: bool) -> list:
        """``[(estimator, [(l2, score, status, fit s, score s)])]`` of :meth:`_fit_unit` per unit.

        ``n_jobs`` at once in joblib threads; the first unit of each ``K`` runs alone first, so
        that its programs are compiled once before the threads share them.
        """
        jobs = 1 if self.n_jobs is None else self.n_jobs
        if jobs == 1 or len(units) < 2:
            return [self._fit_unit(*unit, warm) for unit in units]
        first: dict[int, int] = {}  # K -> its first unit
        for i, unit in enumerate(units):
            first.setdefault(unit[0].n_prototypes, i)
        results = {i: self._fit_unit(*units[i], warm) for i in first.values()}
        rest = [i for i in range(len(units)) if i not in results]
        caller = caller_location()  # a fit's FitWarning names the user's line, not joblib's

        def fit_unit(unit):
            with warnings_attributed_to(caller):
                return self._fit_unit(*unit, warm)

        done = Parallel(n_jobs=jobs, prefer="threads")(delayed(fit_unit)(units[i]) for i in rest)
        results.update(zip(rest, done, strict=True))
        return [results[i] for i in range(len(units))]

    def _fit_unit(self, group: Group, f: int, path: tuple, warm: bool):
        """One fold's fits of ``group`` along ``path``: ``(estimator, [(l2, value, ...)])``.

        Each fit gives ``(l2, value, status, fit seconds, score seconds)``; ``value`` is the
        validation score per round (``by_round``: computed within the fit, whose seconds hold
        it) or the fold's score.
        """
        part, held = self.parts[f]
        est = self.last.get((f, group)) if warm and not self.by_round else None
        if est is None:
            # each fold's path warm-starts (not the class prior's: it has no start)
            takes = "warm_start" in self.base.get_params()
            starts = {"warm_start": not self.by_round} if takes else {}
            est = candidate(self.base, group, **starts)
            if self.by_round:  # every candidate starts from the fold's k-means centres
                est.set_params(init=self._centres(f, est))
        fits = []
        for l2 in path:
            t0 = time.perf_counter()
            est.set_params(l2=float(l2 * self.shrink[f]))
            self.fit(est, part, held if self.by_round else None)
            t1 = time.perf_counter()
            if self.by_round:
                value = scores_by_round(est)
            else:
                value = weighted_score(
                    est.predict_log_proba(held), held.labels, held.weights, self.scoring
                )
            fits.append((l2, value, est.fit_report_.status, t1 - t0, time.perf_counter() - t1))
            self.done()
        return est, fits

    def fit(self, est, sets: RaggedSets, held: RaggedSets | None = None) -> None:
        """Fits ``est`` on ``sets`` as the search fits every candidate, member and refit.

        A coordinate-ascent fit (``fold_fits`` ``rounds``) gets the search's padded layout and
        pooling-as-data (:attr:`fit_params`: shapes only, the same fit) and, with ``held``, its
        early stopping's ``validation_sets``; another kind (an embedded candidate is trained by
        Adam epochs) takes neither. The fit issues no :class:`~dpp.errors.FitWarning`: its
        status is recorded by the search (a row of ``cv_results_``) and said for the chosen
        candidate (:func:`dpp.errors.statuses_recorded`).
        """
        with statuses_recorded():
            if est.fold_fits == "rounds":  # DPPClassifier.fit_fold: the search's shapes
                est.fit_fold(sets, held, **self.fit_params)
            elif held is None:
                est.fit(sets)
            else:
                raise ValueError(f"{type(est).__name__} fits take no validation_sets")

    def more(self, fits: int) -> None:
        """Adds ``fits`` to the progress bar's total (a verbose fit's) past what was planned.

        The fits of the first grid and the refits are in the bar's total from the start
        (:attr:`planned`); only what lies past them (the values added past an edge) grows it.
        """
        covered = min(self.planned, fits)
        self.planned -= covered
        if fits > covered and self.bar is not None and not self.bar.disable:
            self.bar.total += fits - covered
            self.bar.refresh()

    def done(self, fits: int = 1) -> None:
        """Advances the progress bar by ``fits``."""
        if self.bar is not None:
            self.bar.update(fits)

    def beside(self, groups: dict[Group, float]) -> None:
        """Starts the Adam-trained groups' fold fits and refits in a thread beside the rest.

        ``groups``: each group scored at its own ``l2`` (:meth:`cross_validate` with a path of
        one). A group whose ``fold_fits`` is ``adam`` (DPP on an embedding) shares no program
        with the coordinate-ascent candidates, so its fold fits, then its refit on every
        training set, compile and train on a second core while those run.
        :meth:`cross_validate` and :func:`refit` wait for them and record them in their own
        order, so ``cv_results_``, every score and the refit are those of the fits run in turn
        (the same programs, the same bits); a refit of a member that forward selection drops
        is not used. Not with ``n_jobs=1`` (one fit at a time) or on one core.
        """
        if self.n_jobs == 1 or cores() < 2:
            return
        caller = caller_location()
        for group, l2 in groups.items():
            if self.fold_fits(group) == "adam":
                key = (group, float(l2))
                calls = [(self._train_together, group, [key[1]]), (self._refit_apart, key)]
                self.pending[key] = Beside(calls, caller=caller)

    def _refit_apart(self, key: tuple):
        est = refit_estimator(self.base, key, None)
        self.fit(est, self.sets)
        return est

    def _together(self, group: Group, path: list[float]) -> None:
        """Scores ``(group, l2)`` for every ``l2`` of ``path``: DPP on an embedding.

        Every fold x ``l2`` fit starts from k-means of its embedded part (no warm start),
        stops early on its own held-out share of the fold and is trained by Adam epochs, so
        all of them run batched (:func:`~dpp.estimators.adam.fit_together`, fixed-step
        epochs): each ends as its fit alone would. Fits started by
        :meth:`beside` are waited for.
        """
        pending = self.pending.get((group, float(path[0]))) if len(path) == 1 else None
        fits = pending.result(0) if pending is not None else self._train_together(group, path)
        for (f, l2), status, log_proba, fit_s, score_s in fits:
            held = self.parts[f][1]
            self._status(group, l2, f, status)
            self.held_log_probas[group, l2, f] = log_proba  # the member's refit on the fold
            score = weighted_score(log_proba, held.labels, held.weights, self.scoring)
            self.scores.setdefault((group, l2), np.zeros(len(self.parts)))[f] = score
            self._time(group, l2, f, fit_s, score_s)

    def _train_together(self, group: Group, path: list[float]) -> list[tuple]:
        """:meth:`_together`'s fits, recording nothing (what :meth:`beside` runs in a thread).

        Returns:
            ``[((fold, l2), status, held-out log-probabilities, fit s, score s)]``.
        """
        t0 = time.perf_counter()
        keys, estimators, training = [], [], []
        for f, (part, _) in enumerate(self.parts):
            for l2 in path:
                est = candidate(
                    self.base,
                    group,
                    l2=float(l2 * self.shrink[f]),
                    validation_fraction=DEFAULT_VALIDATION_FRACTION,
                )  # early stopping within the fold's fit
                keys.append((f, l2))
                estimators.append(est)
                training.append(part)
        with statuses_recorded():  # each status a row of cv_results_, as every fold fit's
            fit_together(estimators, training)
        elapsed = (time.perf_counter() - t0) / len(estimators)  # an equal share of the batch
        fits = []
        for (f, l2), est in zip(keys, estimators, strict=True):
            t1 = time.perf_counter()
            log_proba = est.predict_log_proba(self.parts[f][1])
            status = est.fit_report_.status
            fits.append(((f, l2), status, log_proba, elapsed, time.perf_counter() - t1))
        return fits

    def _centres(self, fold: int, est: PrototypeClassifier):
        """The fold's k-means centres for ``est``'s ``K``, computed once per fold and ``K``.

        What ``est.fit(part)`` would compute itself (the same preprocessing of the fold's part,
        the same seed): every candidate of a fold (pooling, ``l2``) starts from them, so
        k-means runs once per fold and ``K`` rather than once per candidate, and each fit is
        the one it would be alone. ``est.init`` when the user gave centres.
        """
        if not (isinstance(est.init, str) and est.init == "k-means"):
            return est.init
        key = (fold, int(est.n_prototypes))
        if key not in self.centres:
            probe = clone(est)
            sets, seed = probe.prepare_sets(self.parts[fold][0], None, None)
            self.centres[key] = probe.initial_centres(sets, seed)
        return self.centres[key]

    def _status(self, k: int, l2: float, fold: int, status) -> None:
        self.statuses.setdefault((k, l2), [None] * len(self.parts))[fold] = status

    def ensemble_score(self, chosen: list[tuple]) -> float:
        """The mean validation score of the ensemble of ``chosen`` over the folds.

        Each member ``(key, rounds)`` is refitted on each fold's part as the ensemble's member
        is on every training set (:meth:`member_log_probas`); their held-out
        log-probabilities are combined
        (:func:`~dpp.estimators.ensemble.combined_log_proba`, equal weights) and scored: the
        score of what ``best_estimator_`` is, not of its members.
        """
        return self.combined_score(self.member_log_probas(chosen))

    def member_log_probas(self, chosen: list[tuple]) -> list[list[np.ndarray]]:
        """``[folds][members]`` held-out ``[N_f, C]`` log-probabilities of members refitted.

        Each member ``(key, rounds)`` refitted on each fold's part as the ensemble's member is
        on every training set (:func:`refit_estimator`, from the fold's k-means centres, ``l2``
        times the part's weight share as every candidate's fold fit). A member whose fold fit
        already was that refit (:attr:`held_log_probas`: DPP on an embedding) is not fitted
        again: the fit would be the same to the bit.
        """
        self.more(len(chosen) * len(self.parts))
        out = []
        for f, (part, held) in enumerate(self.parts):
            logs = []
            for key, rounds in chosen:
                if (*key, f) in self.held_log_probas:
                    logs.append(self.held_log_probas[(*key, f)])
                    self.done()
                    continue
                est = refit_estimator(self.base, key, rounds)
                est.set_params(l2=float(key[1] * self.shrink[f]))  # as the candidates' folds
                if "init" in est.get_params(deep=False):
                    est.set_params(init=self._centres(f, est))
                self.fit(est, part)  # the members' own folds' statuses are in cv_results_
                logs.append(est.predict_log_proba(held))
                self.done()
            out.append(logs)
        return out

    def combined_score(self, logs: list[list[np.ndarray]]) -> float:
        """The mean over folds of the score of members' held-out ``logs`` combined.

        Args:
            logs: ``[folds][members]`` log-probabilities (:meth:`member_log_probas`).
        """
        scores = []
        for members, (_, held) in zip(logs, self.parts, strict=True):
            weights = np.full(len(members), 1 / len(members))
            log_p = combined_log_proba(members, weights)
            scores.append(weighted_score(log_p, held.labels, held.weights, self.scoring))
        return float(np.mean(scores))

    def _time(self, k: Group, l2: float, fold: int, fit_s: float, score_s: float) -> None:
        for table, seconds in ((self.fit_times, fit_s), (self.score_times, score_s)):
            table.setdefault((k, l2), np.zeros(len(self.parts)))[fold] = seconds

    def times(self, keys: list) -> dict:
        """scikit-learn's timing columns of ``cv_results_`` for ``keys``.

        ``mean_fit_time``, ``std_fit_time``, ``mean_score_time``, ``std_score_time``: the mean
        and s.d. over the folds of each fit's and each scoring's seconds.

        A fit batched with others (the Theta-step paths, DPP on an embedding) is given an
        equal share of the batch's seconds; a score computed within the fit (the validation
        log-likelihood per round of ``select_rounds``) costs its reading only.
        """
        out = {}
        for name, table in (("fit", self.fit_times), ("score", self.score_times)):
            seconds = np.stack([table[k] for k in keys])
            out[f"mean_{name}_time"] = seconds.mean(axis=1)
            out[f"std_{name}_time"] = seconds.std(axis=1)
        return out

    def _theta_steps(self, k: int, path: list[float]) -> None:
        """Scores ``(k, l2)`` for every ``l2`` of ``path``: the folds' Theta-steps as one program.

        Each fold's codes of every set are computed once per ``K`` (``fold_codes``), and
        :func:`~dpp.solvers.coordinate_ascent.fit_classifier_paths` fits every fold along the
        path, the held-out sets weighted 0 and ``l2`` times the fold's weight share, each fit
        starting from the nearest ``l2`` already fitted: the maximiser ``base.fit(part)``
        finds at that ``l2`` (a convex problem), within the solver's tolerance.

        Raises:
            NonFiniteResultError: a fit's ``Theta`` is not finite (naming fold and ``l2``).
        """
        t0 = time.perf_counter()
        if k not in self.codes:
            est = candidate(self.base, k)
            self.codes[k] = np.stack([est.fold_codes(part, self.sets) for part, _ in self.parts])
        codes, fitted = self.codes[k], self.thetas.setdefault(k, {})
        weights = np.asarray(self.sets.weights, np.float64)
        masks = np.zeros((len(self.folds), weights.size))
        for f, (fit_idx, _) in enumerate(self.folds):
            masks[f, fit_idx] = weights[fit_idx]  # the fold's fit: held-out sets weigh 0
        solver = solver_options.theta_solver(self.base.optimizer, self.base.optimizer_options)
        nearest = min(
            fitted, key=lambda v: abs(np.log((v + 1e-30) / (path[0] + 1e-30))), default=None
        )
        thetas, iterations = fit_classifier_paths(
            codes,
            np.asarray(self.sets.labels),
            masks,
            np.outer(self.shrink, path),
            None if nearest is None else fitted[nearest],
            solver,
        )
        for f, j in np.argwhere(iterations >= solver.max_iter):  # scored, but not silently
            logger.warning(
                "K=%d l2=%.3g, CV fold %d: the Theta-step stopped at max_iter=%d before its "
                "gradient tolerance",
                k.n_prototypes,
                path[j],
                f,
                solver.max_iter,
            )
        elapsed = (time.perf_counter() - t0) / (len(self.folds) * len(path))
        for j, value in enumerate(path):
            fitted[value] = thetas[:, j]
            scores = np.zeros(len(self.folds))
            for f, (_, val_idx) in enumerate(self.folds):
                t1 = time.perf_counter()
                capped = iterations[f, j] >= solver.max_iter
                self._status(k, value, f, "max_rounds" if capped else "converged")
                if not np.all(np.isfinite(thetas[f, j])):
                    raise NonFiniteResultError(
                        f"{type(self.base).__name__} fit of CV fold {f} at l2={value:.3g} "
                        "produced non-finite theta"
                    )
                held = self.parts[f][1]
                rows = np.sort(val_idx)  # the order of held
                log_p = log_softmax(codes[f, rows].astype(np.float64) @ thetas[f, j], axis=1)
                scores[f] = weighted_score(log_p, held.labels, held.weights, self.scoring)
                self._time(k, value, f, elapsed, time.perf_counter() - t1)
            self.scores[k, value] = scores

    def _log(self, k: Group, path: list[float]) -> None:
        """One DEBUG line per candidate (a run's INFO log keeps one line per fold and method)."""
        for l2 in path:
            logger.debug(
                "%s l2=%.3g: validation %s %s%s",
                k.params(),
                l2,
                self.scoring,
                np.round(self.scores[k, l2], 4).tolist(),
                f" at round {self.rounds[k, l2]}" if (k, l2) in self.rounds else "",
            )


def results_table(search: CandidateSearch, best: tuple, num_folds: int) -> tuple[dict, int]:
    """``(cv_results_, best_index_)`` of a :class:`~dpp.DPPClassifierCV` from its search.

    scikit-learn's layout (``params``, ``param_<name>``, ``mean_test_score``,
    ``std_test_score``, ``split<i>_test_score``, ``rank_test_score``, the times of
    :meth:`CandidateSearch.times`), ``rounds`` with ``by_round``, each fold fit's status
    (``split<i>_fit_status``) and a candidate's distinct ones (``fit_status``); one row per
    ``(Group, l2)`` scored, in the order scored.

    Args:
        search: the finished search.
        best: the ``(Group, l2)`` of the rule's choice (for the ensemble, the best single one).
        num_folds: the folds.
    """
    candidates = list(search.scores)
    scores = np.stack([search.scores[c] for c in candidates])
    mean = scores.mean(axis=1)
    order = np.argsort(-mean, kind="stable")
    rank = np.empty(len(candidates), dtype=np.int64)
    rank[order] = np.arange(1, len(candidates) + 1)
    table = {
        "params": [{**g.params(), "l2": l2} for g, l2 in candidates],
        "param_n_prototypes": np.array([g.n_prototypes for g, _ in candidates]),
        "param_pooling": np.array([g.pooling for g, _ in candidates], dtype=object),
        "param_embedding": np.array([g.embedding for g, _ in candidates], dtype=object),
        "param_l2": np.array([l2 for _, l2 in candidates]),
        # the seeds of an embedded member over several (DPPClassifierCV's embedding_seeds)
        **(
            {"param_random_state": np.array([g.random_state for g, _ in candidates], object)}
            if any(g.random_state is not None for g, _ in candidates)
            else {}
        ),
        # the prior on mu of each raw-vector candidate (DPPClassifierCV's mu_prior_scales)
        **(
            {
                "param_mu_prior_scale": np.array(
                    [dict(g.settings).get("mu_prior_scale") for g, _ in candidates], object
                )
            }
            if any("mu_prior_scale" in dict(g.settings) for g, _ in candidates)
            else {}
        ),
        "mean_test_score": mean,
        "std_test_score": scores.std(axis=1),
        **{f"split{f}_test_score": scores[:, f] for f in range(num_folds)},
        "rank_test_score": rank,
        **search.times(candidates),
        **(
            {"rounds": np.array([search.rounds.get(c) for c in candidates], dtype=object)}
            if search.by_round
            else {}
        ),
        **{
            f"split{f}_fit_status": np.array(
                [search.statuses[c][f] for c in candidates], dtype=object
            )
            for f in range(num_folds)
        },
        "fit_status": np.array(
            ["/".join(sorted({str(s) for s in search.statuses[c]})) for c in candidates],
            dtype=object,
        ),
    }
    return table, candidates.index(best)


def scores_by_round(estimator: DPPClassifier) -> np.ndarray:
    """``[max_rounds + 1]`` validation log-likelihood per set after each round.

    Of a fit with ``validation_sets`` (:func:`dpp.model.fit.round_scores`): known up to its
    last round, carried on to ``max_rounds`` when it stopped by ``tol`` (a fit capped later
    stops there too), NaN after a stop by ``patience``.
    """
    early = estimator.fit_report_.early_stopping
    return round_scores(early, estimator.max_rounds, estimator.patience)


def prior_score(part: RaggedSets, held: RaggedSets, scoring: str) -> float:
    """The validation score on ``held`` of :class:`ClassPriorClassifier` fitted on ``part``."""
    prior = ClassPriorClassifier().fit(part)
    return weighted_score(prior.predict_log_proba(held), held.labels, held.weights, scoring)


def refit(base, key: tuple, rounds, sets, search: CandidateSearch, classes):
    """Candidate ``key`` (``(Group, l2)``) fitted on every training set, as it was scored.

    From k-means, with :func:`refit_params`.
    """
    search.more(1)
    pending = search.pending.get(key) if rounds is None and sets is search.sets else None
    if pending is not None:  # fitted beside the other candidates (CandidateSearch.beside)
        est = pending.result(1)
    else:
        est = refit_estimator(base, key, rounds)
        search.fit(est, sets)  # its status said by the search, naming it (warn_unclean_choice)
    search.done()
    est.classes_ = classes
    return est
