"""The benchmark's methods: configured estimators by name, and what each fit chose.

Only what is alive is registered; the records of the methods removed stay readable as data
(``benchmarks/README.md`` names the commit that last had each).

* ``dpp_ensemble_embedded_own_seeds_avg50_widened``: :class:`~dpp.DPPClassifierCV`'s default
  ensemble as the benchmark runs it (its name is what its records carry): a member for each
  pooling (mean, max, gem: ``l2`` and the rounds by inner CV) and one on
  :class:`~dpp.EmbeddedDPPClassifier`'s own settings over three seeds, every member kept, on 3
  inner folds at the task's ``K``;
* ``dpp_mean`` (the paper's pooling, eq. 2), ``dpp_max``, ``dpp_gem``: its raw-vector members
  alone (one pooling each); ``dpp_embedded_widened``: its embedded member alone, one seed;
* ``dpp_mean_mu_path``: ``dpp_mean`` with a Gaussian prior on the prototypes around their
  k-means start, its scale chosen by the selection among :data:`MU_PRIOR_SCALES`
  (``DPPClassifierCV(mu_prior_scales=...)``), and ``<default>_mu_path`` the default with it in
  each raw member (issue 80);
* ``dpp_raw`` and ``dpp_raw_mu_path``: the raw-vector members together, as
  ``DPPClassifierCV(**RAW_VECTORS)`` fits them (the paper's model as a user selects it), without
  and with that path;
* ``dpp_plain``: the paper's model alone, :class:`~dpp.DPPClassifier` with its defaults and no
  selection;
* ``standard``: the same selection over the standard prototype (k-means codes);
* ``pooling`` and ``bag_of_words``: :mod:`dpp.estimators.pooled` (their own ``C`` by CV);
* the neural peers of :mod:`dpp.estimators.neural`: ``attention_mil`` and ``gated_mil``
  (Ilse et al. 2018) and ``deep_sets`` (MI-Net, Wang et al. 2018) with the papers' defaults,
  ``attention_mil_seeds`` over three seeds (a deep ensemble), and ``*_cv`` with learning rate
  x weight decay chosen by inner CV (:class:`SelectedNetwork`: selection against selection).

Every selection keeps the parameters its records were fitted with (:data:`RECORDED`) but
those it names, so a name keeps its meaning (:func:`method_parameters`). A screen of another
setting registers a variant for its run (:func:`add_variant`, ``suite.py --variant``) instead of
a method: the registry holds what is alive, the records say what each variant fitted.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from sklearn.model_selection import StratifiedKFold

from dpp.estimators import ESTIMATORS, RAW_VECTORS, DPPClassifierCV, SetEnsembleClassifier
from dpp.estimators.embedded import WIDTHS
from dpp.estimators.ensemble import seed_members

#: The default's name in the records.
DEFAULT = "dpp_ensemble_embedded_own_seeds_avg50_widened"

QUICK_METHODS = (DEFAULT, "dpp_mean", "pooling", "attention_mil")


#: The ``l2`` grid of the prototype methods' selection (extended past an edge).
L2S = (1e-3, 1e-2, 1e-1, 1.0)


#: The embedding of the embedded DPP (the neural baselines' 256-128-64) and its ``K``.
EMBEDDING, EMBEDDED_K = WIDTHS, 16

#: The selections' parameters as the committed records were fitted with (``DPPClassifierCV``'s
#: defaults until issue 52's decision): each ``dpp_*`` method overrides only what it names, so
#: a method's name keeps its meaning (and its fingerprint, :func:`method_parameters`).
RECORDED = {**RAW_VECTORS, "embedding_seeds": 1}
#: The embedded DPP's parameters as the committed records were fitted with
#: (``EmbeddedDPPClassifier``'s defaults until issue 52's moving average and widened hold-out):
#: every embedded method and every selection's embedded member overrides only what it names.
RECORDED_EMBEDDED = {"weight_average": 0.0, "widen_validation": False}
RECORDED["embedding_options"] = RECORDED_EMBEDDED


def _dpp_cv(pooling=None, base_options=None, k_factors=None, **options):
    """A selection at the task's ``K`` (or over ``K`` times each of ``k_factors``)."""

    def make(k: int, seed: int):
        extra = {} if pooling is None else {"pooling": pooling}
        if k_factors is not None:
            extra["n_prototypes"] = tuple(f * k for f in k_factors)
        base = ESTIMATORS["dpp"](n_prototypes=k, random_state=seed, **(base_options or {}))
        rest = {**RECORDED, **options}
        return DPPClassifierCV(base, l2s=L2S, cv=3, **extra, **rest)

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


