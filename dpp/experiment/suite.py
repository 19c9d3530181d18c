"""A suite of set tasks nobody here tuned for, every method on each, one table.

Each task (:data:`TASKS`, :mod:`dpp.datasets.suite`) is cut into stratified outer folds; in
every fold each method (:data:`METHODS`, a registry of factories) is fitted on the other folds
with its default selection and scored on the held-out one:

* ``dpp``: :class:`~dpp.DPPClassifierCV` with its defaults (for each pooling, mean, max and
  gem, ``l2`` and the number of coordinate-ascent rounds by inner CV, the grid extended past an
  edge; the three winners' log-probabilities averaged): what a user gets; ``dpp_proba`` and
  ``dpp_log_proba`` its two combinations, scored on one fit; ``dpp_best`` (the one
  best candidate refitted: the default before the broad benchmark), ``dpp_1se``,
  ``dpp_repeated`` and ``dpp_corrected`` (other selection rules), ``dpp_ensemble`` (the
  default's ensemble built from three separate selections) and ``dpp_seeds`` (mean pooling
  over three k-means seeds); ``dpp_mean`` (the paper's pooling), ``dpp_max`` and ``dpp_gem``
  fix the pooling; ``dpp_embedded_mean`` and ``dpp_embedded_max`` are DPP on a learned
  embedding (``EmbeddedDPPClassifier(embedding=(256, 128, 64))``, K = 16, no dropout: the
  class's former defaults), ``dpp_embedded`` the class's defaults, and
  ``dpp_embedded_{mean,max,gem}_dropout``, ``dpp_embedded_{max,gem}_dropout_normalized`` and
  ``dpp_embedded_max_dropout_p40`` (patience 40 epochs) the remedies measured against them
  (all with the networks' weight decay, 5e-3, on the embedding); ``dpp_embedded_wd_5e-2`` and
  ``dpp_embedded_wd_2e-1`` the generalised mean with dropout and a stronger weight decay,
  ``dpp_embedded_wd_choice`` both that and the networks' decay, the one with the better
  held-out log-likelihood of its own early stopping kept (:class:`HeldOutChoice`: the same
  fits as ``dpp_embedded``, the class's defaults since);
* ``standard``: the same selection over the standard prototype;
* ``pooling`` and ``bag_of_words``: :mod:`dpp.estimators.pooled` (their own ``C`` by CV);
* ``attention_mil`` and ``deep_sets``: the neural set baselines of
  :mod:`dpp.estimators.neural` (Ilse et al. 2018; MI-Net, Wang et al. 2018), with the papers'
  defaults.

InfoLoss is left out (its fits cost 10-100x a standard prototype's and it needs a beta scale
tuned per task). :func:`run_suite` runs it into a folder (``suite.json``, ``suite.csv``,
``suite.md``, ``suite.png``), from ``python experiments/run.py experiment=suite`` or
``scripts/suite.py``.
"""

from __future__ import annotations

import json
import time
import warnings
from collections.abc import Callable
from copy import deepcopy
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.model_selection import RepeatedStratifiedKFold, StratifiedKFold, train_test_split

from dpp.datasets.base import Dataset
from dpp.datasets.suite import (
    make_digit_bags,
    make_digit_patches,
    make_proportion,
    make_witness,
)
from dpp.errors import ConfigError, FitWarning
from dpp.estimators import ESTIMATORS, DPPClassifierCV, SetEnsembleClassifier
from dpp.estimators.ensemble import seed_members
from dpp.estimators.neural import best_held_out, held_out_score
from dpp.experiment.reporting import Recorder, finished_units, process_identity
from dpp.metrics import evaluate
from dpp.pooling import POOLINGS
from dpp.solvers.cache import release_compiled_programs

#: Data seeds of draw ``d`` are ``base + DRAW_STRIDE * d``: draw 0 is each task's original data.
DRAW_STRIDE = 1000


def _drawn(make, base: int = 0, **kwargs) -> Callable[[int], Dataset]:
    """A task's loader: ``draw -> Dataset``, the data seed ``base + DRAW_STRIDE * draw``."""

    def load(draw: int = 0) -> Dataset:
        return make(**kwargs, seed=base + DRAW_STRIDE * int(draw))

    return load


#: Tasks by name: (loader ``draw -> Dataset``, K of the prototype methods, the task family:
#: what the label depends on). Families group tasks for the paired comparisons
#: (:func:`paired_differences`).
TASKS: dict[str, tuple[Callable[[int], Dataset], int, str]] = {
    "witness_d10_r10": (_drawn(make_witness, dim=10, witness_rate=0.1), 8, "witness"),
    "witness_d50_r05": (_drawn(make_witness, 1, dim=50, witness_rate=0.05), 8, "witness"),
    "proportion_d10_c3": (_drawn(make_proportion, dim=10), 8, "proportion"),
    "proportion_d30_c2": (
        _drawn(make_proportion, 2, dim=30, num_classes=2, components=6),
        8,
        "proportion",
    ),
    "digits_patches": (_drawn(make_digit_patches), 16, "image patches"),
    # the families over dimensions, witness rates, set sizes and class counts
    "witness_d5_r20": (_drawn(make_witness, 3, dim=5, witness_rate=0.2), 8, "witness"),
    "witness_d20_r01": (
        _drawn(make_witness, 4, dim=20, witness_rate=0.01, min_size=20, max_size=80),
        8,
        "witness",
    ),
    "witness_d100_r10": (_drawn(make_witness, 5, dim=100, witness_rate=0.1), 8, "witness"),
    "proportion_d5_c5": (
        _drawn(make_proportion, 6, dim=5, num_classes=5, components=5, num_sets=250),
        8,
        "proportion",
    ),
    "proportion_d50_c2_small": (
        _drawn(make_proportion, 7, dim=50, num_classes=2, min_size=3, max_size=10),
        8,
        "proportion",
    ),
    # Ilse et al. 2018's MNIST-bags on 8 x 8 digits: a fixed split into training bags and test
    # bags of held-out images, so each outer fold is a new draw of images and bags
    "digit_bags_m10_n50": (
        _drawn(make_digit_bags, 10, num_bags=50, mean_size=10, sd_size=2),
        8,
        "digit bags",
    ),
    "digit_bags_m10_n100": (
        _drawn(make_digit_bags, num_bags=100, mean_size=10, sd_size=2),
        8,
        "digit bags",
    ),
    "digit_bags_m10_n200": (
        _drawn(make_digit_bags, 20, num_bags=200, mean_size=10, sd_size=2),
        8,
        "digit bags",
    ),
    "digit_bags_m50_n50": (
        _drawn(make_digit_bags, 30, num_bags=50, mean_size=50, sd_size=10),
        8,
        "digit bags",
    ),
}
#: The tasks ``experiment=suite`` ran before the broad benchmark (its default, by its config).
CORE_TASKS = ("witness_d10_r10", "witness_d50_r05", "proportion_d10_c3", "proportion_d30_c2",
              "digits_patches")  # fmt: skip
#: ``scripts/suite.py --quick``: one task of each family, one draw, 3 folds, these methods.
QUICK_TASKS = ("witness_d10_r10", "proportion_d10_c3", "digits_patches", "digit_bags_m10_n100")
QUICK_METHODS = ("dpp", "dpp_mean", "pooling", "attention_mil")

