"""Model selection of ``l2`` (``K``, DPP's rounds) by cross-validation of the estimator itself."""

from __future__ import annotations

import logging
import re
from collections import Counter
from pathlib import Path
from types import MappingProxyType
from typing import ClassVar

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, TransformerMixin, clone
from sklearn.utils.validation import check_is_fitted

from dpp import params as check
from dpp.errors import warn_caller
from dpp.estimators.base import (
    SCORINGS,
    PrototypeClassifier,
    SetClassifierMixin,
    missing_attribute,
    resolve_seed,
)
from dpp.estimators.dpp import DPPClassifier
from dpp.estimators.ensemble import SetEnsembleClassifier
from dpp.estimators.inputs import labelled_sets
from dpp.estimators.search import (
    NOT_TUNED,
    RULES,
    CandidateSearch,
    Group,
    MemberChoice,
    candidate_groups,
    check_grids,
    choose,
    member_name,
    member_scores,
    monitored_embeddings,
    prior_score,
    refit,
    refit_estimator,
    refit_params,
    results_table,
    seeded_embeddings,
    stopped,
    warn_unclean_choice,
)
from dpp.model.report import CLEAN_STATUSES
from dpp.pooling import POOLINGS
from dpp.selection import (
    EDGES,
    choose_on_path,
    cv_splits,
    edge_message,
    position_among,
)
from dpp.solvers.progress import bar, say

logger = logging.getLogger(__name__)

#: The paper's model alone, on the raw vectors: every pooling's winner combined, no member on
#: a learned embedding; about half the default's time (docs/defaults.md).
RAW_VECTORS = MappingProxyType({"embedding": (None,), "rule": "ensemble"})