def _embedded(pooling: str | None = None, **params):
    """The embedded DPP with the suite's K and embedding, as recorded but for ``params``.

    As recorded: :data:`RECORDED_EMBEDDED`, the class's defaults when the records were fitted.
    """

    def make(k: int, seed: int):
        del k  # the embedding space has its own K
        chosen = {**RECORDED_EMBEDDED, **({} if pooling is None else {"pooling": pooling})}
        fixed = {"n_prototypes": EMBEDDED_K, "embedding": EMBEDDING, "random_state": seed}
        return ESTIMATORS["embedded_dpp"](**{**fixed, **chosen, **params})

    return make


#: The prior's scales on the selection's path (issue 80): none, then 0.3, 1 and 3 spreads.
MU_PRIOR_SCALES = (None, 0.3, 1.0, 3.0)


#: Every method by name: ``(K, seed) -> unfitted estimator``: configured variants of the
#: estimators of the one registry, :data:`dpp.estimators.ESTIMATORS` (which the model file and
#: the Hydra config store read too).
METHODS: dict[str, Callable] = {
    DEFAULT: _dpp_cv(
        rule="ensemble",
        embedding=(None, EMBEDDING),
        embedding_seeds=3,
        embedding_options={"weight_average": 0.5, "widen_validation": True},
    ),
    # ... and the default with that path in each raw member (mean, max and gem)
    f"{DEFAULT}_mu_path": _dpp_cv(
        rule="ensemble",
        embedding=(None, EMBEDDING),
        embedding_seeds=3,
        embedding_options={"weight_average": 0.5, "widen_validation": True},
        mu_prior_scales=MU_PRIOR_SCALES,
    ),
    "dpp_mean": _dpp_cv(["mean"]),
    "dpp_max": _dpp_cv(["max"]),
    "dpp_gem": _dpp_cv(["gem"]),
    # issue 80: a Gaussian prior on mu around the k-means start, its scale chosen on the
    # selection's path among none (the paper's model) and 0.3, 1, 3 of the data's spreads
    "dpp_mean_mu_path": _dpp_cv(["mean"], mu_prior_scales=MU_PRIOR_SCALES),
    # the paper's model as a user selects it, DPPClassifierCV(**RAW_VECTORS): the three
    # poolings' members averaged, without and with that path (issue 80's second target)
    "dpp_raw": _dpp_cv(),
    "dpp_raw_mu_path": _dpp_cv(mu_prior_scales=MU_PRIOR_SCALES),
    "dpp_embedded_widened": _embedded(weight_average=0.5, widen_validation=True),
    "dpp_plain": lambda k, seed: ESTIMATORS["dpp"](n_prototypes=k, random_state=seed),
    "standard": lambda k, seed: DPPClassifierCV(
        ESTIMATORS["standard"](n_prototypes=k, random_state=seed), l2s=L2S, cv=3, **RECORDED
    ),
    "pooling": lambda k, seed: ESTIMATORS["pooling"](random_state=seed),
    "bag_of_words": lambda k, seed: ESTIMATORS["bag_of_words"](n_prototypes=k, random_state=seed),
    "attention_mil": lambda k, seed: ESTIMATORS["attention_mil"](random_state=seed),
    "gated_mil": lambda k, seed: ESTIMATORS["attention_mil"](gated=True, random_state=seed),
    "attention_mil_seeds": lambda k, seed: SetEnsembleClassifier(
        seed_members(ESTIMATORS["attention_mil"](random_state=seed), range(seed, seed + 3))
    ),
    "deep_sets": lambda k, seed: ESTIMATORS["deep_sets"](random_state=seed),
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


#: The variants registered in this process (:func:`add_variant`): name -> base and parameters,
#: which a run records (``variants`` in ``suite.json``) so its command can be given again.
VARIANTS: dict[str, dict] = {}


def add_variant(name: str, base: str, parameters: dict) -> None:
    """Registers method ``name``: ``base`` with ``parameters`` set, for one run's screen.

    ``parameters`` go to the estimator's ``set_params`` (nested ones by scikit-learn's
    ``estimator__...`` names, e.g. ``{"estimator__optimizer_options": {"max_iter": 5}}`` for
    the paper's model inside a selection). The run records the variant's every parameter
    (:func:`method_parameters`), so its records say what it fitted and a resume with other
    parameters under the name is refused.

    Raises:
        ValueError: ``name`` already registered, ``base`` unknown, or a parameter the
            estimator does not have (scikit-learn's message, naming it).
    """
    if name in METHODS:
        raise ValueError(f"variant {name!r}: a method of that name exists")
    if base not in METHODS:
        raise ValueError(f"variant {name!r}: unknown base method {base!r}")
    make = METHODS[base]

    def made(k: int, seed: int):
        return make(k, seed).set_params(**parameters)

    made(16, 0)  # a parameter the estimator lacks fails here, before the run starts
    METHODS[name] = made
    VARIANTS[name] = {"base": base, "parameters": parameters}


#: The baselines DPP is measured against (the issue's target: at least the best of them).
BASELINES = (
    "standard", "pooling", "bag_of_words", "attention_mil", "gated_mil", "deep_sets",
    "attention_mil_cv", "gated_mil_cv", "deep_sets_cv", "attention_mil_seeds",
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


def _parameters(value):
    """``value`` as JSON-ready data: an estimator as its class and every parameter, deeply."""
    if hasattr(value, "get_params"):
        params = value.get_params(deep=False)
        fields = {k: _parameters(params[k]) for k in sorted(params)}
        return {"class": type(value).__name__, **fields}
    if isinstance(value, list | tuple):
        return [_parameters(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _parameters(value[k]) for k in sorted(value, key=str)}
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if hasattr(value, "__qualname__"):  # a class or a function: its name
        return f"{getattr(value, '__module__', '')}.{value.__qualname__}"
    if hasattr(value, "__dict__"):  # a wrapper of the suite's own: its public attributes
        public = {k: v for k, v in vars(value).items() if not k.startswith("_")}
        return {
            "class": type(value).__name__,
            **{k: _parameters(public[k]) for k in sorted(public)},
        }
    return repr(value)


#: Parameters added to the estimators after runs began recording ``method_parameters``, each
#: with the value that fits the model as before it existed (``scripts/same_bits.py`` held the
#: fits to the bit): a recorded run lacking one is the same model while it holds that value.
#: ``kmeans_solver="auto"`` (issue 81) is scikit-learn's start on every suite task: their
#: ``T * D * K`` lies below 2^28 at ``K <= 64`` (web_recommendation_1's 5,863 dimensions at
#: ``K <= 16``), so its fits are those recorded before it.
ADDED_PARAMETERS = {"mu_prior_scale": None, "mu_prior_scales": None, "kmeans_solver": "auto"}


def same_parameters(before, now) -> bool:
    """Whether ``now`` (:func:`method_parameters`) fits the model recorded as ``before``.

    Equal, except that a key of :data:`ADDED_PARAMETERS` missing from ``before`` may stand in
    ``now`` at its neutral value, at any depth.
    """
    if isinstance(before, dict) and isinstance(now, dict):
        added = {
            k for k in now.keys() - before.keys()
            if k in ADDED_PARAMETERS and now[k] == ADDED_PARAMETERS[k]
        }  # fmt: skip
        if before.keys() != now.keys() - added:
            return False
        return all(same_parameters(before[k], now[k]) for k in before)
    if isinstance(before, list) and isinstance(now, list):
        return len(before) == len(now) and all(map(same_parameters, before, now))
    return before == now


def method_parameters(name: str) -> dict:
    """What method ``name`` fits: its estimator's class and parameters, every default included.

    Of ``make_method(name, 16, 0)`` (``K`` and the seed are the task's and the draw's, so
    fixed here): a suite run records it for every method, and a resume refuses a method whose
    parameters changed since, e.g. a default of ``DPPClassifierCV()`` under ``dpp``, so that
    one run's records never mix two models under one name.

    Raises:
        ValueError: a name not in :data:`METHODS`.
    """
    return _parameters(make_method(name, 16, 0))


def _member_status(best, member: dict) -> str | None:
    """A selection's member's refit status (``None`` for one ensemble selection dropped)."""
    if not member["kept"]:
        return None
    if isinstance(best, SetEnsembleClassifier):
        return best.member_statuses_[member["name"]]
    return best.fit_report_.status  # the one member kept


def selection_record(estimator) -> dict:
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
                        "status": _member_status(estimator.best_estimator_, m),
                        "kept": m["kept"],
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
        members = {name: selection_record(m) for name, m in estimator.named_estimators_.items()}
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