#: The ``l2`` grid of the prototype methods' selection (extended past an edge).
L2S = (1e-3, 1e-2, 1e-1, 1.0)
#: The embedding of the embedded DPP (the neural baselines' 256-128-64) and its ``K``.
EMBEDDING, EMBEDDED_K = (256, 128, 64), 16


def _dpp_cv(pooling=None, **options):
    def make(k: int, seed: int):
        extra = {} if pooling is None else {"pooling": pooling}
        base = ESTIMATORS["dpp"](n_prototypes=k, random_state=seed)
        cv = options.get("cv", 3)
        if cv == "repeated":  # 2 x 3 folds, the same rule on twice the folds
            cv = RepeatedStratifiedKFold(n_splits=3, n_repeats=2, random_state=seed)
        rest = {k: v for k, v in options.items() if k != "cv"}
        return DPPClassifierCV(base, l2s=L2S, cv=cv, **extra, **rest)

    return make


#: The neural peers' selection grid: learning rate x weight decay (the defaults here, 5e-4 and
#: 5e-3, and a step up of the rate and down of the decay), by 3 inner folds: 13 fits a unit.
NETWORK_GRID = {"learning_rate": [5e-4, 2e-3], "weight_decay": [5e-4, 5e-3]}


class _KeptEstimator:
    """Predicts and gives instance evidence through ``best_estimator_``, set by ``fit``."""

    def predict_log_proba(self, sets) -> np.ndarray:
        """``[N, C]`` log class probabilities of the kept estimator."""
        return self.best_estimator_.predict_log_proba(sets)

    def __getattr__(self, name):  # instance_scores, attention_weights, intercept_, ...
        if name.startswith("__") or "best_estimator_" not in self.__dict__:
            raise AttributeError(name)
        return getattr(self.__dict__["best_estimator_"], name)


class SelectedNetwork(_KeptEstimator):
    """A neural set classifier whose ``learning_rate`` and ``weight_decay`` are chosen by CV.

    scikit-learn's ``GridSearchCV`` over :data:`NETWORK_GRID` with 3 stratified inner folds
    and the validation log-loss, then a refit on every training set: the networks get a
    selection budget like DPP's (selection against selection). Reads a labelled
    :class:`~dpp.sets.RaggedSets` as the suite gives it; predicts and gives instance evidence
    through the refitted network.
    """

    def __init__(self, estimator, seed: int):
        self.estimator, self.seed = estimator, int(seed)

    def fit(self, sets):
        """Chooses the rate and the decay on labelled ``sets``, then refits; returns ``self``."""
        from sklearn.model_selection import GridSearchCV

        X = np.split(np.asarray(sets.member_vectors()), np.cumsum(sets.set_sizes())[:-1])
        y = np.asarray(sets.labels).argmax(1)
        folds = StratifiedKFold(3, shuffle=True, random_state=self.seed)
        self.search_ = GridSearchCV(
            self.estimator, NETWORK_GRID, cv=folds, scoring="neg_log_loss", error_score="raise"
        ).fit(X, y)
        self.best_estimator_ = self.search_.best_estimator_
        self.fit_report_ = self.best_estimator_.fit_report_
        return self


def _ensemble(poolings=POOLINGS, seeds: int = 1):
    """The per-pooling winners (``_dpp_cv([p])``), or one over ``seeds`` k-means seeds."""

    def make(k: int, seed: int):
        if seeds > 1:
            members = seed_members(_dpp_cv(list(poolings))(k, seed), range(seed, seed + seeds))
        else:
            members = [(p, _dpp_cv([p])(k, seed)) for p in poolings]
        return SetEnsembleClassifier(members)

    return make


#: The weight decay on the embedding that the first remedies were measured with (the networks').
_NETWORK_DECAY = 5e-3


def _embedded(pooling: str | None = None, **params):
    """The embedded DPP with the suite's K and embedding, its defaults but for ``params``."""

    def make(k: int, seed: int):
        del k  # the embedding space has its own K
        chosen = {} if pooling is None else {"pooling": pooling}
        return ESTIMATORS["embedded_dpp"](
            n_prototypes=EMBEDDED_K, embedding=EMBEDDING, random_state=seed, **chosen, **params
        )

    return make


class HeldOutChoice(_KeptEstimator):
    """Candidates fitted in turn; the one whose early stopping held out the best log-likelihood.

    Every candidate is an Adam-trained estimator with the same ``random_state`` and
    ``validation_fraction``, so all are monitored on the same held-out training sets; the one
    with the highest held-out log-likelihood per set at its best epoch
    (``fit_report_.early_stopping``) is kept, as it was refitted. No data beyond the fit's own
    held-out part is used. Reads a labelled :class:`~dpp.sets.RaggedSets` as the suite gives it;
    predicts and gives instance evidence through the kept estimator.
    """

    def __init__(self, candidates: list):
        self.candidates = candidates

    def fit(self, sets):
        """Fits every candidate on labelled ``sets``; keeps the best held out; returns ``self``.

        The choice of :class:`~dpp.EmbeddedDPPClassifier` among several ``weight_decay``
        candidates (:func:`~dpp.estimators.neural.best_held_out`), here over whole estimators.
        """
        fitted = [c.fit(sets) for c in self.candidates]
        self.scores_ = [held_out_score(e.fit_report_) for e in fitted]
        self.chosen_ = best_held_out([e.fit_report_ for e in fitted])
        self.best_estimator_ = fitted[self.chosen_]
        self.fit_report_ = self.best_estimator_.fit_report_
        return self


def _embedded_decays(decays=(_NETWORK_DECAY, 2e-1)):
    """The embedded DPP (gem, dropout 0.5) at each weight decay, the best held out kept."""

    def make(k: int, seed: int):
        return HeldOutChoice(
            [_embedded("gem", dropout=0.5, weight_decay=d)(k, seed) for d in decays]
        )

    return make


