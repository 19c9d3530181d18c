"""The candidates of :class:`~dpp.DPPClassifierCV`: their groups, estimators, refits and names."""

from __future__ import annotations

import logging
from collections import Counter
from typing import NamedTuple

from sklearn.base import clone

from dpp import params as check
from dpp.errors import warn_caller
from dpp.estimators.dpp import DPPClassifier
from dpp.estimators.embedded import WIDTHS, EmbeddedDPPClassifier
from dpp.model.report import CLEAN_STATUSES
from dpp.pooling import POOLINGS, simplicity
from dpp.selection import early_stopping_runs

logger = logging.getLogger(__name__)

#: The held-out share with which a candidate on an embedding stops early within a fold.
DEFAULT_VALIDATION_FRACTION = 0.2

#: What an embedding candidate of :class:`DPPClassifierCV` is crossed with: the grid's ``K``,
#: poolings and ``l2`` path, or one candidate with the embedded estimator's own settings;
#: ``auto`` (what the search uses): ``own`` for an embedding added to the paper's model,
#: ``grid`` where the tuned estimator is itself an :class:`~dpp.EmbeddedDPPClassifier`.
EMBEDDING_GRIDS = ("auto", "grid", "own")


def check_grids(l2s, n_prototypes, pooling, embedding) -> None:
    """Checks :class:`DPPClassifierCV`'s candidate values before any fit.

    Raises:
        ValueError: an empty or negative ``l2s``, a ``K`` below 1, an empty or string list of
            poolings or embeddings (but ``embedding="auto"``), an unknown pooling, bad widths.
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
    base, n_prototypes, pooling, embedding, embedding_grid: str = "grid", options=None
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

    Returns:
        ``(groups, own)``: the distinct groups in order, and ``own``: group -> its one ``l2``.

    Raises:
        ValueError: an unknown pooling, bad widths, bad ``options``.
    """
    options = embedded_settings(base, options)
    settings = tuple(
        sorted((k, v) for k, v in options.items() if k not in ("n_prototypes", "pooling", "l2"))
    )
    embedding, embedding_grid = resolved_embeddings(base, embedding, embedding_grid)
    ks = [base.n_prototypes] if n_prototypes is None else list(n_prototypes)
    params = base.get_params()
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
