"""Model selection of ``l2`` (``K``, DPP's rounds) by cross-validation of the estimator itself."""

from __future__ import annotations

import logging
import re
import time
from collections import Counter
from pathlib import Path
from typing import ClassVar, NamedTuple

import numpy as np
from joblib import Parallel, delayed
from scipy.special import log_softmax
from sklearn.base import BaseEstimator, ClassifierMixin, TransformerMixin, clone
from sklearn.utils.validation import check_is_fitted

from dpp import params as check
from dpp.errors import (
    NonFiniteResultError,
    caller_location,
    statuses_recorded,
    warn_caller,
    warnings_attributed_to,
)
from dpp.estimators.base import (
    SCORINGS,
    PrototypeClassifier,
    SetClassifierMixin,
    labelled_sets,
    resolve_seed,
)
from dpp.estimators.baselines import ClassPriorClassifier
from dpp.estimators.dpp import DPPClassifier
from dpp.estimators.embedded import EmbeddedDPPClassifier
from dpp.estimators.ensemble import COMBINES, SetEnsembleClassifier, combined_log_proba
from dpp.estimators.neural import fit_together
from dpp.metrics import weighted_score
from dpp.model.fit import round_scores
from dpp.model.report import CLEAN_STATUSES
from dpp.pooling import POOLINGS, simplicity
from dpp.selection import EDGES, choose_on_path, cv_splits, edge_message
from dpp.sets import Layout, RaggedSets
from dpp.solvers import options as solver_options
from dpp.solvers.coordinate_ascent import fit_classifier_paths
from dpp.solvers.progress import bar, say

logger = logging.getLogger(__name__)

#: The held-out share with which a candidate on an embedding stops early within a fold.
DEFAULT_VALIDATION_FRACTION = 0.2


class Group(NamedTuple):
    """A candidate of :class:`DPPClassifierCV` but its ``l2``: ``K``, pooling, embedding.

    ``pooling`` and ``embedding`` are ``None`` where the estimator keeps its own (or has
    none); ``l2`` runs along a path within a group.
    """

    n_prototypes: int
    pooling: str | None = None
    embedding: tuple[int, ...] | None = None

    def params(self) -> dict:
        """The estimator parameters this group sets (:func:`candidate` fits them)."""
        out = {"n_prototypes": self.n_prototypes}
        if self.pooling is not None:
            out["pooling"] = self.pooling
        if self.embedding is not None:
            out["embedding"] = self.embedding
        return out

    def member(self) -> tuple:
        """``(pooling, embedding)``: the member of ``rule="ensemble"`` this group belongs to."""
        return self.pooling, self.embedding

    def simplicity(self) -> tuple:
        """Larger for simpler models, the tie-break of equal scores.

        Fewer prototypes first, then no embedding, then the paper's mean pooling before max
        and max before the generalised mean.
        """
        return (-self.n_prototypes, self.embedding is None, simplicity(self.pooling))


#: Why :class:`DPPClassifierCV` refuses an estimator, and what tunes it instead.
_NOT_TUNED = {
    name: "DPPClassifierCV tunes the prototype estimators' l2, K and pooling; {name} chooses its "
    "C by its own cross-validation (its Cs and cv parameters): fit it directly"
    for name in ("PoolingClassifier", "BagOfWordsClassifier")
} | {
    name: "DPPClassifierCV tunes the prototype estimators' l2, K and pooling; choose {name}'s "
    "learning_rate and weight_decay with sklearn.model_selection.GridSearchCV"
    for name in ("AttentionMILClassifier", "DeepSetsClassifier")
}
_NOT_TUNED[None] = (
    "DPPClassifierCV tunes the prototype estimators (DPPClassifier, EmbeddedDPPClassifier, "
    "StandardPrototypeClassifier, InfoLossClassifier, ClassPriorClassifier); got {name}"
)

#: How :class:`DPPClassifierCV` picks among its scored candidates.
RULES = ("ensemble", "best", "one_se", "corrected")


def round_optimism(per_round: np.ndarray) -> float:
    """How much choosing the best round on the same folds flatters a candidate's score.

    Tibshirani & Tibshirani (2009, *Ann. Appl. Stat.* 3(2), 822-829): the mean over folds of
    each fold's own best round's score minus its score at the round chosen on the mean, where
    the fold stopped early (NaN) not counted. 0 for a candidate whose every fold peaks at the
    chosen round; larger for one whose path over rounds is noisier.

    Args:
        per_round: ``[folds, R]`` validation scores of one candidate after each round (NaN
            where a fold stopped earlier).
    """
    per_round = np.asarray(per_round, np.float64)
    chosen = int(np.nanargmax(np.mean(per_round, axis=0)))
    return float(np.mean(np.nanmax(per_round, axis=1) - per_round[:, chosen]))