#: Every method by name: ``(K, seed) -> unfitted estimator``: configured variants of the
#: estimators of the one registry, :data:`dpp.estimators.ESTIMATORS` (which the model file and
#: the Hydra config store read too).
METHODS: dict[str, Callable] = {
    "dpp": _dpp_cv(),
    "dpp_best": _dpp_cv(rule="best"),
    # the default ensemble's two combinations (issue 53): the mean of the members'
    # probabilities, and of their log-probabilities renormalised; one fit scored both ways
    # when both are asked for (:data:`VIEWS`)
    "dpp_proba": _dpp_cv(combine="proba"),
    "dpp_log_proba": _dpp_cv(combine="log_proba"),
    "dpp_mean": _dpp_cv(["mean"]),
    "dpp_max": _dpp_cv(["max"]),
    "dpp_gem": _dpp_cv(["gem"]),
    # selection rules: the simplest candidate within one s.e. of the best, and the best on
    # 2 x 3 repeated inner folds
    "dpp_1se": _dpp_cv(rule="one_se"),
    "dpp_repeated": _dpp_cv(cv="repeated", rule="best"),
    # the best score less the optimism of choosing its rounds on the same folds
    "dpp_corrected": _dpp_cv(rule="corrected"),
    # dpp's ensemble from three separate selections (the same to the bit); the paper's pooling
    # over 3 k-means seeds
    "dpp_ensemble": _ensemble(),
    "dpp_seeds": _ensemble(("mean",), seeds=3),
    "dpp_embedded_mean": _embedded("mean", dropout=0.0, weight_decay=_NETWORK_DECAY),
    "dpp_embedded_max": _embedded("max", dropout=0.0, weight_decay=_NETWORK_DECAY),
    # the remedies measured for the embedded DPP: dropout 0.5 after the embedding (the
    # networks' own), with each pooling, NetVLAD's normalisation before eq. (3), and a weight
    # decay on the embedding 10 and 40 times the networks'; dpp_embedded: the class's defaults
    "dpp_embedded": _embedded(),
    **{
        f"dpp_embedded_{name}": _embedded(pooling, **params, weight_decay=_NETWORK_DECAY)
        for name, pooling, params in (
            ("mean_dropout", "mean", {"dropout": 0.5}),
            ("max_dropout", "max", {"dropout": 0.5}),
            ("gem_dropout", "gem", {"dropout": 0.5}),
            ("max_dropout_normalized", "max", {"dropout": 0.5, "normalize": True}),
            ("gem_dropout_normalized", "gem", {"dropout": 0.5, "normalize": True}),
            ("max_dropout_p40", "max", {"dropout": 0.5, "patience": 40}),
        )
    },
    "dpp_embedded_wd_5e-2": _embedded("gem", dropout=0.5, weight_decay=5e-2),
    "dpp_embedded_wd_2e-1": _embedded("gem", dropout=0.5, weight_decay=2e-1),
    # both decays fitted, the better on the fit's own held-out part kept
    "dpp_embedded_wd_choice": _embedded_decays(),
    # a plain fit, no selection: the estimator's defaults (early stopping on 20 %, by folds on
    # small data), and rounds by tol alone (what the default did under 46 training sets)
    "dpp_plain": lambda k, seed: ESTIMATORS["dpp"](n_prototypes=k, random_state=seed),
    "dpp_plain_tol": lambda k, seed: ESTIMATORS["dpp"](
        n_prototypes=k, validation_fraction=0.0, random_state=seed
    ),
    "standard": lambda k, seed: DPPClassifierCV(
        ESTIMATORS["standard"](n_prototypes=k, random_state=seed), l2s=L2S, cv=3
    ),
    "pooling": lambda k, seed: ESTIMATORS["pooling"](random_state=seed),
    "bag_of_words": lambda k, seed: ESTIMATORS["bag_of_words"](n_prototypes=k, random_state=seed),
    "attention_mil": lambda k, seed: ESTIMATORS["attention_mil"](random_state=seed),
    "gated_mil": lambda k, seed: ESTIMATORS["attention_mil"](gated=True, random_state=seed),
    "deep_sets": lambda k, seed: ESTIMATORS["deep_sets"](random_state=seed),
    # the neural peers with a selection budget: learning rate x weight decay by inner CV
    "attention_mil_cv": lambda k, seed: SelectedNetwork(
        ESTIMATORS["attention_mil"](random_state=seed), seed
    ),
    "gated_mil_cv": lambda k, seed: SelectedNetwork(
        ESTIMATORS["attention_mil"](gated=True, random_state=seed), seed
    ),
    "deep_sets_cv": lambda k, seed: SelectedNetwork(
        ESTIMATORS["deep_sets"](random_state=seed), seed
    ),
}
#: Methods that are another method's fit predicted another way: ``name -> (that method, the
#: parameters that differ)``, parameters that act at prediction only. Where both are asked
#: for, the fit of the first is scored again under the second's parameters (the same fitted
#: members, so their paired difference is the combination's alone); alone, each is fitted.
VIEWS: dict[str, tuple[str, dict]] = {"dpp_log_proba": ("dpp_proba", {"combine": "log_proba"})}

#: The baselines DPP is measured against (the issue's target: at least the best of them).
BASELINES = (
    "standard", "pooling", "bag_of_words", "attention_mil", "gated_mil", "deep_sets",
    "attention_mil_cv", "gated_mil_cv", "deep_sets_cv",
)  # fmt: skip


def make_method(name: str, k: int, seed: int, n_jobs: int | None = None):
    """The unfitted estimator of ``name`` with ``K = k`` (where it has prototypes).

    ``n_jobs`` goes to a selection by :class:`~dpp.DPPClassifierCV` (its fits at once; the
    result does not depend on it).

    Raises:
        ValueError: a name not in :data:`METHODS`.
    """
    if name not in METHODS:
        raise ValueError(f"unknown method {name!r}; choose from {list(METHODS)}")
    estimator = METHODS[name](k, seed)
    if isinstance(estimator, DPPClassifierCV):
        estimator.set_params(n_jobs=n_jobs)
    if isinstance(estimator, SetEnsembleClassifier):
        for _, member in estimator.estimators:
            if isinstance(member, DPPClassifierCV):
                member.set_params(n_jobs=n_jobs)
    return estimator


def _selection(estimator) -> dict:
    """Where each method's selection landed, and its final fit's status."""
    if isinstance(estimator, DPPClassifierCV):
        report = estimator.best_estimator_.fit_report_
        members = getattr(estimator, "members_", None)
        if members is not None:  # an ensemble: each member's choice
            return {
                "position": estimator.best_position_,
                "beats_prior": estimator.beats_prior_,
                "status": report.status,
                "members": {
                    m["name"]: {
                        "l2": m["params"]["l2"],
                        "rounds": m["rounds"],
                        "status": estimator.best_estimator_.member_statuses_[m["name"]],
                    }
                    for m in members
                },  # fmt: skip
            }
        return {
            "l2": estimator.best_params_["l2"],
            "pooling": estimator.best_params_.get("pooling"),
            "rounds": estimator.best_rounds_,  # chosen by the inner CV (DPP), else None
            "position": estimator.best_position_,
            "beats_prior": estimator.beats_prior_,
            "status": report.status,
            "saturated_fraction": report.prototypes and report.prototypes.saturated_fraction,
        }
    if isinstance(estimator, SetEnsembleClassifier):
        members = {name: _selection(m) for name, m in estimator.named_estimators_.items()}
        return {
            "position": None,
            "status": estimator.fit_report_.status,
            "members": {
                name: {
                    k: v for k, v in chosen.items() if k in ("l2", "pooling", "rounds", "status")
                }  # fmt: skip
                for name, chosen in members.items()
            },
        }
    if isinstance(estimator, SelectedNetwork):
        chosen = estimator.search_.best_params_
        report = estimator.fit_report_
        return {
            "learning_rate": chosen["learning_rate"],
            "weight_decay": chosen["weight_decay"],
            "epochs": report.rounds,
            "position": None,
            "status": report.status,
        }
    report = estimator.fit_report_
    if report.selection is not None:  # the pooled logistic regressions
        return {"C": report.selection.C, "position": report.selection.position,
                "status": report.status}  # fmt: skip
    epochs = report.rounds if report.unit == "epoch" else None
    return {"epochs": epochs, "position": None, "status": report.status}