class DPPClassifierCV(SetClassifierMixin, ClassifierMixin, TransformerMixin, BaseEstimator):
    """DPP with ``l2`` (and ``n_prototypes``) chosen by cross-validation of DPP itself.

    In the spirit of scikit-learn's ``LogisticRegressionCV``: every candidate is scored by
    stratified K-fold cross-validation on the training sets (each fold fits its own
    preprocessing, k-means and DPP; with ``select_rounds``, k-means once per fold and ``K``,
    where every candidate of the fold starts), the ``l2`` path of each fold and ``K`` is fitted
    from the strongest ``l2`` down with warm starts, and the best candidate is refitted on all
    training sets (from k-means). ``l2`` is a strength on the summed log-likelihood, so a fold's
    fit, on a fraction ``r`` of the sets' total weight (``(folds - 1) / folds`` for equal
    folds), uses ``l2 * r``: a value of the grid means the same strength on every fit. An
    estimator whose codes do not depend on ``l2`` (the standard prototype) is encoded once per
    fold and ``K``, every fold's ``l2`` path one program (``fit_classifier_paths``).

    Args:
        estimator: the estimator to tune (default ``DPPClassifier()``; the prototype baselines,
            ``StandardPrototypeClassifier``, ``InfoLossClassifier`` and
            ``ClassPriorClassifier``, work too, which gives every prototype method the same
            selection). Other set classifiers are refused at ``fit``, naming what tunes them.
        l2s: candidate ``l2`` values (>= 0).
        n_prototypes: candidate ``K`` values, or ``None`` for the estimator's own.
        pooling: candidate poolings of a :class:`DPPClassifier` (:mod:`dpp.pooling`: ``mean``,
            the paper's; ``max``; ``gem``), chosen by the same folds as ``l2`` and the rounds;
            ``None``: the estimator's own (what the baselines, which have no pooling, get).
            All three by default: the task says which tells its class (decided on the broad
            benchmark, docs/defaults.md).
        embedding: candidate embeddings: ``None`` for the paper's model, widths such as
            ``(256, 128, 64)`` for an :class:`~dpp.EmbeddedDPPClassifier` with the estimator's
            shared parameters (:meth:`~dpp.EmbeddedDPPClassifier.like`; it stops early on its
            own 20 % of each fold). ``"auto"`` (the default): over a :class:`DPPClassifier`,
            ``(None, (256, 128, 64))``, four members, one per pooling and one on the embedding
            (left out under 20 training sets:
            :func:`~dpp.estimators.search.monitored_embeddings`); over an
            ``EmbeddedDPPClassifier``, its own widths (as ``None`` alone); others have none.
            An embedding added to a ``DPPClassifier`` is one candidate with the embedded
            estimator's own ``K``, pooling and ``l2`` (``EmbeddedDPPClassifier()``'s), one fit
            per fold, what it fits alone; a tuned ``EmbeddedDPPClassifier`` is crossed with the
            grid's ``K`` values, poolings and ``l2`` path, as the paper's model is
            (:func:`~dpp.estimators.search.resolved_embeddings`).
        embedding_seeds: each ``own`` member on an embedding over this many seeds, each a
            member (:func:`~dpp.estimators.search.seeded_embeddings`); 1: its own alone.
            3 by default: seeds of one network disagree, and their average is the steadier
            member (decided on the broad benchmark, docs/defaults.md).
        embedding_options: other :class:`~dpp.EmbeddedDPPClassifier` parameters of the members
            on an embedding over a ``DPPClassifier`` (e.g. ``{"weight_average": 0.5}``; ``None``:
            its defaults; :func:`~dpp.estimators.search.embedded_settings`).
        cv: as in scikit-learn's ``GridSearchCV``: a number of folds (stratified on the most
            probable class when every class has that many sets), a scikit-learn splitter
            (``split`` gets the most probable class as ``y``, and ``groups``), or an iterable of
            ``(train, validation)`` index arrays (:func:`dpp.selection.cv_splits`).
        scoring: ``log_likelihood`` (mean validation log-likelihood per set, nats; works with
            soft labels) or ``accuracy``.
        max_extensions: while the best ``l2`` is the largest (smallest) of its grid, one more
            value a grid step beyond it is cross-validated, up to this many on each side (0:
            the grid as given).
        select_rounds: for a :class:`DPPClassifier`, also choose the number of
            coordinate-ascent rounds (0, the k-means start with its Theta-step, up to
            ``max_rounds``) by the validation log-likelihood: every fold fits each candidate
            from k-means with its held-out fold as early stopping's ``validation_sets``, a
            candidate scores its best round (the fewest rounds on ties), and the refit stops
            after the chosen round (``round_cap``; status ``early_stopped`` when ``L`` was
            still rising), in place of the estimator's own ``validation_fraction`` (rounds
            overfit where codes saturate: docs/defaults.md). Needs
            ``scoring="log_likelihood"``; ignored for the other estimators.
        rule: what the candidates' scores give: ``ensemble`` (the default: each member's
            best candidate, a member being a pooling (and an embedding, and a seed of it) with
            its ``K``, ``l2`` and rounds chosen among its own candidates; every member is
            refitted and their log-probabilities averaged,
            :class:`~dpp.estimators.ensemble.SetEnsembleClassifier`; with one member it is
            ``best``) or ``best`` (the highest mean validation score, one refit: a single
            model, whose prototypes and ``beta`` are one estimator's; :func:`dpp.selection.choose`).
            Why ``ensemble`` is the default: docs/defaults.md.
        n_jobs: fits run at once, as in scikit-learn: 1 one at a time, ``-1`` every core;
            ``None``: one at a time, but an embedded member's fits beside the rest (a second
            thread, where the process has two cores or more). The (candidate, fold) fits
            run in joblib threads (the programs release the GIL), each fit, and so the
            selection, bit for bit the same with any ``n_jobs``.
        verbose: ``"auto"`` (the default): a progress bar over the fits (candidates x folds,
            the grid's extensions and the refits; ``tqdm``, on stderr, its ETA leaving out
            compilation) where stderr is a terminal, nothing in a pipe or a log; ``True``:
            the bar always, and a closing line with the choice, its validation score, the
            class prior's and how many candidates' fold fits did not end clean; ``False``:
            silent. The fits' own ``verbose`` is the estimator's.
        mu_prior_scales: for a :class:`DPPClassifier`, candidate ``mu_prior_scale`` values
            (``None`` in the list: the paper's model, no prior on ``mu``) of its members on the
            raw vectors, each member's chosen among its candidates as its ``l2`` and rounds
            are (``best_params_["mu_prior_scale"]``); ``None`` (the default): the estimator's
            own. Every value multiplies the raw members' fits.

    Warnings: a candidate's fold fit that does not end clean is a row of ``cv_results_``, not
    a warning (the search chose around it); the chosen candidates' are
    :class:`~dpp.errors.FitWarning` s, once per status, naming the candidate by its grid values
    (:func:`warn_unclean_choice`), as is a refit that does not end clean.

    Fitted attributes, as scikit-learn's searches: ``clone(estimator).set_params(**best_params_)``
    fitted on the same sets predicts what ``best_estimator_`` predicts (to float rounding), and
    ``best_score_`` is the validation score of what ``best_estimator_`` is.

    * ``best_params_``: the chosen candidate's grid values and how its refit stops
      (:func:`refit_params`: with ``select_rounds``, ``round_cap`` = the chosen rounds and
      ``validation_fraction=0``). With ``rule="ensemble"`` and several members, the
      ensemble's own parameters, ``{"estimators": [(name, estimator with its choice)]}``:
      ``SetEnsembleClassifier(**best_params_)`` is the refit. (A candidate
      on an embedding over a ``DPPClassifier`` is an ``EmbeddedDPPClassifier``: its
      parameters are that estimator's, and ``EmbeddedDPPClassifier.like(estimator,
      **best_params_)`` is its refit.)
    * ``best_score_``: the chosen candidate's mean validation score; for the ensemble, the
      ensemble's own, its members refitted on each fold and combined
      (:meth:`~dpp.estimators.search.CandidateSearch.ensemble_score`).
    * ``cv_results_``: scikit-learn's layout (``params``, ``param_<name>``,
      ``mean_test_score``, ``std_test_score``, ``split<i>_test_score``, ``rank_test_score``,
      ``mean_fit_time``, ``std_fit_time``, ``mean_score_time``, ``std_score_time``); values
      added beyond the grid are candidates too; ``rounds`` (each candidate's best round, with
      ``select_rounds``), ``split<i>_fit_status``, the status of each fold's fit, and
      ``fit_status``, the distinct statuses of a candidate's fold fits joined by ``/``: which
      candidate each status came from.
    * ``best_rounds_`` (the chosen number of rounds, ``None`` without ``select_rounds``),
      ``best_index_`` (the best candidate's row of ``cv_results_``; for the ensemble, the best
      single candidate's).
    * ``best_position_`` (``interior``, ``strongest edge``, ``weakest edge`` or ``only
      value``: where the chosen ``l2`` lies among those scored for its ``K``, pooling and
      embedding; for the ensemble the first member's position at an edge, else ``interior``; a
      choice at an edge after the last extension is also a :class:`~dpp.errors.FitWarning`
      naming the edge and the values), ``l2s_added_``.
    * ``prior_score_`` (the class prior's mean validation score: each fold's weighted mean
      training label) and ``beats_prior_`` (``best_score_ > prior_score_``).
    * ``best_estimator_`` (refitted; with ``rule="ensemble"`` and several members a
      :class:`~dpp.estimators.ensemble.SetEnsembleClassifier`), ``members_`` (the ensemble
      rules with several members only: each member's ``name``, ``params`` (as
      ``best_params_`` of one), ``rounds``, its own mean validation ``score``, ``position``
      and ``kept``, always true), and the fitted
      attributes of ``best_estimator_`` (``classes_``, ``prototypes_``, ``beta_``, ``theta_``,
      ``n_features_in_``, ...; an ensemble has its members'), which ``save`` writes.
    """

    PARAMETER_RULES: ClassVar[dict[str, check.Rule]] = {
        "scoring": check.Choice(SCORINGS),
        "max_extensions": check.Int(0),
        "select_rounds": check.Bool(),
        "rule": check.Choice(RULES),
        "embedding_seeds": check.Int(1),
        "verbose": check.Literal("auto", check.Bool()),
    }  # fmt: skip

    def __init__(
        self,
        estimator=None,
        l2s=(1e-3, 1e-2, 1e-1, 1.0),
        n_prototypes=None,
        pooling=POOLINGS,
        embedding="auto",
        embedding_seeds: int = 3,
        embedding_options: dict | None = None,
        cv=5,
        scoring: str = "log_likelihood",
        max_extensions: int = 3,
        select_rounds: bool = True,
        rule: str = "ensemble",
        n_jobs: int | None = None,
        verbose: bool | str = "auto",
        mu_prior_scales=None,
    ):
        self.estimator = estimator
        self.l2s = l2s
        self.n_prototypes = n_prototypes
        self.pooling = pooling
        self.embedding = embedding
        self.embedding_seeds = embedding_seeds
        self.embedding_options = embedding_options
        self.cv = cv
        self.scoring = scoring
        self.max_extensions = max_extensions
        self.select_rounds = select_rounds
        self.rule = rule
        self.n_jobs = n_jobs
        self.verbose = verbose
        self.mu_prior_scales = mu_prior_scales

    def fit(self, X, y=None, sample_weight=None, groups=None):
        """Cross-validates every (``n_prototypes``, ``l2``) candidate, then refits the best.

        When the best ``l2`` is the largest or smallest of its ``K``'s grid, one more value a
        grid step beyond it is cross-validated, up to ``max_extensions`` on each side
        (:func:`dpp.selection.choose_on_path`): the choice ends inside the grid, or its
        position says it did not.

        Args:
            X: training sets (see the module docstring).
            y: ``[N]`` class labels or ``[N, C]`` soft labels (``None`` for labelled
                ``RaggedSets``).
            sample_weight: optional ``[N]`` per-set weights.
            groups: optional ``[N]`` group of each set; folds then keep groups whole (e.g. the
                spatial blocks of an image, :func:`dpp.selection.cv_folds`).

        Returns:
            ``self``.

        Raises:
            ValueError: an empty or negative grid, a ``cv`` of fewer than 2 or more folds than
                sets or with bad index arrays, an unknown ``scoring``, and the errors of the
                estimator's ``fit``.
        """
        base, candidates, by_round, own = self._checked()
        self.__dict__.pop("members_", None)  # an earlier fit's ensemble
        sets, classes = labelled_sets(X, y, sample_weight)
        # the folds' seed: the estimator's (None: fresh, as its fits'; the class prior has none)
        seed = resolve_seed(base.get_params(deep=False).get("random_state", 0))
        folds = cv_splits(self.cv, np.asarray(sets.labels), seed, groups)
        candidates, own = monitored_embeddings(base, self.embedding, candidates, own, sets.num_sets)
        candidates, own = seeded_embeddings(candidates, own, self.embedding_seeds, seed)
        search = CandidateSearch(base, sets, folds, self.scoring, by_round, self.n_jobs, candidates)
        # the grid's fits and the refits are known now: the bar's total grows only by the
        # values added past an edge
        members = len({g.member() for g in candidates})
        refits = members if self.rule == "ensemble" and members > 1 else 1
        per_fold = sum(1 if g in own else len(set(self.l2s)) for g in candidates)
        search.planned = per_fold * len(folds) + refits
        progress = bar(search.planned, type(self).__name__, self.verbose)
        with progress as search.bar, stopped(search.pending):  # no thread outlives the fit
            self._search(search, base, candidates, by_round, sets, classes, own)
        if self.verbose is True:
            say(logger, "%s: %s", type(self).__name__, self._summary())
        return self

    def _summary(self) -> str:
        """The verbose fit's closing line: the choice, its score, the prior's."""
        members = getattr(self, "members_", None)
        chosen = (
            "; ".join(f"{m['name']}: {m['params']}" for m in members if m["kept"])
            if members else f"{self.best_params_}"
        )  # fmt: skip
        statuses = [
            v for k, v in self.cv_results_.items() if re.fullmatch(r"split\d+_fit_status", k)
        ]
        unclean = Counter(str(s) for fold in statuses for s in fold if s not in CLEAN_STATUSES)
        line = (
            f"chose {chosen} ({self.best_position_}); validation {self.scoring} "
            f"{self.best_score_:.4f} against the class prior's {self.prior_score_:.4f}"
        )
        if unclean:
            counts = ", ".join(f"{status} {n}" for status, n in sorted(unclean.items()))
            line += f"; candidates' fold fits not clean: {counts} (cv_results_['fit_status'])"
        return line

    def _search(self, search, base, candidates, by_round, sets, classes, own) -> None:
        """:meth:`fit` once the folds are drawn: scores, grows, chooses, refits, then writes.

        One path for every rule. The candidates fall into members: under ``rule="ensemble"``
        with several poolings (or embeddings), one member each; otherwise one member, every
        candidate. Each member grows its best group's path and chooses by the rule
        (:meth:`_member`); each is refitted
        (:meth:`_refitted`, which says their warnings); one member is the model, several are
        combined, the result written in one place (:meth:`_write_choice`). ``own``: the groups
        scored at their own ``l2`` alone (no path, no extension).
        """
        l2s = sorted({float(v) for v in self.l2s}, reverse=True)
        search.beside(own)  # an embedded member trains on a second core meanwhile
        search.cross_validate([g for g in candidates if g not in own], l2s, warm=True)
        for group, l2 in own.items():
            search.cross_validate([group], [l2], warm=False)
        members = list(dict.fromkeys(g.member() for g in candidates))
        if not (self.rule == "ensemble" and len(members) > 1):
            members = [None]  # one member: every candidate
        # each member's best group (ties: the stronger l2, then the simpler model) grows its path
        best = {m: choose(member_scores(search.scores, m))[0] for m in members}
        grown = {m: self._grow(search, g, 0 if g in own else None) for m, g in best.items()}
        best_key = self._results_table(search, len(search.folds))
        self.prior_score_ = float(
            np.mean([prior_score(part, held, self.scoring) for part, held in search.parts])
        )
        chosen = [self._member(search, m, *grown[m]) for m in members]
        chosen = [self._refitted(search, base, sets, classes, c) for c in chosen]
        self._write_choice(base, search, chosen, best_key, classes)

    def _grow(self, search: CandidateSearch, group: Group, extensions: int | None = None):
        """``(group, choice)``: ``group``'s ``l2`` path grown past an edge of its best score.

        :func:`dpp.selection.choose_on_path`, up to ``extensions`` values on each side
        (``None``: ``max_extensions``).
        """
        if extensions is None:
            extensions = int(self.max_extensions)

        def score_new(l2: float) -> float:
            # weaker than the path: continue each fold's path; stronger: a fresh fit
            weakest = min(v for g, v in search.scores if g == group)
            search.cross_validate([group], [l2], warm=l2 < weakest)
            return float(search.scores[group, l2].mean())

        path = [v for g, v in search.scores if g == group]
        means = [float(search.scores[group, v].mean()) for v in path]
        return group, choose_on_path(path, means, score_new, extensions)

    def _member(self, search, member, group, choice) -> MemberChoice:
        """One member's choice and its position (with its edge warning), unfitted.

        The highest mean score, at its best round (:func:`dpp.selection.choose`). The position
        is that of the grown path where the choice is its best, else among the values its
        group scored.
        """
        key = choose(member_scores(search.scores, member))
        score = float(np.mean(search.scores[key]))
        rounds = search.rounds.get(key) if search.by_round else None
        name = "" if member is None else member_name(member)
        position, edge = choice.position, None
        if key[0] != group:  # off its path
            position = position_among([v for g, v in search.scores if g == key[0]], key[1])
        elif position in EDGES:  # said if the member is kept (:meth:`_refitted`)
            owner = f"{type(self).__name__}" + (f" (member {name})" if name else "")
            edge = edge_message(owner, "l2", choice, self.max_extensions)
        return MemberChoice(name, key, rounds, score, position, list(choice.added), None, edge)

    def _refitted(self, search, base, sets, classes, chosen: MemberChoice) -> MemberChoice:
        """``chosen`` refitted on every training set (its edge's and its refit's warnings)."""
        if chosen.edge:
            warn_caller(chosen.edge)
        fitted = refit(base, chosen.key, chosen.rounds, sets, search, classes)
        warn_unclean_choice(type(self).__name__, chosen.key, search.statuses[chosen.key], fitted)
        return chosen._replace(fitted=fitted)

    def _write_choice(self, base, search, chosen: list, best_key, classes) -> None:
        """Writes the chosen result: the one member's refit, or the ensemble of several.

        ``chosen``: the refitted :class:`MemberChoice` s, one per member.

        ``best_estimator_``, ``best_params_``, ``best_score_`` (what ``best_estimator_`` is
        scores: one member's own score; an ensemble's, its members refitted on each fold and
        combined, :meth:`~dpp.estimators.search.CandidateSearch.ensemble_score`),
        ``best_rounds_``, ``best_position_`` (the first member's at an edge, else the members'
        common one, else ``interior``), ``l2s_added_``, ``beats_prior_``, ``classes_``,
        ``n_features_in_``, and for an ensemble ``members_``.
        """
        added = []
        for c in chosen:
            added += [v for v in c.added if v not in added]
        positions = [c.position for c in chosen]
        edges = [p for p in positions if p in EDGES]
        self.best_position_ = edges[0] if edges else (
            positions[0] if len(set(positions)) == 1 else "interior"
        )  # fmt: skip
        self.l2s_added_ = added
        if len(chosen) == 1:
            (one,) = chosen
            self.best_rounds_ = one.rounds
            self.best_score_ = one.score
            self.best_params_ = refit_params(one.key, one.rounds)
            self.best_estimator_ = one.fitted
        else:  # the ensemble's own parameters: each member the tuned estimator with its choice
            self.best_rounds_ = search.rounds.get(best_key) if search.by_round else None
            fitted = [(c.name, c.fitted) for c in chosen]
            ensemble = SetEnsembleClassifier([(n, clone(e)) for n, e in fitted])
            ensemble.set_fitted(fitted, classes)
            self.best_estimator_ = ensemble
            self.best_params_ = {
                "estimators": [(c.name, refit_estimator(base, c.key, c.rounds)) for c in chosen],
            }
            self.best_score_ = search.ensemble_score([(c.key, c.rounds) for c in chosen])
        if len(chosen) > 1:
            self.members_ = [
                {"name": c.name, "params": refit_params(c.key, c.rounds), "rounds": c.rounds,
                 "score": c.score, "position": c.position,
                 "kept": True}
                for c in chosen
            ]  # fmt: skip
        self.beats_prior_ = bool(self.best_score_ > self.prior_score_)
        self.classes_ = classes
        self.n_features_in_ = self.best_estimator_.n_features_in_

    def check_params(self) -> None:
        """Checks every parameter: the grids, then the table (``fit`` calls it).

        Raises:
            ValueError: naming the parameter, the rule and the value.
        """
        check_grids(self.l2s, self.n_prototypes, self.pooling, self.embedding, self.mu_prior_scales)
        if self.n_jobs is not None and (
            isinstance(self.n_jobs, bool)
            or not isinstance(self.n_jobs, int | np.integer)
            or self.n_jobs == 0
        ):
            raise ValueError(
                f"n_jobs must be None or an int other than 0 (-1: every core), got {self.n_jobs!r}"
            )
        check.check_table(self, self.PARAMETER_RULES)

    def _checked(self) -> tuple[PrototypeClassifier, list[Group], bool, dict[Group, float]]:
        """``(estimator to tune, candidate groups, whether rounds are chosen, own)``, checked.

        The groups and ``own`` (those scored at one ``l2``) of :func:`candidate_groups`.

        Raises:
            ValueError: naming the setting (see :meth:`fit`).
        """
        self.check_params()
        base = DPPClassifier() if self.estimator is None else self.estimator
        if not isinstance(base, PrototypeClassifier):
            raise TypeError(NOT_TUNED.get(type(base).__name__, NOT_TUNED[None]).format(
                name=type(base).__name__
            ))  # fmt: skip
        grid = (self.n_prototypes, self.pooling, self.embedding, "auto")
        candidates, own = candidate_groups(
            base, *grid, self.embedding_options, mu_prior_scales=self.mu_prior_scales
        )
        by_round = self.select_rounds and base.fold_fits == "rounds"
        if by_round and self.scoring != "log_likelihood":
            raise ValueError(
                "select_rounds chooses the rounds by the validation log-likelihood: use "
                f"scoring='log_likelihood' or select_rounds=False (got scoring={self.scoring!r})"
            )
        if by_round:
            base = clone(base).set_params(validation_fraction=0.0)  # the folds hold out instead
        return base, candidates, by_round, own

    def _results_table(self, search: CandidateSearch, num_folds: int) -> tuple[Group, float]:
        """Sets ``cv_results_`` and ``best_index_`` (:func:`results_table`); returns that key."""
        best = choose(search.scores)
        self.cv_results_, self.best_index_ = results_table(search, best, num_folds)
        return best

    def __getattr__(self, name):
        # fitted attributes of the refitted estimator (prototypes_, beta_, theta_, model_, ...)
        best = self.__dict__.get("best_estimator_")
        if name.endswith("_") and not name.startswith("__") and best is not None:
            try:
                return getattr(best, name)
            except AttributeError:
                pass
            members = [m for m in self.__dict__.get("members_") or () if m["kept"]]
            if len(members) > 1:  # the default ensemble: the attribute is its members'
                names = ", ".join(m["name"] for m in members)
                raise AttributeError(
                    f"{type(self).__name__} (rule={self.rule!r}) refitted an ensemble of {names}, "
                    f"which has no single {name!r}: read it from a member, "
                    f"best_estimator_.named_estimators_[{members[0]['name']!r}].{name}, or "
                    f"select one model with rule='best'"
                ) from None
            raise AttributeError(
                f"{type(self).__name__}'s refitted {type(best).__name__} has no attribute {name!r}"
            ) from None
        if name.endswith("_") and best is None:
            raise AttributeError(
                f"{type(self).__name__!r} object has no attribute {name!r} (not fitted yet?)"
            )
        raise missing_attribute(self, name)

    def _best(self):
        check_is_fitted(self, "best_estimator_")
        return self.best_estimator_

    def predict_log_proba(self, X) -> np.ndarray:
        """``[N, C]`` log class probabilities of the refitted estimator."""
        return self._best().predict_log_proba(X)

    def transform(self, X) -> np.ndarray:
        """``[N, K]`` set representations ``z`` of the refitted estimator."""
        return self._best().transform(X)

    def instance_scores(self, X) -> list[np.ndarray]:
        """Each vector's ``[M_n, C]`` part of its set's class scores, by the refitted estimator.

        See :meth:`dpp.DPPClassifier.instance_scores`; ``intercept_`` is the refitted one's.
        An ensemble (``rule="ensemble"``) gives its members' weighted mean
        (:meth:`~dpp.estimators.ensemble.SetEnsembleClassifier.instance_scores`).
        """
        return self._best().instance_scores(X)

    def soft_assignments(self, X) -> list[np.ndarray]:
        """Every vector's ``[M_n, K]`` code (an ensemble's members' side by side)."""
        return self._best().soft_assignments(X)

    def save(self, path) -> Path:
        """Writes ``best_estimator_`` to a model file; :func:`dpp.load` reads it as that estimator.

        Returns:
            The path written (as :meth:`PrototypeClassifier.save`).

        Raises:
            sklearn.exceptions.NotFittedError: before ``fit``.
        """
        return self._best().save(path)


def pooling_members(random_state=0) -> list[tuple[str, DPPClassifierCV]]:
    """DPP's per-pooling selections, ``DPPClassifierCV(pooling=(p,))`` for mean, max and gem.

    The members of a :class:`~dpp.estimators.ensemble.SetEnsembleClassifier` that averages
    them: what ``DPPClassifierCV(**RAW_VECTORS)`` fits itself, as one search.
    """
    base = DPPClassifier(random_state=random_state)
    return [(p, DPPClassifierCV(base, pooling=(p,), **RAW_VECTORS)) for p in POOLINGS]