def choose(scores: dict, rule: str = "best", per_round: dict | None = None):
    """The chosen ``(Group, l2)`` key of ``scores`` (``key -> [folds]`` validation scores).

    * ``best``: the highest mean score; ties go to the stronger ``l2``, then the simpler model
      (:meth:`Group.simplicity`);
    * ``one_se``: the one-standard-error rule (Hastie, Tibshirani & Friedman, *Elements of
      Statistical Learning*, 7.10): among the candidates whose mean score is within one
      standard error of the best's (its folds' s.d. over the square root of their number), the
      simplest: the simplest model first (fewest prototypes, no embedding, the paper's mean
      pooling before max before gem), then the strongest ``l2``, then the higher score. (The
      rounds of the chosen candidate follow the same rule: :func:`fewest_rounds`.)
    * ``corrected``: the highest mean score less the optimism of its choice of rounds
      (:func:`round_optimism`, from ``per_round``: ``key -> [folds, R]``), so that every
      candidate's score carries no optimism from its rounds; a key without ``per_round`` has
      none. Ties as ``best``.

    Raises:
        ValueError: an unknown rule.
    """
    if rule not in RULES:
        raise ValueError(f"rule must be one of {', '.join(RULES)}, got {rule!r}")
    rule = "best" if rule == "ensemble" else rule  # each member's choice is its best
    mean = {key: float(np.mean(v)) for key, v in scores.items()}
    if rule == "corrected":
        mean = {c: m - round_optimism((per_round or {})[c]) if c in (per_round or {}) else m
                for c, m in mean.items()}  # fmt: skip
    best = max(mean, key=lambda c: (mean[c], c[1], c[0].simplicity()))
    if rule in ("best", "corrected"):
        return best
    folds = np.asarray(scores[best], float)
    se = float(folds.std(ddof=1) / np.sqrt(folds.size)) if folds.size > 1 else 0.0
    within = [c for c in mean if mean[c] >= mean[best] - se]
    return max(within, key=lambda c: (c[0].simplicity(), c[1], mean[c]))