def run_task(
    name: str,
    folds: int = 5,
    seed: int = 0,
    methods=tuple(METHODS),
    log=print,
    on_record: Callable[[dict], None] | None = None,
    skip: frozenset = frozenset(),
    draws: int = 1,
    n_jobs: int | None = None,
    train_sets: int | None = None,
) -> list[dict]:
    """Every method on task ``name``, one record per (draw, fold, method).

    Args:
        name: a key of :data:`TASKS`.
        folds: outer folds of each draw (stratified, shuffled with ``seed + draw``).
        seed: seed of the folds and of every estimator (``seed + draw`` in draw ``draw``: the
            methods' own seeds vary with the data).
        methods: names from :data:`METHODS`.
        log: called with one line per fitted method.
        on_record: called with each record the moment its fit is scored (a run keeps it on
            disk then: :class:`dpp.experiment.reporting.Recorder`).
        skip: ``(draw, fold)`` units not to run (a resumed run's finished ones).
        draws: data draws (draw 0 is the task's original data).
        n_jobs: fits at once in each selection (:class:`~dpp.DPPClassifierCV`); the records do
            not depend on it.
        train_sets: fit on this many of each fold's training sets at most (a stratified draw,
            :func:`cut_training`): small data; ``None``: all of them.

    Returns:
        Records with ``task``, ``draw``, ``fold``, ``method``, the metrics of
        :func:`dpp.metrics.evaluate` on the held-out fold, ``fit_seconds`` and the selection.

    Raises:
        KeyError: an unknown task.
    """
    loader, k, _ = TASKS[name]
    records = []
    for draw, fold, dataset, train, test in _outer_folds(loader, folds, seed, draws):
        release_compiled_programs()  # a long run never reaches the kernel's mapping limit
        if (draw, fold) in skip:
            continue
        sets = dataset.sets
        labels = np.asarray(sets.labels)
        if train_sets is not None:
            train = cut_training(train, labels, train_sets, seed + DRAW_STRIDE * draw + fold)
        fitted_sets, test_sets = sets.subset(train), sets.subset(test)
        done: dict[str, tuple] = {}  # method -> (fitted estimator, seconds) in this unit
        for method in methods:
            source, changed = VIEWS.get(method, (None, {}))
            if source in done:  # the same fit, predicted under ``changed``
                estimator, seconds = rescored(done[source][0], changed), done[source][1]
            else:
                estimator = make_method(method, k, seed + draw, n_jobs)
                t0 = time.perf_counter()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", FitWarning)  # statuses are recorded below
                    estimator.fit(fitted_sets)
                seconds = time.perf_counter() - t0
            done[method] = estimator, seconds
            metrics = evaluate(estimator.predict_log_proba(test_sets), labels[test])
            record = {"task": name, "draw": draw, "fold": fold, "method": method, **metrics}
            record.update(fit_seconds=seconds, **_selection(estimator))
            if dataset.instance_labels is not None:
                witnesses = membership_rows(dataset.instance_labels, sets, test)
                record.update(instance_metrics(estimator, test_sets, labels[test], witnesses))
                if (draw, fold) == (0, 0) and "test_sets" in dataset.info:  # evidence_figure
                    record.update(_example(estimator, sets, labels, test))
            records.append(record)
            if on_record is not None:
                on_record(record)
            where = f"{name} draw {draw} fold {fold}" if draws > 1 else f"{name} fold {fold}"
            log(
                f"{where} {method:<12} accuracy {100 * metrics['accuracy']:.1f}%  "
                f"log-lik {metrics['test_log_likelihood']:.3f}  {seconds:.1f} s  "
                f"({selection_note(record)})"
            )
    return records


def rescored(fitted, params: dict):
    """A copy of the fitted ``fitted`` with ``params`` set, on its refitted model too.

    For parameters that act at prediction only (:data:`VIEWS`: an ensemble's ``combine``):
    a :class:`~dpp.DPPClassifierCV`'s are set on it and on its ``best_estimator_``.
    """
    copy = deepcopy(fitted)
    copy.set_params(**params)
    best = getattr(copy, "best_estimator_", None)
    if best is not None and set(params) <= set(best.get_params(deep=False)):
        best.set_params(**params)
    return copy


def cut_training(train: np.ndarray, labels: np.ndarray, size: int, seed: int) -> np.ndarray:
    """Sorted indices of ``size`` of the training sets ``train`` (all of them if fewer).

    Stratified on the label's argmax where every class of ``train`` has two sets, else a plain
    draw (:func:`sklearn.model_selection.train_test_split`, ``random_state=seed``).

    Args:
        train: ``[N]`` indices of a fold's training sets.
        labels: ``[M, C]`` labels of every set of the task.
        size: training sets kept (>= 2).
        seed: random state of the draw.

    Returns:
        ``[min(size, N)]`` sorted indices, a subset of ``train``.
    """
    train = np.asarray(train)
    if size >= train.size:
        return train
    strata = np.asarray(labels)[train].argmax(1)
    counts = np.bincount(strata)
    enough = counts[counts > 0].min() >= 2 and size >= np.sum(counts > 0)
    kept, _ = train_test_split(
        train, train_size=size, random_state=seed, stratify=strata if enough else None
    )
    return np.sort(kept)


def _outer_folds(loader, folds: int, seed: int, draws: int = 1):
    """``(draw, fold, dataset, train, test)`` of each outer fold of each draw of a task.

    Stratified folds of each draw (shuffled with ``seed + draw``); a task with a fixed split
    (``test_sets`` in its info: the digit bags, whose test bags hold held-out images) instead
    draws anew for every fold (draw ``DRAW_STRIDE * draw + fold`` of its loader) and uses that
    split.
    """
    for draw in range(draws):
        dataset = loader(draw)
        if "test_sets" in dataset.info:
            for fold in range(folds):
                fresh = loader(DRAW_STRIDE * draw + fold)
                train, test = (np.asarray(fresh.info[k]) for k in ("train_sets", "test_sets"))
                yield draw, fold, fresh, train, test
            continue
        labels = np.asarray(dataset.sets.labels).argmax(1)
        splitter = StratifiedKFold(folds, shuffle=True, random_state=seed + draw)
        for fold, (train, test) in enumerate(splitter.split(np.zeros(labels.size), labels)):
            yield draw, fold, dataset, train, test


def membership_rows(values: np.ndarray, sets, indices: np.ndarray) -> np.ndarray:
    """``values`` (one per membership of ``sets``) of the sets ``indices``, in subset order."""
    sizes = sets.set_sizes()
    starts = np.cumsum(sizes) - sizes
    counts = sizes[indices]
    offsets = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
    return np.asarray(values)[np.repeat(starts[indices], counts) + offsets]


def instance_metrics(estimator, sets, labels: np.ndarray, witnesses: np.ndarray) -> dict:
    """How well a fitted estimator's per-vector evidence finds the witnesses of held-out sets.

    The evidence of a vector is its contribution to the log-odds of the positive class (the
    last), ``instance_scores[:, -1] - instance_scores[:, 0]`` (:meth:`instance_scores`).

    Returns:
        ``instance_auc`` (ROC AUC of the evidence against the vectors' witness labels, over
        every held-out vector) and ``top_witness`` (the share of positive sets whose
        highest-evidence vector is a witness); for attention MIL also ``attention_auc`` and
        ``attention_top_witness`` (the same for its attention weights), and ``proba_instance_auc``
        and ``proba_top_witness`` for the positive class's probability of each vector alone
        (:meth:`instance_proba`). Empty for an estimator
        without :meth:`instance_scores`, or with one class of vectors; without ``instance_auc``
        for one that refuses it (an ensemble of probabilities).
    """
    from sklearn.metrics import roc_auc_score

    if not hasattr(estimator, "instance_scores") or len(np.unique(witnesses)) < 2:
        return {}
    positive = labels.argmax(1) == labels.shape[1] - 1
    out, readings = {}, {}
    try:
        readings[""] = [s[:, -1] - s[:, 0] for s in estimator.instance_scores(sets)]
    except NotImplementedError:  # a mean of probabilities: no per-vector decomposition
        pass
    if hasattr(estimator, "attention_weights"):
        readings["attention_"] = estimator.attention_weights(sets)
    if hasattr(estimator, "instance_proba"):  # each vector alone (mi-Net's instance classifier)
        readings["proba_"] = [p[:, -1] for p in estimator.instance_proba(sets)]
    sizes = sets.set_sizes()
    ids = np.repeat(np.arange(sizes.size), sizes)
    for prefix, per_set in readings.items():
        evidence = np.concatenate(per_set)
        # each set's highest-evidence vector (the first at ties, as argmax): sorted by set, then
        # by decreasing evidence, a set's first row is its top
        top = np.lexsort((-evidence, ids))[np.cumsum(sizes) - sizes]
        hits = witnesses[top] == 1
        out[f"{prefix}instance_auc"] = float(roc_auc_score(witnesses, evidence))
        out[f"{prefix}top_witness"] = float(hits[positive].mean()) if positive.any() else None
    return out


def _example(estimator, sets, labels: np.ndarray, test: np.ndarray) -> dict:
    """The first positive test set's index and its vectors' evidence (and attention)."""
    if not hasattr(estimator, "instance_scores"):
        return {}
    chosen = test[labels[test].argmax(1) == labels.shape[1] - 1][:1]
    if chosen.size == 0:
        return {}
    example = sets.subset(chosen)
    try:
        scores = estimator.instance_scores(example)[0]
    except NotImplementedError:  # an ensemble of probabilities: no per-vector evidence
        return {}
    out = {
        "example_set": int(chosen[0]),
        "example_evidence": (scores[:, -1] - scores[:, 0]).tolist(),
    }
    if hasattr(estimator, "attention_weights"):
        out["example_attention"] = estimator.attention_weights(example)[0].tolist()
    return out


#: Images of a bag drawn by :func:`evidence_figure` at most.
MAX_DRAWN = 16


def evidence_figure(records: list[dict], path: Path) -> Path | None:
    """A positive digit bag of each digit-bag task, every image framed by its evidence (PNG).

    One row per method with per-vector evidence (``instance_scores``, the positive class's
    log-odds contribution; red for, blue against, scaled per row) and one for attention MIL's
    attention weights (darker: more weight); the target digit's images are marked. A bag of
    more than :data:`MAX_DRAWN` images shows its witnesses, then its first other images.
    ``None`` when no record holds an example.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib import colormaps

    from dpp.experiment.plots import save_figure

    rows = []  # (task, label, values)
    bags = {}  # task -> (images [m, 8, 8], witness [m], drawn [m'] positions in the bag)
    for record in records:
        if record.get("example_evidence") is None or _unit(record)[1:] != (0, 0):
            continue
        task, method = record["task"], record["method"]
        if task not in bags:
            data = TASKS[task][0](0)  # draw 0, fold 0 (_outer_folds)
            index = np.array([record["example_set"]])
            member = membership_rows(np.arange(data.sets.num_memberships), data.sets, index)
            witness = data.instance_labels[member] == 1
            drawn = np.sort(np.argsort(~witness, kind="stable")[:MAX_DRAWN])
            images = np.asarray(data.sets.vectors)[member].reshape(-1, 8, 8)
            bags[task] = (images, witness, drawn)
        rows.append((task, f"{method}: evidence", record["example_evidence"]))
        if record.get("example_attention") is not None:
            rows.append((task, f"{method}: attention", record["example_attention"]))
    if not rows:
        return None
    width = max(drawn.size for _, _, drawn in bags.values())
    fig, axes = plt.subplots(
        len(rows), width, figsize=(0.7 * width + 1.5, 0.85 * len(rows) + 0.6), squeeze=False
    )
    for axis_row, (task, label, values) in zip(axes, rows, strict=True):
        images, witness, drawn = bags[task]
        values = np.asarray(values, float)
        attention = label.endswith("attention")
        scale = float(np.max(np.abs(values))) or 1.0
        for j, ax in enumerate(axis_row):
            ax.set_xticks([]), ax.set_yticks([])
            if j >= drawn.size:
                ax.axis("off")
                continue
            i = drawn[j]
            if attention:
                colour = colormaps["Greens"](0.25 + 0.75 * values[i] / scale)
            else:
                colour = colormaps["RdBu_r"](0.5 + 0.5 * values[i] / scale)
            ax.imshow(images[i], cmap="gray_r")
            for spine in ax.spines.values():
                spine.set_edgecolor(colour), spine.set_linewidth(4)
            ax.set_title(f"{values[i]:.2f}" if attention else f"{values[i]:+.2f}", fontsize=6)
            if witness[i]:
                ax.set_xlabel("target", fontsize=6, color="black")
        axis_row[0].set_ylabel(f"{task}\n{label}", fontsize=6, rotation=0, ha="right", va="center")
    fig.suptitle(
        "Which images decided: a positive test bag (frame: red for, blue against)", fontsize=8
    )
    fig.tight_layout()
    return save_figure(fig, path)


def selection_note(record: dict) -> str:
    """``status, l2 interior`` (or ``C ...``, ``N epochs``): what the fit chose, its status."""
    status = record.get("status")
    if record.get("position") is None:
        chosen = f"{record['epochs']} epochs" if record.get("epochs") is not None else ""
    else:
        chosen = f"{'l2' if 'l2' in record else 'C'} {record['position']}"
    if record.get("pooling"):
        chosen += f", {record['pooling']} pooling"
    if record.get("members"):  # an ensemble: each member's status
        chosen = "members " + ", ".join(
            f"{name} {m.get('status')}" for name, m in record["members"].items()
        )
    return ", ".join(part for part in (status, chosen) if part)


def _cell(values: np.ndarray, factor: float, digits: int) -> str:
    """``mean ± 2 s.e.`` of fold values (± 0 for one fold)."""
    values = factor * np.asarray(values, float)
    se = values.std(ddof=1) / np.sqrt(len(values)) if len(values) > 1 else 0.0
    return f"{values.mean():.{digits}f} ± {2 * se:.{digits}f}"


def summary_table(records: list[dict]) -> str:
    """Markdown: one row per method, one column per task (mean ± 2 s.e. over the folds).

    Each cell is the accuracy (%), the test log-likelihood per set and the fit seconds of an
    outer fold (selection included). Then, per task, whether DPP with ``DPPClassifierCV``'s
    defaults is at least as accurate as the best baseline (:data:`BASELINES`), and where the
    selections landed.
    """
    frame = pd.DataFrame(records)
    tasks = list(dict.fromkeys(frame.task))
    methods = [m for m in METHODS if m in set(frame.method)]
    lines = [
        "| method | " + " | ".join(tasks) + " |",
        "|---|" + "---|" * len(tasks),
    ]
    means: dict[tuple[str, str], float] = {}
    for method in methods:
        cells = []
        for task in tasks:
            part = frame[(frame.task == task) & (frame.method == method)]
            if part.empty:
                cells.append("-")
                continue
            means[task, method] = 100 * part.accuracy.mean()
            cells.append(
                f"{_cell(part.accuracy, 100, 1)} / {_cell(part.test_log_likelihood, 1, 3)} / "
                f"{part.fit_seconds.mean():.1f} s"
            )
        lines.append(f"| {method} | " + " | ".join(cells) + " |")
    kinds = ", ".join(f"{t}: {TASKS[t][2]}" for t in tasks if t in TASKS)
    lines += [
        "",
        "Accuracy (%) / test log-likelihood per set / seconds a fold (selection and refit), mean "
        "± 2 standard errors over the outer folds (of every draw). What the label depends on: "
        + kinds
        + ".",
        "",
    ]
    lines += _verdicts(means, methods, tasks)
    lines += instance_table(frame, tasks, methods)
    lines += _paired_table(records, frame, methods, tasks)
    lines += _landings(frame)
    return "\n".join(lines) + "\n"


def _verdicts(means: dict, methods: list[str], tasks: list[str]) -> list[str]:
    """Per task: whether DPP (``DPPClassifierCV()``'s defaults) beats the best baseline."""
    if "dpp" not in methods:
        return []
    lines = [
        "Is DPP (`DPPClassifierCV()`'s defaults) at least as accurate as the best baseline?",
        "",
    ]
    for task in tasks:
        present = [b for b in BASELINES if (task, b) in means]
        if (task, "dpp") not in means or not present:
            continue
        best = max(present, key=lambda b: means[task, b])
        diff = means[task, "dpp"] - means[task, best]
        verdict = "yes" if diff >= 0 else "NO"
        lines.append(f"- {task}: DPP {means[task, 'dpp']:.1f} % against {best} "
                     f"{means[task, best]:.1f} % ({diff:+.1f} points): {verdict}")  # fmt: skip
    return lines


def _paired_table(records: list[dict], frame, methods: list[str], tasks: list[str]) -> list[str]:
    """Every method's paired accuracy difference against the reference, per task family."""
    reference = next((m for m in ("dpp_mean", "dpp") if m in methods), None)
    others = [m for m in methods if m != reference]
    if reference is None or not others or len(frame[frame.method == reference]) <= 1:
        return []
    lines = [
        "",
        f"Paired differences against {reference}, accuracy (points): mean ± s.e. over the "
        "(task, draw, fold) units both finished (wins/ties/losses, Wilcoxon signed-rank p); "
        "`python scripts/suite.py --compare A B` gives any pair, per task family.",
        "",
    ]
    families = list(dict.fromkeys(TASKS[t][2] for t in tasks if t in TASKS))
    lines += ["| method | all | " + " | ".join(families) + " |",
              "|---|---|" + "---|" * len(families)]  # fmt: skip
    for method in others:
        d = paired_differences(records, method, reference)
        cells = [_difference_cell(d, 100.0)] + [
            _difference_cell(d["families"][f], 100.0) if f in d["families"] else "-"
            for f in families
        ]
        lines.append(f"| {method} | " + " | ".join(cells) + " |")
    return lines


def _landings(frame: pd.DataFrame) -> list[str]:
    """Where the selections landed, the final statuses, and DPP's chosen poolings and rounds."""
    lines: list[str] = []
    selected = frame[frame.position.notna()] if "position" in frame else frame.iloc[:0]
    positions = selected.groupby(["method", "position"]).size().to_dict()
    statuses = frame[frame.status.notna()].groupby(["method", "status"]).size().to_dict()
    lines += [
        "",
        "Where the selections landed (fits): "
        + ", ".join(f"{m} {p}: {n}" for (m, p), n in positions.items()),
        "",
        "Final fit statuses: " + ", ".join(f"{m} {s}: {n}" for (m, s), n in statuses.items()),
    ]
    if "pooling" in frame and frame[frame.method == "dpp"].pooling.notna().any():
        chosen = frame[frame.method == "dpp"].groupby(["task", "pooling"]).size().to_dict()
        lines += ["", "DPP's pooling chosen by the inner CV (folds): "
                  + ", ".join(f"{t} {p}: {n}" for (t, p), n in chosen.items())]  # fmt: skip
    if "rounds" in frame and frame[frame.method == "dpp"].rounds.notna().any():
        rounds = frame[frame.method == "dpp"].rounds.dropna().astype(int).value_counts()
        lines += ["", "DPP rounds chosen by the inner CV (fits): "
                  + ", ".join(f"{r}: {n}" for r, n in sorted(rounds.items()))]  # fmt: skip
    return lines


def paired_differences(records: list[dict], a: str, b: str, metric: str = "accuracy") -> dict:
    """Method ``a`` minus method ``b`` over the units (task, draw, fold) both finished.

    The figure that decides defaults: a gain is a gain only where its mean difference stands
    out of its standard error and no family of tasks loses significantly.

    Args:
        records: suite records; records of several runs carry a ``run`` field (the runs of
            ``scripts/suite.py --compare`` with several ``--out`` folders), and a unit is then
            one (run, task, draw, fold): differences pair records of one run only.
        a: a method name.
        b: another method name.
        metric: a record metric (``accuracy``, ``test_log_likelihood``, ...).

    Returns:
        ``{"units", "mean", "se", "wins", "ties", "losses", "p", "families"}``: the mean
        difference and its standard error over the paired units, the counts of units where
        ``a`` is above, level with or below ``b``, the two-sided Wilcoxon signed-rank p-value
        (scipy; ``None`` when every difference is 0 or fewer than 2 units) and the same per
        task family (:data:`TASKS`' third field). ``units`` 0 when no unit has both.
    """
    from scipy.stats import wilcoxon

    frame = pd.DataFrame(records)
    if "draw" not in frame:
        frame["draw"] = 0
    frame["draw"] = frame["draw"].fillna(0).astype(int)
    keys = ["task", "draw", "fold"] + (["run"] if "run" in frame else [])
    pairs = (
        frame[frame.method == a][[*keys, metric]]
        .merge(frame[frame.method == b][[*keys, metric]], on=keys, suffixes=("_a", "_b"))
        .dropna()
    )

    def summary(part: pd.DataFrame) -> dict:
        diff = (part[f"{metric}_a"] - part[f"{metric}_b"]).to_numpy(float)
        n = diff.size
        out = {"units": int(n), "mean": float(diff.mean()) if n else None}
        out["se"] = float(diff.std(ddof=1) / np.sqrt(n)) if n > 1 else None
        out.update(wins=int((diff > 0).sum()), ties=int((diff == 0).sum()),
                   losses=int((diff < 0).sum()))  # fmt: skip
        out["p"] = float(wilcoxon(diff).pvalue) if n > 1 and np.any(diff != 0) else None
        return out

    result = summary(pairs)
    family = pairs.task.map(lambda t: TASKS[t][2] if t in TASKS else t)
    result["families"] = {f: summary(pairs[family == f]) for f in dict.fromkeys(family)}
    return result


#: The significance level of the default's rule: a rule worse than the paper's mean pooling on
#: a task family at this Wilcoxon p is not shipped.
ALPHA = 0.05


def decide(records: list[dict], candidates, reference: str = "dpp_mean") -> dict:
    """The default selection rule by the issue's criterion, from suite records.

    Among ``candidates`` measured against ``reference`` (the paper's mean pooling) on paired
    units, the one with the largest mean accuracy difference that is significantly worse
    (Wilcoxon p < :data:`ALPHA` with a negative mean) on no task family.

    Returns:
        ``{"reference", "rows": {candidate: paired_differences(...) | {"eligible": bool,
        "worse_on": [families]}}, "chosen": name or None}``; a candidate with no paired
        unit is left out.
    """
    rows = {}
    for name in candidates:
        d = paired_differences(records, name, reference)
        if not d["units"]:
            continue
        worse = [
            f for f, part in d["families"].items()
            if part["p"] is not None and part["p"] < ALPHA and part["mean"] < 0
        ]  # fmt: skip
        rows[name] = {**d, "eligible": not worse, "worse_on": worse}
    eligible = [n for n, r in rows.items() if r["eligible"]]
    chosen = max(eligible, key=lambda n: rows[n]["mean"], default=None)
    return {"reference": reference, "rows": rows, "chosen": chosen}


def decision_table(records: list[dict], candidates, reference: str = "dpp_mean") -> str:
    """Markdown of :func:`decide`: each candidate against ``reference``, per family, chosen."""
    result = decide(records, candidates, reference)
    families = list(dict.fromkeys(f for row in result["rows"].values() for f in row["families"]))
    lines = [
        f"Accuracy difference against {reference} (points): mean ± s.e. over the paired units "
        "(wins/ties/losses, Wilcoxon p); eligible: significantly worse (p < "
        f"{ALPHA}) on no family",
        "",
        "| rule | all | " + " | ".join(families) + " | eligible |",
        "|---|---|" + "---|" * len(families) + "---|",
    ]
    for name, row in result["rows"].items():
        cells = [f"{_difference_cell(row, 100.0)} [{row['units']}]"] + [
            _difference_cell(row["families"][f], 100.0) if f in row["families"] else "-"
            for f in families
        ]
        verdict = "yes" if row["eligible"] else "no: worse on " + ", ".join(row["worse_on"])
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {verdict} |")
    lines += ["", f"Chosen: {result['chosen']}"]
    return "\n".join(lines) + "\n"


def peer_table(records: list[dict], method: str, peers) -> str:
    """Markdown: per task, ``method`` against the best of ``peers`` on the units all ran.

    A unit (task, draw, fold) counts for a task when ``method`` and every peer with records on
    that task finished it, in any of the runs (task means, not paired differences: the same
    data and folds in every run; a method's first record of a unit is kept). The last line
    counts the tasks where ``method``'s mean accuracy is at least the best peer's.
    """
    frame = pd.DataFrame(records)
    if "draw" not in frame:
        frame["draw"] = 0
    keys = ["task", "draw", "fold"]
    frame = frame.drop_duplicates([*keys, "method"])
    lines = [
        f"| task | units | {method} | best of {', '.join(peers)} | difference |",
        "|---|---|---|---|---|",
    ]
    met = total = 0
    for task, part in frame.groupby("task", sort=False):
        present = [m for m in peers if (part.method == m).any()]
        if not present or not (part.method == method).any():
            continue
        units = None
        for m in [method, *present]:
            done = set(map(tuple, part[part.method == m][keys].to_numpy()))
            units = done if units is None else units & done
        if not units:
            continue
        rows = part[[tuple(r) in units for r in part[keys].to_numpy()]]
        means = 100 * rows.groupby("method").accuracy.mean()
        best = max(present, key=lambda m: means[m])
        diff = means[method] - means[best]
        met += bool(diff >= 0)
        total += 1
        lines.append(f"| {task} | {len(units)} | {means[method]:.1f} | {best} {means[best]:.1f} | "
                     f"{diff:+.1f} |")  # fmt: skip
    lines += ["", f"{method} at least as accurate as the best peer on {met} of {total} tasks."]
    return "\n".join(lines) + "\n"


def _difference_cell(d: dict, scale: float, digits: int = 2) -> str:
    if not d["units"]:
        return "-"
    se = f" ± {scale * d['se']:.{digits}f}" if d["se"] is not None else ""
    p = f", p = {d['p']:.2g}" if d["p"] is not None else ""
    return f"{scale * d['mean']:+.{digits}f}{se} ({d['wins']}/{d['ties']}/{d['losses']}{p})"


def compare_table(records: list[dict], a: str, b: str, metric: str = "accuracy") -> str:
    """Markdown: ``a - b`` over the paired units and per family (:func:`paired_differences`)."""
    d = paired_differences(records, a, b, metric)
    scale, unit, digits = (100.0, "points", 2) if metric == "accuracy" else (1.0, "raw units", 3)
    if metric == "test_log_likelihood":
        unit = "nats per set"
    lines = [
        f"{a} - {b}, {metric} ({unit}): mean difference ± s.e. over the paired (task, draw, fold) "
        "units (wins/ties/losses of the first, Wilcoxon signed-rank p)",
        "",
        "| units | difference |",
        "|---|---|",
        f"| all ({d['units']}) | {_difference_cell(d, scale, digits)} |",
    ]
    for family, part in d["families"].items():
        lines.append(f"| {family} ({part['units']}) | {_difference_cell(part, scale, digits)} |")
    return "\n".join(lines) + "\n"


def instance_table(frame: pd.DataFrame, tasks: list, methods: list) -> list[str]:
    """Markdown lines: instance AUC and top-witness share per method on the witness tasks."""
    if "instance_auc" not in frame or frame.instance_auc.isna().all():
        return []
    tasks = [t for t in tasks if frame[frame.task == t].instance_auc.notna().any()]
    lines = [
        "",
        "Which vectors decided: instance AUC of each vector's evidence (its contribution to the "
        "positive class's log-odds, `instance_scores`) against the witness labels of the "
        "held-out vectors / share of positive sets whose top vector is a witness, mean ± 2 s.e. "
        "over the outer folds; attention MIL's attention weights, and each vector's positive "
        "probability as a set of its own (`instance_proba`), on their own rows.",
        "",
        "| method | " + " | ".join(tasks) + " |",
        "|---|" + "---|" * len(tasks),
    ]
    readings = [(m, "") for m in methods]
    for prefix in ("attention_", "proba_"):
        if f"{prefix}instance_auc" in frame:
            read = set(frame[frame[f"{prefix}instance_auc"].notna()].method)
            readings += [(m, prefix) for m in methods if m in read]
    for method, prefix in readings:
        cells = []
        for task in tasks:
            part = frame[(frame.task == task) & (frame.method == method)]
            auc, top = part[f"{prefix}instance_auc"].dropna(), part[f"{prefix}top_witness"].dropna()
            cells.append(f"{_cell(auc, 1, 3)} / {_cell(top, 1, 2)}" if len(auc) else "-")
        if any(c != "-" for c in cells):
            label = {"": "", "attention_": " (attention weights)", "proba_": " (instance_proba)"}
            name = f"{method}{label[prefix]}"
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines


def check_suite(tasks, methods, folds: int, draws: int = 1) -> None:
    """Refuses unknown tasks or methods, fewer than 2 folds or 1 draw, naming the ``suite`` key.

    Raises:
        ConfigError: naming the key, the value and the choices.
    """
    for key, values, known in (("suite.tasks", tasks, TASKS), ("suite.methods", methods, METHODS)):
        unknown = [v for v in values if v not in known] if values else ["(none)"]
        if unknown:
            raise ConfigError(f"{key}: unknown {unknown}; choose from {list(known)}")
    if int(folds) < 2:
        raise ConfigError(f"suite.folds must be >= 2, got {folds}")
    if int(draws) < 1:
        raise ConfigError(f"suite.draws must be >= 1, got {draws}")


def run_suite(
    out: Path,
    tasks=tuple(TASKS),
    folds: int = 5,
    seed: int = 0,
    methods=tuple(METHODS),
    resume: bool = False,
    log=print,
    on_accepted: Callable[[], None] | None = None,
    draws: int = 1,
    n_jobs: int | None = None,
    train_sets: int | None = None,
) -> dict:
    """Runs the suite into ``out``: ``suite.json``, ``suite.csv``, ``suite.md``, ``suite.png``.

    The experiments' record loop (:class:`dpp.experiment.reporting.Recorder`): the files are
    rewritten after every fit, with ``status`` ``running``; at the end it is ``complete``, or
    ``failed``/``interrupted`` with the error, keeping every finished fit. ``suite.json`` holds
    the process's pid, host and start time and ``heartbeat.json`` is refreshed while it lives,
    so a ``running`` left by a killed process can be told apart. With ``resume`` the outer
    folds of a task that every method finished are kept
    (:func:`~dpp.experiment.reporting.finished_units`, as the experiments keep their trials)
    and the others run; a complete run that holds every task asked for is left as it is, and
    one line says so.

    Args:
        out: the run directory.
        tasks: names from :data:`TASKS`.
        folds: outer folds per task and draw.
        seed: seed of the folds and the estimators (``seed + draw`` in each draw).
        methods: names from :data:`METHODS`.
        resume: continue the suite recorded in ``out``.
        log: called with one line per fitted method.
        on_accepted: called once the folder is accepted, before anything is written (the
            CLI releases its log file and writes the config then).
        draws: data draws of every task (draw 0: each task's original data); a unit of the
            paired comparisons is one (task, draw, fold).
        n_jobs: fits at once in each selection (``DPPClassifierCV(n_jobs)``: ``None`` or 1 one
            at a time, -1 every core); not part of the run's identity (the records do not
            depend on it), so a resume may change it.
        train_sets: fit on this many of each fold's training sets at most (``None``: all);
            part of the run's identity (``train_sets`` in ``suite.json``).

    Returns:
        The content of ``suite.json``.

    Raises:
        ConfigError: unknown tasks or methods, fewer than 2 folds, a folder that holds a suite
            run without ``resume``, or one recorded with other ``folds``, ``seed`` or
            ``methods`` or by an older version.
    """
    tasks, methods = list(tasks), list(methods)
    check_suite(tasks, methods, folds, draws)
    out = Path(out)
    path = out / "suite.json"
    header = {"experiment": "suite", "tasks": tasks, "folds": int(folds), "seed": int(seed)}
    header["methods"] = methods
    header["draws"] = int(draws)
    if train_sets is not None:  # absent from the runs on every training set
        header["train_sets"] = int(train_sets)
    previous = _previous(path, header, resume)
    records = [] if previous is None else _kept_records(previous, header)
    done = {_unit(r) for r in records}
    units = [(d, f) for d in range(int(draws)) for f in range(int(folds))]
    every = {(t, d, f) for t in header["tasks"] for d, f in units}
    if previous is not None and previous.get("status") == "complete" and done >= every:
        tasks_done = len({t for t, _, _ in done})
        log(f"{out} is complete ({tasks_done} tasks recorded): nothing to resume, nothing changed")
        return previous
    out.mkdir(parents=True, exist_ok=True)
    if on_accepted is not None:
        on_accepted()
    header.update(process_identity())  # with heartbeat.json: a killed run's "running" is stale

    def write(records: list[dict], status: str, **extra) -> dict:
        results = {**header, "status": status, **extra, "records": records}
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(results, indent=1, default=float))
        tmp.replace(path)  # atomic: a kill never leaves half a file
        if records:
            pd.DataFrame(records).to_csv(out / "suite.csv", index=False)
            (out / "suite.md").write_text("# Suite of set tasks\n\n" + summary_table(records))
        return results

    with Recorder(out, write, records) as recorder:
        for task in header["tasks"]:
            finished = frozenset((d, f) for t, d, f in done if t == task)
            if len(finished) == int(folds) * int(draws):
                log(f"{task}: kept from the earlier run")
                continue
            if finished:
                log(
                    f"{task}: outer folds (draw, fold) {sorted(finished)} kept from the earlier run"
                )
            run_task(
                task, folds, seed, methods, log, recorder.keep, finished, int(draws), n_jobs,
                train_sets,
            )  # fmt: skip
        recorder.records.sort(
            key=lambda r: (
                header["tasks"].index(r["task"]),
                *_unit(r)[1:],
                methods.index(r["method"]),
            )
        )
        return recorder.finish(then=lambda _: _figures(recorder.records, out))