def fewest_rounds(per_round: np.ndarray) -> int:
    """The fewest rounds whose mean score is within one standard error of the best round's.

    As the candidate's own best round, a round where some fold had stopped (NaN) is not
    eligible.

    Args:
        per_round: ``[folds, R]`` validation scores of one candidate after each round (NaN
            where a fold stopped earlier).
    """
    means = np.mean(per_round, axis=0)
    best = int(np.nanargmax(means))
    folds = per_round[:, best]
    se = float(folds.std(ddof=1) / np.sqrt(folds.size)) if folds.size > 1 else 0.0
    with np.errstate(invalid="ignore"):
        return int(np.flatnonzero(means >= means[best] - se)[0])


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
    estimator whose codes do not depend on ``l2`` (the standard prototype: ``fold_codes``) is
    encoded once per fold and ``K``, and every fold's ``l2`` path runs as one compiled program
    (:func:`dpp.solvers.coordinate_ascent.fit_classifier_paths`).

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
            The default, all three, lets the task say whether how much of a set lies near a
            prototype (mean), whether one vector does (max), or something between (gem) tells
            its class: on the suite's tasks the generalised mean earned its cost (about 1.5x
            the time of mean and max alone; +6.5 points on the 30-D proportion task, the same
            or better elsewhere; ``python scripts/candidates_probe.py``).
        embedding: candidate embeddings: ``None`` for the paper's model and widths such as
            ``(256, 128, 64)`` for DPP on a learned embedding, an
            :class:`~dpp.EmbeddedDPPClassifier` with the estimator's shared parameters
            (:meth:`~dpp.EmbeddedDPPClassifier.like`; it stops early on its own 20 % of each
            fold, its epochs are not chosen here). Every candidate is scored the same way: on
            the held-out folds. ``None`` alone: the estimator's own (an
            ``EmbeddedDPPClassifier``'s widths).
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
            still rising). This replaces the estimator's own ``validation_fraction``. It
            treats the rounds that overfit as what they are: on the suite's witness tasks the
            codes saturate within a few rounds and the held-out log-likelihood falls
            (docs/defaults.md, "A suite of set tasks"). Needs ``scoring="log_likelihood"``;
            ignored for the other estimators.
        rule: what the candidates' scores give: ``ensemble`` (the default: each member's best
            candidate, a member being a pooling (and an embedding) with its ``K``, ``l2`` and
            rounds chosen among its own candidates; the members are refitted and their
            predictions combined by ``combine``,
            :class:`~dpp.estimators.ensemble.SetEnsembleClassifier`;
            with one member it is ``best``), ``best`` (the highest mean validation score, one
            refit), ``one_se`` (the simplest candidate within one standard error of the best:
            mean pooling, the strongest ``l2``; and its fewest rounds within one standard error
            of its best round, :func:`fewest_rounds`) or ``corrected`` (the highest score less
            the optimism of choosing its rounds on the same folds, :func:`round_optimism`;
            ``best_score_`` is that corrected score). ``ensemble`` was decided on the suite's
            broad benchmark: +1.2 ± 0.4 accuracy points over ``best`` on 210 paired units
            (Wilcoxon p = 0.006) and +7.8 ± 0.8 over the paper's mean pooling, worse on no task
            family (docs/defaults.md, "Choosing the default selection").
        combine: how ``rule="ensemble"`` combines its members' predictions
            (:class:`~dpp.estimators.ensemble.SetEnsembleClassifier`): ``"log_proba"`` (the
            default), the mean of their log-probabilities renormalised, whose
            ``instance_scores`` and ``intercept_`` decompose the ensemble's class scores
            exactly, or ``"proba"``, the mean of their class probabilities (no per-vector
            decomposition). Decided on the suite's broad benchmark: level in
            accuracy, a higher test log-likelihood, worse on no task family
            (docs/benchmarks.md, issue 53's section). Ignored by the other rules.
        n_jobs: fits run at once, as in scikit-learn: ``None`` or 1 one at a time, ``-1`` every
            core. The (candidate, fold) fits are independent (each fold's path of ``l2`` runs in
            order when it warm-starts) and run in joblib threads (the compiled programs release
            the GIL; processes would compile every program anew): each fit, and so the
            selection, is bit for bit the same with any ``n_jobs``.
        verbose: a progress bar over the fits (candidates x folds, the grid's extensions and
            the refits; ``tqdm``, on stderr) and a closing line with the choice, its
            validation score, the class prior's and how many candidates' fold fits did not
            end clean. The fits' own ``verbose`` is the estimator's.

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
      ensemble's own parameters, ``{"estimators": [(name, estimator with its choice)],
      "combine": ...}``: ``SetEnsembleClassifier(**best_params_)`` is the refit. (A candidate
      on an embedding over a ``DPPClassifier`` is an ``EmbeddedDPPClassifier``: its
      parameters are that estimator's.)
    * ``best_score_``: the chosen candidate's mean validation score (``corrected``: less its
      optimism; ``one_se``: at its chosen round); for the ensemble, the ensemble's own, its
      chosen members refitted on each fold and combined (:meth:`_Search.ensemble_score`).
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
      only: each member's ``name``, ``params`` (as ``best_params_`` of one), ``rounds``, its
      own mean validation ``score`` and ``position``), and the fitted attributes of
      ``best_estimator_`` (``classes_``, ``prototypes_``, ``beta_``, ``theta_``,
      ``n_features_in_``, ...; an ensemble has its members'). ``save`` writes
      ``best_estimator_``.
    """

    _parameter_constraints: ClassVar[dict[str, check.Rule]] = {
        "scoring": check.Choice(SCORINGS),
        "max_extensions": check.Int(0),
        "select_rounds": check.Bool(),
        "rule": check.Choice(RULES),
        "combine": check.Choice(COMBINES),
    }

    def __init__(
        self,
        estimator=None,
        l2s=(1e-3, 1e-2, 1e-1, 1.0),
        n_prototypes=None,
        pooling=POOLINGS,
        embedding=(None,),
        cv=5,
        scoring: str = "log_likelihood",
        max_extensions: int = 3,
        select_rounds: bool = True,
        rule: str = "ensemble",
        combine: str = "log_proba",
        n_jobs: int | None = None,
        verbose: bool = False,
    ):
        self.estimator = estimator
        self.l2s = l2s
        self.n_prototypes = n_prototypes
        self.pooling = pooling
        self.embedding = embedding
        self.cv = cv
        self.scoring = scoring
        self.max_extensions = max_extensions
        self.select_rounds = select_rounds
        self.rule = rule
        self.combine = combine
        self.n_jobs = n_jobs
        self.verbose = verbose

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
        base, candidates, by_round = self._checked()
        self.__dict__.pop("members_", None)  # an earlier fit's ensemble
        sets, classes = labelled_sets(X, y, sample_weight)
        seed = resolve_seed(base.random_state)  # the folds' (None: fresh, as the fits')
        folds = cv_splits(self.cv, np.asarray(sets.labels), seed, groups)
        search = _Search(base, sets, folds, self.scoring, by_round, self.n_jobs, candidates)
        # the grid's fits and the refits are known now: the bar's total grows only by the
        # values added past an edge (issue 56: it had grown from 0 as the fits were planned)
        members = len({g.member() for g in candidates})
        refits = members if self.rule == "ensemble" and members > 1 else 1
        search.planned = len(candidates) * len(folds) * len(set(self.l2s)) + refits
        with bar(search.planned, type(self).__name__, bool(self.verbose)) as search.bar:
            self._search(search, base, candidates, by_round, sets, classes)
        if self.verbose:
            say(logger, "%s: %s", type(self).__name__, self._summary())
        return self

    def _summary(self) -> str:
        """The verbose fit's closing line: the choice, its score, the prior's."""
        members = getattr(self, "members_", None)
        chosen = (
            "; ".join(f"{m['name']}: {m['params']}" for m in members)
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

    def _search(self, search, base, candidates, by_round, sets, classes) -> None:
        """:meth:`fit` once the folds are drawn: scores, grows, chooses and refits."""
        l2s = sorted({float(v) for v in self.l2s}, reverse=True)
        search.cross_validate(candidates, l2s, warm=True)
        members = list(dict.fromkeys(g.member() for g in candidates))
        ensemble = self.rule == "ensemble" and len(members) > 1
        # the best score's group (ties: the stronger l2, then the simpler model) grows its path;
        # for an ensemble, each member's (pooling and embedding) best group grows its own
        grown = {
            m: self._grow(search, choose(_own(search.scores, m))[0])
            for m in (members if ensemble else [None])
        }
        best_key = self._set_results(search, len(search.folds))
        self.prior_score_ = float(
            np.mean([_prior_score(part, held, self.scoring) for part, held in search.parts])
        )
        self.best_rounds_ = search.rounds.get(best_key) if by_round else None
        if ensemble:
            self._fit_ensemble(base, search, sets, classes, members, grown)
            self.beats_prior_ = bool(self.best_score_ > self.prior_score_)
            self.classes_ = classes
            self.n_features_in_ = self.best_estimator_.n_features_in_
            return
        group, choice = grown[None]
        self.best_position_ = choice.position  # the best is best_group's: only its path grew
        self.l2s_added_ = list(choice.added)
        if self.rule not in ("best", "ensemble"):  # where the rule's choice lies in its group
            self.best_position_ = _position(
                [v for g, v in search.scores if g == best_key[0]], best_key[1]
            )
        elif choice.position in EDGES:
            warn_caller(edge_message(type(self).__name__, "l2", choice, self.max_extensions))
        if self.best_rounds_ is not None and self.rule == "one_se":
            per_round = search.per_round[best_key]
            self.best_rounds_ = fewest_rounds(per_round)  # best_score_: that round's score
            self.best_score_ = float(np.mean(per_round[:, self.best_rounds_]))
        self.beats_prior_ = bool(self.best_score_ > self.prior_score_)
        self.best_params_ = refit_params(best_key, self.best_rounds_)
        self.best_estimator_ = _refit(base, best_key, self.best_rounds_, sets, search, classes)
        owner = type(self).__name__
        warn_unclean_choice(owner, best_key, search.statuses[best_key], self.best_estimator_)
        self.classes_ = classes
        self.n_features_in_ = self.best_estimator_.n_features_in_

    def _grow(self, search: _Search, group: Group):
        """``(group, choice)``: ``group``'s ``l2`` path grown past an edge of its best score.

        :func:`dpp.selection.choose_on_path`, up to ``max_extensions`` values on each side.
        """

        def score_new(l2: float) -> float:
            # weaker than the path: continue each fold's path; stronger: a fresh fit
            weakest = min(v for g, v in search.scores if g == group)
            search.cross_validate([group], [l2], warm=l2 < weakest)
            return float(search.scores[group, l2].mean())

        path = [v for g, v in search.scores if g == group]
        means = [float(search.scores[group, v].mean()) for v in path]
        return group, choose_on_path(path, means, score_new, int(self.max_extensions))

    def _fit_ensemble(self, base, search: _Search, sets, classes, members, grown) -> None:
        """``rule="ensemble"``: each member's best candidate refitted, their predictions combined.

        Sets ``best_estimator_`` (a :class:`~dpp.estimators.ensemble.SetEnsembleClassifier`),
        ``members_``, ``best_params_`` (the ensemble's parameters: each member the tuned
        estimator with its choice), ``best_score_`` (the ensemble's own validation score,
        :meth:`_Search.ensemble_score`), ``best_position_`` and ``l2s_added_``.
        """
        fitted, self.members_, added, chosen, keys = [], [], [], [], []
        for member in members:
            key = choose(_own(search.scores, member))
            group, choice = grown[member]
            position = choice.position if key[0] == group else _position(
                [v for g, v in search.scores if g == key[0]], key[1]
            )  # fmt: skip
            if key[0] == group and choice.position in EDGES:
                warn_caller(edge_message(type(self).__name__, "l2", choice, self.max_extensions))
            added += [v for v in choice.added if v not in added]
            rounds = search.rounds.get(key) if search.by_round else None
            name = _member_name(member)
            chosen.append((name, refit_estimator(base, key, rounds)))
            keys.append((key, rounds))
            fitted.append((name, _refit(base, key, rounds, sets, search, classes)))
            warn_unclean_choice(type(self).__name__, key, search.statuses[key], fitted[-1][1])
            self.members_.append({
                "name": name, "params": refit_params(key, rounds), "rounds": rounds,
                "score": float(search.scores[key].mean()), "position": position,
            })  # fmt: skip
        ensemble = SetEnsembleClassifier([(n, clone(e)) for n, e in fitted], combine=self.combine)
        ensemble.set_fitted(fitted, classes)
        self.best_estimator_ = ensemble
        # the ensemble's own parameters: each member the tuned estimator with its choice
        self.best_params_ = {"estimators": chosen, "combine": self.combine}
        self.best_score_ = search.ensemble_score(keys, self.combine)
        positions = [m["position"] for m in self.members_]
        edges = [p for p in positions if p in EDGES]
        self.best_position_ = edges[0] if edges else (
            positions[0] if len(set(positions)) == 1 else "interior"
        )  # fmt: skip
        self.l2s_added_ = added

    def check_params(self) -> None:
        """Checks every parameter: the grids, then the table (``fit`` calls it).

        Raises:
            ValueError: naming the parameter, the rule and the value.
        """
        l2s = [float(v) for v in self.l2s]
        if not l2s or min(l2s) < 0:
            raise ValueError(f"l2s must be a non-empty list of values >= 0, got {self.l2s!r}")
        for k in self.n_prototypes or ():
            check.int_at_least("n_prototypes", k, 1)
        for name in ("pooling", "embedding"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, str) or not list(value)):
                raise ValueError(
                    f"{name} must be a non-empty list of candidates or None, got {value!r}"
                )
        for p in self.pooling or ():
            check.choice("pooling", p, POOLINGS)
        for e in self.embedding or ():
            if e is not None:
                check.Widths()("embedding", e)
        if self.n_jobs is not None and (
            isinstance(self.n_jobs, bool)
            or not isinstance(self.n_jobs, int | np.integer)
            or self.n_jobs == 0
        ):
            raise ValueError(
                f"n_jobs must be None or an int other than 0 (-1: every core), got {self.n_jobs!r}"
            )
        check.check_table(self, self._parameter_constraints)

    def _checked(self) -> tuple[PrototypeClassifier, list[Group], bool]:
        """``(estimator to tune, candidate groups, whether rounds are chosen)``, checked.

        A group is a ``K`` with a pooling and an embedding (each ``None`` where the estimator
        has no such parameter or keeps its own); ``l2`` runs along a path within each.

        Raises:
            ValueError: naming the setting (see :meth:`fit`).
        """
        self.check_params()
        base = DPPClassifier() if self.estimator is None else self.estimator
        if not isinstance(base, PrototypeClassifier):
            raise TypeError(_NOT_TUNED.get(type(base).__name__, _NOT_TUNED[None]).format(
                name=type(base).__name__
            ))  # fmt: skip
        ks = [base.n_prototypes] if self.n_prototypes is None else list(self.n_prototypes)
        params = base.get_params()
        poolings = [None]
        if self.pooling is not None and "pooling" in params:
            poolings = [check.choice("pooling", p, POOLINGS) for p in self.pooling]
        embeddings = [None]  # embedding candidates: over the paper's model or the embedded one
        if self.embedding is not None and isinstance(base, DPPClassifier | EmbeddedDPPClassifier):
            embeddings = list(self.embedding)
        if isinstance(base, EmbeddedDPPClassifier):  # None: its own widths (it has no other)
            embeddings = [tuple(params["embedding"]) if e is None else e for e in embeddings]
        candidates = [
            Group(int(k), p, None if e is None else check.Widths()("embedding", e))
            for e in embeddings for p in poolings for k in ks
        ]  # fmt: skip
        by_round = self.select_rounds and isinstance(base, DPPClassifier)
        if by_round and self.scoring != "log_likelihood":
            raise ValueError(
                "select_rounds chooses the rounds by the validation log-likelihood: use "
                f"scoring='log_likelihood' or select_rounds=False (got scoring={self.scoring!r})"
            )
        if by_round:
            base = clone(base).set_params(validation_fraction=0.0)  # the folds hold out instead
        return base, list(dict.fromkeys(candidates)), by_round

    def _set_results(self, search: _Search, num_folds: int) -> tuple[Group, float]:
        """Sets ``cv_results_`` (scikit-learn's layout) and the best; returns its key."""
        candidates = list(search.scores)
        scores = np.stack([search.scores[c] for c in candidates])
        mean = scores.mean(axis=1)
        best = candidates.index(choose(search.scores, self.rule, search.per_round))
        order = np.argsort(-mean, kind="stable")
        rank = np.empty(len(candidates), dtype=np.int64)
        rank[order] = np.arange(1, len(candidates) + 1)
        self.cv_results_ = {
            "params": [{**g.params(), "l2": l2} for g, l2 in candidates],
            "param_n_prototypes": np.array([g.n_prototypes for g, _ in candidates]),
            "param_pooling": np.array([g.pooling for g, _ in candidates], dtype=object),
            "param_embedding": np.array([g.embedding for g, _ in candidates], dtype=object),
            "param_l2": np.array([l2 for _, l2 in candidates]),
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
        self.best_params_ = {
            k: v for k, v in self.cv_results_["params"][best].items() if k != "optimizer"
        }
        self.best_score_ = float(mean[best])
        if self.rule == "corrected" and candidates[best] in search.per_round:
            self.best_score_ -= round_optimism(search.per_round[candidates[best]])
        self.best_index_ = int(best)
        return candidates[best]

    def __getattr__(self, name):
        # fitted attributes of the refitted estimator (prototypes_, beta_, theta_, model_, ...)
        best = self.__dict__.get("best_estimator_")
        if name.endswith("_") and not name.startswith("__") and best is not None:
            try:
                return getattr(best, name)
            except AttributeError:
                pass
            members = self.__dict__.get("members_")
            if members:  # the default ensemble: the attribute is its members'
                names = ", ".join(m["name"] for m in members)
                hint = (
                    "; combine='log_proba' gives the ensemble's own (the members' weighted mean)"
                    if name == "intercept_" else ""
                )  # fmt: skip
                raise AttributeError(
                    f"{type(self).__name__} (rule='ensemble') refitted an ensemble of {names}, "
                    f"which has no single {name!r}: read it from a member, "
                    f"best_estimator_.named_estimators_[{members[0]['name']!r}].{name}, or "
                    f"select one model with rule='best'{hint}"
                ) from None
            raise AttributeError(
                f"{type(self).__name__}'s refitted {type(best).__name__} has no attribute {name!r}"
            ) from None
        raise AttributeError(
            f"{type(self).__name__!r} object has no attribute {name!r}"
            + ("" if best is not None else " (not fitted yet?)" if name.endswith("_") else "")
        )

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
        An ensemble (``rule="ensemble"``) gives them under ``combine="log_proba"`` only
        (:meth:`~dpp.estimators.ensemble.SetEnsembleClassifier.instance_scores`).
        """
        return self._best().instance_scores(X)

    def soft_assignments(self, X) -> list[np.ndarray]:
        """Every vector's ``[M_n, K]`` code under the refitted estimator.

        An ensemble's are its members' side by side, ``[M_n, K_1 + ... + K_m]``.
        """
        return self._best().soft_assignments(X)

    def save(self, path) -> Path:
        """Writes ``best_estimator_`` to a model file; :func:`dpp.load` reads it as that estimator.

        Returns:
            The path written (as :meth:`PrototypeClassifier.save`).

        Raises:
            sklearn.exceptions.NotFittedError: before ``fit``.
        """
        return self._best().save(path)


class _Search:
    """The folds' fits of a :class:`DPPClassifierCV`, and their scores per ``(K, l2)``.

    Attributes:
        parts: ``(fitted part, held-out fold)`` per fold.
        scores: ``(K, l2) -> [folds]`` validation scores (at the best round with ``by_round``).
        rounds: ``(K, l2) -> `` the best round (``by_round`` only).
        fit_times, score_times: ``(K, l2) -> [folds]`` seconds of each fold's fit and of
            scoring its held-out fold (:meth:`times`).
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
        if isinstance(base, DPPClassifier):  # every fold's order: fitted sets, then held out
            sizes = sets.set_sizes()
            orders = [sizes] + [
                np.concatenate([sizes[np.sort(i)], sizes[np.sort(j)]]) for i, j in folds
            ]
            self.fit_params = {"layout": Layout.covering(sizes).union(Layout.of_orders(orders))}
            poolings = {g.pooling for g in candidates if g.embedding is None}
            if len(poolings) > 1:
                self.fit_params["any_pooling"] = True

    def cross_validate(self, groups: list[Group], path: list[float], warm: bool) -> None:
        """Scores ``(group, l2)`` for each group and each l2 of ``path`` (strongest first).

        With ``warm`` (and without ``by_round``), each fold continues its path from the weakest
        ``l2`` fitted so far. An estimator whose encoder does not depend on ``l2`` (it has
        ``fold_codes``: the standard prototype) is encoded once per fold and ``K``, and the
        Theta-steps of every fold and ``l2`` run as one program (:meth:`_theta_steps`). A
        group with an embedding stops early on its own held-out share of each fold (its rounds
        are epochs, not chosen here). The other groups' fits, one per (group, fold, ``l2``)
        with ``by_round`` and one path per (group, fold) otherwise, run ``n_jobs`` at once
        (:meth:`_run`); the scores are recorded in the order of the sequential loop.
        """
        units = []
        for group in groups:
            if not self.by_round and hasattr(self.base, "fold_codes"):
                self.more(len(self.parts) * len(path))
                self._theta_steps(group, path)
                self.done(len(self.parts) * len(path))
                self._log(group, path)
            elif group.embedding is not None:
                self.more(len(self.parts) * len(path))
                self._together(group, path)
                self.done(len(self.parts) * len(path))
                self._log(group, path)
            elif self.by_round:  # every candidate starts afresh from the fold's centres
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
            est = candidate(self.base, group, warm_start=not self.by_round)
            if self.by_round:  # every candidate starts from the fold's k-means centres
                est.set_params(init=self._centres(f, est))
        fits = []
        for l2 in path:
            t0 = time.perf_counter()
            est.set_params(l2=float(l2 * self.shrink[f]))
            with statuses_recorded():  # a row of cv_results_; the chosen candidate's: a warning
                if self.by_round:
                    est.fit(part, validation_sets=held, **self.fit_params)
                else:
                    est.fit(part, **self.fit_params)
            t1 = time.perf_counter()
            if self.by_round:
                value = _scores_by_round(est)
            else:
                value = weighted_score(
                    est.predict_log_proba(held), held.labels, held.weights, self.scoring
                )
            fits.append((l2, value, est.fit_report_.status, t1 - t0, time.perf_counter() - t1))
            self.done()
        return est, fits

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

    def _together(self, group: Group, path: list[float]) -> None:
        """Scores ``(group, l2)`` for every ``l2`` of ``path``: DPP on an embedding.

        Every fold x ``l2`` fit starts from k-means of its embedded part (no warm start),
        stops early on its own held-out share of the fold and is trained by Adam epochs, so
        all of them run batched (:func:`~dpp.estimators.neural.fit_together`, the fixed-step
        decision of issue 34): each ends as its fit alone would.
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
        fit_together(estimators, training)
        elapsed = (time.perf_counter() - t0) / len(estimators)  # an equal share of the batch
        for (f, l2), est in zip(keys, estimators, strict=True):
            held = self.parts[f][1]
            self._status(group, l2, f, est.fit_report_.status)
            t1 = time.perf_counter()
            score = weighted_score(
                est.predict_log_proba(held), held.labels, held.weights, self.scoring
            )
            self.scores.setdefault((group, l2), np.zeros(len(self.parts)))[f] = score
            self._time(group, l2, f, elapsed, time.perf_counter() - t1)

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

    def ensemble_score(self, chosen: list[tuple], combine: str) -> float:
        """The mean validation score of the ensemble of ``chosen`` over the folds.

        Each member ``(key, rounds)`` is refitted on each fold's part as the ensemble's member
        is on every training set (:func:`refit_estimator`, from the fold's k-means centres,
        ``l2`` times the part's weight share as every candidate's fold fit); their held-out
        log-probabilities are combined by ``combine``
        (:func:`~dpp.estimators.ensemble.combined_log_proba`, equal weights) and scored: the
        score of what ``best_estimator_`` is, not of its members.
        """
        self.more(len(chosen) * len(self.parts))
        scores = []
        for f, (part, held) in enumerate(self.parts):
            logs = []
            for key, rounds in chosen:
                est = refit_estimator(self.base, key, rounds)
                est.set_params(l2=float(key[1] * self.shrink[f]))  # as the candidates' folds
                fit_params = self.fit_params if key[0].embedding is None else {}
                if "init" in est.get_params(deep=False):
                    est.set_params(init=self._centres(f, est))
                with statuses_recorded():  # the members' own folds' statuses are in cv_results_
                    est.fit(part, **fit_params)
                logs.append(est.predict_log_proba(held))
                self.done()
            log_p = combined_log_proba(logs, np.full(len(chosen), 1 / len(chosen)), combine)
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


def _scores_by_round(estimator: DPPClassifier) -> np.ndarray:
    """``[max_rounds + 1]`` validation log-likelihood per set after each round.

    Of a fit with ``validation_sets`` (:func:`dpp.model.fit.round_scores`): known up to its
    last round, carried on to ``max_rounds`` when it stopped by ``tol`` (a fit capped later
    stops there too), NaN after a stop by ``patience``.
    """
    early = estimator.fit_report_.early_stopping
    return round_scores(early, estimator.max_rounds, estimator.patience)


def _prior_score(part: RaggedSets, held: RaggedSets, scoring: str) -> float:
    """The validation score on ``held`` of :class:`ClassPriorClassifier` fitted on ``part``."""
    prior = ClassPriorClassifier(standardize=False).fit(part)
    return weighted_score(prior.predict_log_proba(held), held.labels, held.weights, scoring)


def _own(scores: dict, member) -> dict:
    """The scores of the candidates of one ensemble member (``None``: every candidate)."""
    return {k: v for k, v in scores.items() if member is None or k[0].member() == member}


def _member_name(member: tuple) -> str:
    """An ensemble member's name: its pooling (``own`` without one), ``_embedded`` on one."""
    pooling, embedding = member
    return (pooling or "own") + ("" if embedding is None else "_embedded")


def pooling_members(random_state=0) -> list[tuple[str, DPPClassifierCV]]:
    """DPP's per-pooling selections, ``DPPClassifierCV(pooling=(p,))`` for mean, max and gem.

    The members of a :class:`~dpp.estimators.ensemble.SetEnsembleClassifier` that averages
    them: what ``DPPClassifierCV()`` (``rule="ensemble"``) fits itself, as one search.
    """
    base = DPPClassifier(random_state=random_state)
    return [(p, DPPClassifierCV(base, pooling=(p,))) for p in POOLINGS]


def candidate(base, group: Group, **params):
    """The unfitted estimator of ``group`` (with ``params`` set), from the tuned ``base``.

    ``base`` cloned with the group's parameters; for a group on an embedding over a paper's
    model, the :class:`~dpp.EmbeddedDPPClassifier` with ``base``'s shared parameters
    (:meth:`~dpp.EmbeddedDPPClassifier.like`).
    """
    if group.embedding is None or isinstance(base, EmbeddedDPPClassifier):
        return clone(base).set_params(**group.params(), **params)
    return EmbeddedDPPClassifier.like(base, **group.params(), **params)


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


def _refit(base, key: tuple, rounds, sets, search: _Search, classes):
    """Candidate ``key`` (``(Group, l2)``) fitted on every training set, as it was scored.

    From k-means, with :func:`refit_params`.
    """
    search.more(1)
    est = refit_estimator(base, key, rounds)
    # the layout and pooling-as-data of the coordinate-ascent fits (shapes only: the same fit);
    # an embedded candidate is an EmbeddedDPPClassifier, trained by Adam epochs, which takes
    # neither
    fit_params = search.fit_params if key[0].embedding is None else {}
    with statuses_recorded():  # said by the search, naming the candidate (warn_unclean_choice)
        est.fit(sets, **fit_params)
    search.done()
    est.classes_ = classes
    return est


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


def candidate_name(key: tuple) -> str:
    """``pooling='max', n_prototypes=4, l2=0.1``: a candidate ``(Group, l2)`` by its grid values.

    Floats as the shortest form that reads back (``%g``), as a user writes a grid.
    """
    group, l2 = key
    params = {**group.params(), "l2": l2}
    return ", ".join(
        f"{k}={v:g}" if isinstance(v, float) else f"{k}={v!r}" for k, v in params.items()
    )


def _position(values: list[float], chosen: float) -> str:
    """Where ``chosen`` lies among ``values`` (``l2``: larger is stronger)."""
    if len(set(values)) == 1:
        return "only value"
    if chosen == max(values):
        return "strongest edge"
    if chosen == min(values):
        return "weakest edge"
    return "interior"