def _figures(records: list[dict], out: Path) -> None:
    """``suite.png`` and, with digit-bag tasks, ``evidence.png``."""
    suite_figure(records, out / "suite.png")
    evidence_figure(records, out / "evidence.png")


def _previous(path: Path, header: dict, resume: bool) -> dict | None:
    """The suite run recorded at ``path`` (``None`` without one), checked against ``header``.

    ``header["tasks"]`` then lists the earlier run's tasks first.

    Raises:
        ConfigError: a run there without ``resume``, an older format, or other ``folds``,
            ``seed`` or ``methods``.
    """
    if not path.is_file():
        return None
    previous = json.loads(path.read_text())
    if not resume:
        raise ConfigError(
            f"{path.parent} already holds a suite run; pass resume=true (scripts/suite.py: "
            "--resume) to continue it"
        )
    if not isinstance(previous, dict) or "records" not in previous:
        raise ConfigError(f"{path} is not a suite run this version can continue")
    recorded = {"draws": 1, **previous}  # a run from before draws had one
    keys = ("folds", "seed", "methods", "draws", "train_sets")
    mismatch = [k for k in keys if recorded.get(k) != header.get(k)]
    if mismatch:
        raise ConfigError(f"{path} was run with other {mismatch}; use a new folder")
    header["tasks"] = list(dict.fromkeys([*previous["tasks"], *header["tasks"]]))
    return previous


def _kept_records(previous: dict, header: dict) -> list[dict]:
    """The earlier run's records of the outer folds every method finished (all its tasks)."""
    return finished_units(previous["records"], _unit, header["methods"])


def _unit(record: dict) -> tuple[str, int, int]:
    """``(task, draw, fold)``: one unit of the suite (a record before draws had draw 0)."""
    return record["task"], int(record.get("draw", 0)), int(record["fold"])


def suite_figure(records: list[dict], path: Path) -> Path:
    """Accuracy per task and method, mean ± 2 standard errors over the outer folds (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from dpp.experiment.plots import save_figure

    frame = pd.DataFrame(records)
    tasks = list(dict.fromkeys(frame.task))
    methods = [m for m in METHODS if m in set(frame.method)]
    fig, ax = plt.subplots(figsize=(0.25 * len(methods) * len(tasks) + 2, 4.2))
    width = 0.8 / len(methods)
    for i, method in enumerate(methods):
        stats = frame[frame.method == method].groupby("task", sort=False).accuracy
        mean = 100 * stats.mean().reindex(tasks)
        se = 100 * (stats.std(ddof=1) / np.sqrt(stats.count())).reindex(tasks).fillna(0)
        x = np.arange(len(tasks)) + (i - (len(methods) - 1) / 2) * width
        ax.bar(x, mean, width, yerr=2 * se, capsize=2, label=method)
    ax.set_xticks(np.arange(len(tasks)), tasks, rotation=15)
    ax.set_ylabel("test accuracy (%)")
    ax.set_ylim(max(0, float(100 * frame.accuracy.min()) - 10), 101)
    ax.set_title("Suite of set tasks: mean ± 2 s.e. over outer folds")
    ax.legend(fontsize=7, ncols=min(len(methods), 4), loc="lower right")
    fig.tight_layout()
    return save_figure(fig, path)
