r"""scikit-learn estimators over sets: DPP, the standard prototype, InfoLoss and the class prior.

Every estimator takes ``X`` as

* a list of ``[M_n, D]`` arrays, one per set (the convention of the multiple-instance libraries;
  what ``GridSearchCV`` and ``cross_val_score`` index);
* a :class:`~dpp.sets.RaggedSets` (its labels and weights are used when ``y`` is ``None``);
* a ``(vectors, set_ids)`` pair: ``[T, D]`` vectors and ``[T]`` integer set ids, in any order;
  set ``n`` is the one with the ``n``-th smallest id.

and ``y`` as ``[N]`` class labels of any type (``classes_`` holds them sorted, as in
scikit-learn) or ``[N, C]`` soft labels (rows on the simplex; ``classes_ = arange(C)``).

A fitted estimator predicts with eq. (16) on the set representation ``z`` of eq. (2):
``predict_proba`` gives ``[N, C]`` class probabilities, ``transform`` the ``[N, K]`` codes ``z``
(a learned soft bag-of-words for any downstream model). Preprocessing (``standardize``,
``pca_components``) is fitted on the training vectors and applied inside, so new raw sets need
nothing done to them. The constructor defaults are the defaults of the command line as well
(:mod:`dpp.config_store` builds the Hydra ``model`` and ``optimizer`` groups from them).

``clf.save(path)`` writes a fitted estimator to one ``.npz`` file; :func:`dpp.persist.load`
reads it back.
"""

from __future__ import annotations

import dataclasses
import inspect
import logging
import time
import warnings
from typing import ClassVar

import jax
import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, ClassifierMixin, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from dpp import params as check
from dpp.baselines.class_prior import fit_class_prior
from dpp.baselines.infoloss import InfoLossSettings, fit_infoloss
from dpp.baselines.standard import fit_standard
from dpp.errors import FitWarning, NonFiniteResultError
from dpp.init import kmeans_centres
from dpp.likelihood import BetaPrior
from dpp.metrics import weighted_score
from dpp.model import CLEAN_STATUSES, MODES, FittedModel, fit_dpp
from dpp.sets import RaggedSets, one_hot
from dpp.solvers import options as solver_options
from dpp.solvers.coordinate_ascent import FitSettings
from dpp.units import Affine

logger = logging.getLogger(__name__)

_FIT = FitSettings()
_INFOLOSS = InfoLossSettings()

#: Parameters of every prototype estimator that the experiment layer sets itself (from the
#: dataset, ``kmeans``, ``optimizer``, ``seed`` and ``verbose`` config keys), not the ``model``
#: config group.
EXPERIMENT_PARAMS = (
    "standardize",
    "pca_components",
    "preprocess",
    "init",
    "warm_start",
    "optimizer",
    "optimizer_options",
    "kmeans_n_init",
    "kmeans_max_iter",
    "random_state",
    "verbose",
    "devices",
)


# ---------------------------------------------------------------------- inputs
def as_sets(X, dtype=np.float32) -> RaggedSets:
    """The sets of ``X`` (see the module docstring) as :class:`RaggedSets`, unlabelled.

    A :class:`RaggedSets` is returned as it is (labels included).

    Raises:
        ValueError: no sets, an empty set, a set that is not 2-D, mismatched dimensions, NaN or
            inf, set ids that are not integers or do not match the vectors.
    """
    if isinstance(X, RaggedSets):
        return X
    if _is_pair(X):
        vectors, ids = np.asarray(X[0]), np.asarray(X[1])
        if not np.issubdtype(ids.dtype, np.integer):
            raise ValueError(f"set_ids must be integers, got dtype {ids.dtype}")
        if ids.shape[0] != vectors.shape[0]:
            raise ValueError(
                f"mismatched lengths: {vectors.shape[0]} vectors but {ids.shape[0]} set ids"
            )
        unique, inverse = np.unique(ids, return_inverse=True)
        order = np.argsort(inverse, kind="stable")
        return RaggedSets.from_flat(
            vectors[order], inverse[order], None, num_sets=unique.size, dtype=dtype
        )
    if isinstance(X, np.ndarray) and X.dtype != object and X.ndim != 3:
        raise ValueError(
            f"X must be a list of [M_n, D] arrays, a (vectors, set_ids) pair or RaggedSets; "
            f"got an array of shape {X.shape}"
        )
    return RaggedSets.from_list(list(X), None, dtype=dtype)


def prediction_sets(X, estimator) -> RaggedSets:
    """The sets of ``X`` (:func:`as_sets`) for a fitted ``estimator`` to predict on.

    Raises:
        ValueError: the errors of :func:`as_sets`, or vectors whose dimension ``D`` is not the
            ``n_features_in_`` the estimator was fitted on (naming both).
    """
    sets = as_sets(X)
    if sets.dim != estimator.n_features_in_:
        raise ValueError(
            f"X has D = {sets.dim} features per vector but {type(estimator).__name__} was "
            f"fitted on D = {estimator.n_features_in_}"
        )
    return sets


def _is_pair(X) -> bool:
    if not isinstance(X, tuple | list) or len(X) != 2:
        return False
    first, second = (np.asarray(a) if not isinstance(a, np.ndarray) else a for a in X)
    return first.ndim == 2 and second.ndim == 1


def _labels(y, num_sets: int) -> tuple[np.ndarray, np.ndarray, bool]:
    """``(labels [N, C], classes_, soft)`` from class labels or soft labels."""
    y = np.asarray(y)
    if y.shape[0] != num_sets:
        raise ValueError(f"y has {y.shape[0]} labels but X has {num_sets} sets")
    if y.ndim == 2:
        if not np.issubdtype(y.dtype, np.number):
            raise ValueError(f"soft labels must be numbers, got dtype {y.dtype}")
        return y.astype(np.float64), np.arange(y.shape[1]), True
    if y.ndim != 1:
        raise ValueError(f"y must be [N] class labels or [N, C] soft labels, got {y.shape}")
    missing = np.flatnonzero(pd.isna(y)) if y.dtype.kind in "Of" else np.empty(0, int)
    if missing.size:
        raise ValueError(
            f"y has no label (None or NaN) for {missing.size} of {y.shape[0]} sets (first: set "
            f"{missing[0]}); every training set needs a class label"
        )
    classes, index = np.unique(y, return_inverse=True)
    if classes.size < 2:
        raise ValueError(f"a classifier needs at least 2 classes; y has only {classes.tolist()}")
    return one_hot(index, classes.size), classes, False


def labelled_sets(X, y=None, sample_weight=None) -> tuple[RaggedSets, np.ndarray]:
    """Training sets with their labels and weights, and ``classes_``.

    Args:
        X: sets (see the module docstring).
        y: ``[N]`` class labels, ``[N, C]`` soft labels, or ``None`` for a labelled
            ``RaggedSets``.
        sample_weight: optional ``[N]`` non-negative weights (default: the sets' own, or ones).

    Returns:
        ``(sets, classes)``: validated :class:`RaggedSets` with ``[N, C]`` labels, and the
        ``[C]`` class values (``arange(C)`` for soft labels).

    Raises:
        ValueError: no labels, a count mismatch, fewer than 2 classes, labels off the simplex,
            negative weights, and the errors of :func:`as_sets`.
    """
    sets = as_sets(X)
    if y is None:
        if sets.labels is None:
            raise ValueError("fit needs labels: pass y, or RaggedSets with labels")
        labels, classes = np.asarray(sets.labels), np.arange(sets.num_classes)
    else:
        labels, classes, _ = _labels(y, sets.num_sets)
    weights = sets.weights if sample_weight is None else np.asarray(sample_weight)
    sets = RaggedSets.from_flat(
        np.asarray(sets.vectors),
        np.asarray(sets.set_ids),
        labels,
        weights=np.asarray(weights),
        members=None if sets.members is None else np.asarray(sets.members),
        num_sets=sets.num_sets,
        dtype=sets.vectors.dtype,
    )
    return sets, classes


def _store(estimator, values: dict) -> None:
    """Sets every constructor argument as an attribute, unchanged (scikit-learn's rule)."""
    for name, value in values.items():
        if name not in ("self", "__class__"):
            setattr(estimator, name, value)


# ---------------------------------------------------------------------- base
class PrototypeClassifier(ClassifierMixin, TransformerMixin, BaseEstimator):
    """Shared machinery of the prototype classifiers (not used directly).

    Subclasses set :attr:`method` and implement ``_fit_model``. Fitted attributes:

    * ``model_``: the :class:`~dpp.model.FittedModel` (internal units; what the experiments use);
    * ``prototypes_`` ``[K, D]`` float64, in the units of the input features (through the
      inverse preprocessing; with PCA, the back-projection);
    * ``beta_``: ``float`` or ``[K]`` (1 / squared units of the preprocessed features), or
      ``None`` for the hard encoder of eq. (1);
    * ``theta_`` ``[K, C]`` float64 classifier weights (eq. 16);
    * ``classes_`` ``[C]``, ``n_features_in_``, ``history_`` (the objective per round),
      ``n_iter_`` (rounds), ``converged_`` (``True`` only for a fit whose status is
      ``converged``; ``None`` where the method has no iterative status), ``fit_info_``.
    """

    method: ClassVar[str] = ""
    #: Whether the method starts from k-means centres (the experiments share them per ``K``).
    uses_centres: ClassVar[bool] = True

    # subclasses list their own parameters in __init__ (scikit-learn reads the signature)
    def check_params(self) -> None:
        """Checks every parameter (``fit`` calls it; so does the config check, before a run).

        Raises:
            ValueError: naming the parameter, the rule and the value.
        """
        check.int_at_least("n_prototypes", self.n_prototypes, 1)
        check.number("l2", self.l2, low=0)
        check.boolean("standardize", self.standardize)
        if self.pca_components is not None:
            check.int_at_least("pca_components", self.pca_components, 1)
        check.int_at_least("kmeans_n_init", self.kmeans_n_init, 1)
        check.int_at_least("kmeans_max_iter", self.kmeans_max_iter, 1)
        if self.random_state is not None:
            check.int_at_least("random_state", self.random_state, 0)
        solver_options.theta_solver(self.optimizer, self.optimizer_options)
        solver_options.prototype_solver(self.optimizer, self.optimizer_options)

    # ------------------------------------------------------------------ fit
    def fit(self, X, y=None, sample_weight=None):
        """Fits the model on training sets.

        Args:
            X: ``N`` training sets (list of ``[M_n, D]`` arrays, ``RaggedSets`` or a
                ``(vectors, set_ids)`` pair).
            y: ``[N]`` class labels or ``[N, C]`` soft labels; ``None`` when ``X`` is a
                labelled ``RaggedSets``.
            sample_weight: optional ``[N]`` non-negative per-set weights of the likelihood
                (eq. 17's sum over sets).

        Returns:
            ``self``.

        Raises:
            ValueError: bad parameters or inputs (naming which), fewer training vectors than
                ``n_prototypes``.
            NonFiniteResultError: the fit produced non-finite parameters.
        """
        return self._fit(X, y, sample_weight)

    def _fit(self, X, y, sample_weight, **fit_params):
        """:meth:`fit`, with method-specific ``fit_params`` passed on to ``_fit_model``."""
        self.check_params()
        sets, self.classes_ = labelled_sets(X, y, sample_weight)
        self.n_features_in_ = sets.dim
        self.preprocess_ = self._fit_preprocess(sets)
        sets = self._preprocessed(sets)
        seed = self._seed()
        model = self._fit_model(sets, seed, **fit_params)
        self._set_fitted(model)
        self._warn_status()
        return self

    def _warn_status(self) -> None:
        """A fit whose status is not clean raises a :class:`~dpp.errors.FitWarning`.

        The command line logs each one as a line of the run's log (:mod:`dpp.experiment`);
        from Python, ``logging.captureWarnings(True)`` does the same.
        """
        status = self.fit_info_.get("status")
        if status is None or status in CLEAN_STATUSES:
            return
        message = f"{self._describe()}: fit {status}: {self.fit_info_.get('status_reason')}"
        warnings.warn(message, FitWarning, stacklevel=3)

    def _describe(self) -> str:
        """``Name(param=value, ...)``, naming the model: ``n_prototypes``, ``l2``, changed values.

        Not ``init``, ``preprocess``, ``optimizer_options``, ``verbose`` or ``devices`` (how the
        fit runs).
        """
        defaults = {
            name: p.default for name, p in inspect.signature(type(self).__init__).parameters.items()
        }
        parts = []
        for name, value in self.get_params(deep=False).items():
            if name in ("init", "preprocess", "optimizer_options", "verbose", "devices"):
                continue  # how the fit runs, not which model it is
            if name in ("n_prototypes", "l2") or value != defaults.get(name, value):
                parts.append(f"{name}={value!r}")
        return f"{type(self).__name__}({', '.join(parts)})"

    def _fit_preprocess(self, sets: RaggedSets) -> Affine | None:
        """The prefit ``preprocess`` (checked), else the map fitted on the training vectors."""
        if self.preprocess is not None:
            return Affine.prefit(self.preprocess, sets.dim, self.standardize, self.pca_components)
        return Affine.fit(np.asarray(sets.vectors), self.standardize, self.pca_components)

    def _seed(self) -> int:
        if self.random_state is None:
            return int(np.random.SeedSequence().entropy % (2**31 - 1))
        return int(self.random_state)

    def _preprocessed(self, sets: RaggedSets) -> RaggedSets:
        return sets if self.preprocess_ is None else self.preprocess_.sets(sets)

    def _initial_centres(self, sets: RaggedSets, seed: int) -> np.ndarray:
        """``init`` if given, else the previous fit's prototypes (``warm_start``), else k-means."""
        k, dim = self.n_prototypes, sets.dim
        if self.init is not None and not (isinstance(self.init, str) and self.init == "k-means"):
            centres = np.asarray(self.init, np.float64)
            if centres.shape != (k, dim):
                raise ValueError(
                    f"init must be [n_prototypes, D] = [{k}, {dim}] centres (in the units after "
                    f"preprocessing), got {centres.shape}"
                )
            return centres
        previous = self._warm_model(sets)
        if previous is not None:
            return previous.prototypes
        return kmeans_centres(
            np.asarray(sets.vectors), k, seed, self.kmeans_n_init, self.kmeans_max_iter
        )

    def _warm_model(self, sets: RaggedSets) -> FittedModel | None:
        """The previous fit's model when ``warm_start`` is on and it has the same shapes."""
        model = getattr(self, "model_", None) if self.warm_start else None
        if model is None or model.mu.shape != (self.n_prototypes, sets.dim):
            return None
        return model if model.theta.shape[1] == sets.num_classes else None

    def _fit_model(self, sets: RaggedSets, seed: int) -> FittedModel:
        raise NotImplementedError

    def _set_fitted(self, model: FittedModel) -> None:
        """Sets the fitted attributes from ``model``.

        Raises:
            NonFiniteResultError: a parameter of ``model`` is NaN or infinite (every method,
                not only DPP, so no estimator predicts NaN).
        """
        for name, value in (("mu", model.mu), ("log_beta", model.log_beta), ("theta", model.theta)):
            if value is not None and not np.all(np.isfinite(np.asarray(value))):
                raise NonFiniteResultError(f"{model.method} fit produced non-finite {name}")
        self.model_ = model
        prototypes = model.prototypes
        if self.preprocess_ is not None:
            prototypes = self.preprocess_.inverse(prototypes)
        self.prototypes_ = prototypes
        beta = model.beta
        self.beta_ = None if beta is None else (float(beta) if beta.ndim == 0 else beta)
        self.theta_ = np.asarray(model.theta, np.float64)
        self.history_ = np.asarray(model.history, np.float64)
        self.fit_info_ = model.info
        self.n_iter_ = int(model.info.get("rounds", 1))
        status = model.info.get("status")
        self.converged_ = None if status is None else status == "converged"

    # ------------------------------------------------------------------ predict
    def _prediction_sets(self, X) -> RaggedSets:
        check_is_fitted(self, "model_")
        return self._preprocessed(prediction_sets(X, self))

    def predict_log_proba(self, X) -> np.ndarray:
        """``[N, C]`` float64 log class probabilities of eq. (16), columns in ``classes_``.

        Raises:
            sklearn.exceptions.NotFittedError: before ``fit`` (as every method here).
        """
        sets = self._prediction_sets(X)
        return np.asarray(self.model_.log_predictive(sets), np.float64)

    def predict_proba(self, X) -> np.ndarray:
        """``[N, C]`` float64 class probabilities of eq. (16), columns in ``classes_``."""
        return np.exp(self.predict_log_proba(X))

    def predict(self, X) -> np.ndarray:
        """``[N]`` most probable class of each set (a value of ``classes_``)."""
        log_proba = self.predict_log_proba(X)
        return self.classes_[np.argmax(log_proba, axis=1)]

    def transform(self, X) -> np.ndarray:
        """``[N, K]`` float64 set representations ``z`` (eq. 2 over eq. 3, or eq. 1)."""
        sets = self._prediction_sets(X)
        return np.asarray(self.model_.encode(sets), np.float64)

    def score(self, X, y, sample_weight=None) -> float:
        """Accuracy on ``(X, y)``; for soft labels, against each set's most probable class."""
        check_is_fitted(self, "model_")
        y = np.asarray(y)
        if y.ndim == 2:
            y = self.classes_[np.argmax(y, axis=1)]
        hits = self.predict(X) == y
        return float(np.average(hits, weights=sample_weight))

    def save(self, path) -> None:
        """Writes the fitted estimator to ``path`` (``.npz``; see :mod:`dpp.persist`)."""
        from dpp.persist import save

        save(self, path)


# ---------------------------------------------------------------------- estimators
class DPPClassifier(PrototypeClassifier):
    r"""Discriminative probabilistic prototypes (Bonilla & Robles-Kelly 2012).

    Vectors are softly assigned to ``K`` prototypes ``mu`` with inverse temperature ``beta``
    (eq. 3), a set's representation ``z`` is the mean of its assignments (eq. 2), and a softmax
    classifier ``Theta`` (eq. 16) predicts its class. ``mu``, ``beta`` and ``Theta`` maximise the
    (weighted, possibly soft-label) log-likelihood of eqs. (5, 6, 17) minus
    ``l2 * tr(Theta^T Theta)``, by coordinate ascent (section 4) from k-means centres; the
    fit's status tells the truth (:func:`dpp.model.fit_status`).

    Args:
        n_prototypes: ``K``.
        l2: ridge ``lambda`` on ``Theta`` (on the summed log-likelihood; >= 0).
        mode: ``coordinate_ascent`` (section 4) or ``joint`` (rounds of one solver run over
            all parameters).
        max_rounds: coordinate-ascent rounds at most.
        tol: stop when a round raises ``L`` by less than ``tol * |L|``.
        beta_step_limit: a (mu, beta)-step changes ``beta`` by at most this factor (> 1).
        validation_fraction: early stopping: this fraction of the training sets is held out,
            the fit stops once ``patience`` rounds have not raised their log-likelihood, and
            the model is refitted on all training sets for the best number of rounds (0, the
            default: stop by ``tol`` or ``max_rounds``). Skipped when it would hold out fewer
            than 10 sets. ``scripts/bench.py --stopping`` measures its cost and benefit; with a
            small validation part it can stop at round 0 (see the README).
        patience: early stopping: rounds without a better validation log-likelihood.
        beta_scale: ``beta_0 = beta_scale / median squared distance to the nearest centre``.
        per_prototype_beta: one ``beta`` per prototype instead of one shared.
        beta_prior: prior on ``log beta``: ``none``, ``lognormal`` (Gaussian on ``log beta``
            with mean ``beta_prior_loc`` and s.d. ``beta_prior_scale``) or ``gamma`` (shape
            ``beta_prior_loc``, rate ``beta_prior_scale``), in the units of the preprocessed
            features.
        beta_prior_loc: first parameter of the prior.
        beta_prior_scale: second parameter of the prior (> 0).
        standardize: scale every feature to zero mean and unit variance (fitted on the
            training vectors; the default, since features of real data rarely share a scale;
            the experiments preprocess by their dataset config instead).
        pca_components: project on this many principal components (after standardising).
        preprocess: a prefit :class:`~dpp.units.Affine` used instead of fitting
            ``standardize`` and ``pca_components`` on the training vectors (which must then
            describe it: the experiments fit one map per trial, on the dataset's choice of
            vectors, and hand it to every method); ``None``: fit them. A saved model keeps
            the map and loads with ``preprocess=None``.
        init: ``"k-means"`` or ``[K, D']`` initial centres (units after preprocessing).
        warm_start: start from the previous fit's ``mu``, ``beta`` and ``Theta`` when the
            shapes agree (for a path of ``l2`` on the same sets).
        optimizer: a name of :data:`dpp.solvers.options.OPTIMIZERS`.
        optimizer_options: overrides of that optimizer's default options (dict).
        kmeans_n_init: k-means restarts.
        kmeans_max_iter: Lloyd iterations per restart.
        random_state: seed of k-means, of the early-stopping split and of mini-batch order
            (``None``: a fresh one).
        verbose: log ``L`` and ``beta`` after every round.
        devices: devices the fit runs on, a positive number or ``"all"`` (:mod:`dpp.sharding`:
            whole sets per device, the likelihood's sums reduced across devices; full-batch
            optimizers only). Same fit as one device up to float rounding.

    Raises (from ``fit``):
        ValueError: bad parameters or inputs, naming which.
        NonFiniteResultError: non-finite parameters after the fit.
    """

    method = "dpp"

    def __init__(
        self,
        n_prototypes: int = 10,
        l2: float = _FIT.l2,
        mode: str = "coordinate_ascent",
        max_rounds: int = _FIT.max_rounds,
        tol: float = _FIT.tol,
        beta_step_limit: float = _FIT.beta_step_limit,
        validation_fraction: float = 0.0,
        patience: int = _FIT.patience,
        beta_scale: float = 1.0,
        per_prototype_beta: bool = False,
        beta_prior: str = _FIT.prior.kind,
        beta_prior_loc: float = _FIT.prior.loc,
        beta_prior_scale: float = _FIT.prior.scale,
        standardize: bool = True,
        pca_components: int | None = None,
        preprocess: Affine | None = None,
        init="k-means",
        warm_start: bool = False,
        optimizer: str = solver_options.DEFAULT_OPTIMIZER,
        optimizer_options: dict | None = None,
        kmeans_n_init: int = 1,
        kmeans_max_iter: int = 300,
        random_state: int | None = 0,
        verbose: bool = False,
        devices: int | str = 1,
    ):
        _store(self, locals())

    def check_params(self) -> None:
        """Checks every parameter (raises ``ValueError`` naming the first bad one)."""
        super().check_params()
        if self.devices != "all":
            check.int_at_least("devices", self.devices, 1)
        check.choice("mode", self.mode, MODES)
        check.int_at_least("max_rounds", self.max_rounds, 0)
        check.number("tol", self.tol, low=0)
        check.number("beta_step_limit", self.beta_step_limit, low=1, low_open=True)
        check.number("validation_fraction", self.validation_fraction, low=0, high=1, high_open=True)
        check.int_at_least("patience", self.patience, 1)
        check.number("beta_scale", self.beta_scale, low=0, low_open=True)
        check.boolean("per_prototype_beta", self.per_prototype_beta)
        check.boolean("warm_start", self.warm_start)
        check.boolean("verbose", self.verbose)
        self._prior()

    def _prior(self) -> BetaPrior:
        check.choice("beta_prior", self.beta_prior, ("none", "lognormal", "gamma"))
        loc = check.number("beta_prior_loc", self.beta_prior_loc)
        scale = check.number("beta_prior_scale", self.beta_prior_scale, low=0, low_open=True)
        try:
            return BetaPrior(self.beta_prior, loc, scale)
        except ValueError as err:
            raise ValueError(f"beta_prior: {err}") from None

    def fit_settings(self) -> FitSettings:
        """The :class:`~dpp.solvers.coordinate_ascent.FitSettings` these parameters give."""
        return FitSettings(
            l2=float(self.l2),
            prior=self._prior(),
            max_rounds=int(self.max_rounds),
            tol=float(self.tol),
            beta_step_limit=float(self.beta_step_limit),
            patience=int(self.patience),
            theta_solver=solver_options.theta_solver(self.optimizer, self.optimizer_options),
            prototype_solver=solver_options.prototype_solver(
                self.optimizer, self.optimizer_options
            ),
            verbose=bool(self.verbose),
        )

    def fit(self, X, y=None, sample_weight=None, validation_sets=None, round_cap=None):
        """Fits the model on training sets (see :meth:`PrototypeClassifier.fit`).

        Args:
            X: training sets, as :meth:`PrototypeClassifier.fit`.
            y: labels, as :meth:`PrototypeClassifier.fit`.
            sample_weight: per-set weights, as :meth:`PrototypeClassifier.fit`.
            validation_sets: early stopping on given held-out sets, e.g. a cross-validation's
                held-out fold: a labelled :class:`~dpp.sets.RaggedSets` in the raw feature
                units, its ``[M, C]`` label rows in the columns of ``classes_`` (what a
                ``subset`` of the labelled training sets gives). Their weighted log-likelihood
                per set is recorded after every round (``fit_info_["early_stopping"]``), the
                fit stops once ``patience`` rounds have not raised it, and the best round's
                parameters are kept. Not with ``validation_fraction > 0``.
            round_cap: a number of rounds chosen on held-out sets (what
                :class:`DPPClassifierCV` passes): at most this many rounds, and a fit that
                stops there is ``early_stopped``. At most ``max_rounds``.

        Returns:
            ``self``.

        Raises:
            ValueError: as :meth:`PrototypeClassifier.fit`; ``validation_sets`` that are not
                labelled ``RaggedSets`` of the training sets' ``D`` and ``C``; a ``round_cap``
                outside ``[0, max_rounds]``; either with early stopping.
        """
        if validation_sets is not None and not isinstance(validation_sets, RaggedSets):
            raise ValueError(
                "validation_sets must be a labelled RaggedSets (e.g. sets.subset(indices)), got "
                f"{type(validation_sets).__name__}"
            )
        return self._fit(X, y, sample_weight, validation_sets=validation_sets, round_cap=round_cap)

    def _fit_model(
        self, sets: RaggedSets, seed: int, validation_sets=None, round_cap=None
    ) -> FittedModel:
        start = self._warm_model(sets)
        if start is not None and np.ndim(start.log_beta) != int(bool(self.per_prototype_beta)):
            start = None  # a shared beta cannot warm-start per-prototype ones, nor the reverse
        centres = start.prototypes if start is not None else self._initial_centres(sets, seed)
        if validation_sets is not None:
            validation_sets = self._preprocessed(validation_sets)
        return fit_dpp(
            sets,
            centres,
            self.fit_settings(),
            jax.random.key(seed),
            mode=self.mode,
            beta_scale=float(self.beta_scale),
            per_prototype_beta=bool(self.per_prototype_beta),
            validation_fraction=float(self.validation_fraction),
            start=start,
            devices=self.devices if self.devices == "all" else int(self.devices),
            validation_sets=validation_sets,
            round_cap=None if round_cap is None else int(round_cap),
        )


class StandardPrototypeClassifier(PrototypeClassifier):
    """The standard prototype baseline (section 4.2): k-means centres, hard codes (eq. 1).

    Sets are bag-of-words histograms of their vectors' nearest centres (eqs. 1, 2), classified
    by the same softmax (eq. 16) and Theta-step as DPP. Parameters as :class:`DPPClassifier`
    (``optimizer`` sets the Theta-step's L-BFGS; ``warm_start`` reuses the previous fit's
    centres instead of running k-means again).
    """

    method = "standard"

    def __init__(
        self,
        n_prototypes: int = 10,
        l2: float = _FIT.l2,
        standardize: bool = True,
        pca_components: int | None = None,
        preprocess: Affine | None = None,
        init="k-means",
        warm_start: bool = False,
        optimizer: str = solver_options.DEFAULT_OPTIMIZER,
        optimizer_options: dict | None = None,
        kmeans_n_init: int = 1,
        kmeans_max_iter: int = 300,
        random_state: int | None = 0,
        verbose: bool = False,
    ):
        _store(self, locals())

    def _fit_model(self, sets: RaggedSets, seed: int) -> FittedModel:
        centres = self._initial_centres(sets, seed)
        solver = solver_options.theta_solver(self.optimizer, self.optimizer_options)
        return fit_standard(sets, centres, float(self.l2), solver)


class InfoLossClassifier(PrototypeClassifier):
    """InfoLoss (Lazebnik & Raginsky 2009): centres that minimise the information loss.

    Centres are learned from k-means by minimising the soft-Voronoi information loss plus
    ``gamma`` times the distortion, then sets are coded by hard assignment (eq. 1) and classified
    by the same softmax as DPP.

    Args:
        beta_scale: soft-Voronoi ``beta`` relative to 1 / median squared distance.
        gamma_scale: distortion weight ``gamma`` relative to ``beta``.
        max_rounds: alternations of the pi-update and the centre step.
        tol: stop when a round lowers the objective by less than ``tol`` relatively.
        centre_max_iter: L-BFGS iterations of each centre step.

    The other parameters are those of :class:`DPPClassifier`.
    """

    method = "infoloss"

    def __init__(
        self,
        n_prototypes: int = 10,
        l2: float = _FIT.l2,
        beta_scale: float = _INFOLOSS.beta_scale,
        gamma_scale: float = _INFOLOSS.gamma_scale,
        max_rounds: int = _INFOLOSS.max_rounds,
        tol: float = _INFOLOSS.tol,
        centre_max_iter: int = _INFOLOSS.centre_solver.max_iter,
        standardize: bool = True,
        pca_components: int | None = None,
        preprocess: Affine | None = None,
        init="k-means",
        warm_start: bool = False,
        optimizer: str = solver_options.DEFAULT_OPTIMIZER,
        optimizer_options: dict | None = None,
        kmeans_n_init: int = 1,
        kmeans_max_iter: int = 300,
        random_state: int | None = 0,
        verbose: bool = False,
    ):
        _store(self, locals())

    def check_params(self) -> None:
        """Checks every parameter (raises ``ValueError`` naming the first bad one)."""
        super().check_params()
        check.number("beta_scale", self.beta_scale, low=0, low_open=True)
        check.number("gamma_scale", self.gamma_scale, low=0)
        check.int_at_least("max_rounds", self.max_rounds, 0)
        check.number("tol", self.tol, low=0)
        check.int_at_least("centre_max_iter", self.centre_max_iter, 1)

    def _fit_model(self, sets: RaggedSets, seed: int) -> FittedModel:
        centres = self._initial_centres(sets, seed)
        theta_solver = solver_options.theta_solver(self.optimizer, self.optimizer_options)
        settings = InfoLossSettings(
            beta_scale=float(self.beta_scale),
            gamma_scale=float(self.gamma_scale),
            max_rounds=int(self.max_rounds),
            tol=float(self.tol),
            centre_solver=dataclasses.replace(theta_solver, max_iter=int(self.centre_max_iter)),
        )
        return fit_infoloss(sets, centres, float(self.l2), theta_solver, settings)


class ClassPriorClassifier(PrototypeClassifier):
    """The class-prior baseline: every set gets the weighted training proportions of the classes.

    Tells how much of a score the encoding actually earns. ``n_prototypes`` is 1 and ``l2`` is
    unused; the one prototype is the mean training vector.
    """

    method = "class_prior"
    uses_centres = False

    def __init__(
        self,
        n_prototypes: int = 1,
        l2: float = 0.0,
        standardize: bool = True,
        pca_components: int | None = None,
        preprocess: Affine | None = None,
        init="k-means",
        warm_start: bool = False,
        optimizer: str = solver_options.DEFAULT_OPTIMIZER,
        optimizer_options: dict | None = None,
        kmeans_n_init: int = 1,
        kmeans_max_iter: int = 300,
        random_state: int | None = 0,
        verbose: bool = False,
    ):
        _store(self, locals())

    def _fit_model(self, sets: RaggedSets, seed: int) -> FittedModel:
        del seed
        centre = np.asarray(sets.vectors, np.float64).mean(axis=0, keepdims=True)
        return fit_class_prior(sets, np.repeat(centre, self.n_prototypes, axis=0))


#: Estimators by method name (the ``method`` recorded in results).
ESTIMATORS: dict[str, type[PrototypeClassifier]] = {
    cls.method: cls
    for cls in (
        DPPClassifier,
        StandardPrototypeClassifier,
        InfoLossClassifier,
        ClassPriorClassifier,
    )
}


# ---------------------------------------------------------------------- model selection
SCORINGS = ("log_likelihood", "accuracy")


class DPPClassifierCV(ClassifierMixin, TransformerMixin, BaseEstimator):
    """DPP with ``l2`` (and ``n_prototypes``) chosen by cross-validation of DPP itself.

    In the spirit of scikit-learn's ``LogisticRegressionCV``: every candidate is scored by
    stratified K-fold cross-validation on the training sets (each fold fits its own
    preprocessing, k-means and DPP), the ``l2`` path of each fold and ``K`` is fitted from the
    strongest ``l2`` down with warm starts, and the best candidate is refitted on all training
    sets (from k-means). ``l2`` is a strength on the summed log-likelihood, so a fold's fit,
    on a fraction ``r`` of the sets' total weight (``(folds - 1) / folds`` for equal folds),
    uses ``l2 * r``: a value of the grid means the same strength on every fit.

    Args:
        estimator: the estimator to tune (default ``DPPClassifier()``; the baselines of
            :mod:`dpp.estimators` work too, which gives every method the same selection).
        l2s: candidate ``l2`` values (>= 0).
        n_prototypes: candidate ``K`` values, or ``None`` for the estimator's own.
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
            codes saturate within a few rounds and the held-out log-likelihood falls (README,
            "A suite of set tasks"). Needs ``scoring="log_likelihood"``; ignored for the other
            estimators.

    Fitted attributes: ``best_params_``, ``best_score_``, ``cv_results_`` (scikit-learn's
    layout: ``params``, ``mean_test_score``, ``std_test_score``, ``split<i>_test_score``,
    ``rank_test_score``, ``mean_fit_time``; values added beyond the grid are candidates too),
    ``best_rounds_`` (the chosen number of rounds, ``None`` without ``select_rounds``; the
    ``rounds`` entry of ``cv_results_`` gives each candidate's best round),
    ``best_position_`` (``interior``, ``strongest edge``, ``weakest edge`` or ``only value``:
    where the chosen ``l2`` lies among those scored for its ``K``), ``l2s_added_``,
    ``prior_score_`` (the class prior's mean validation score: each fold's weighted mean
    training label) and ``beats_prior_`` (``best_score_ > prior_score_``),
    ``best_estimator_`` (refitted), and the fitted
    attributes of ``best_estimator_`` (``classes_``, ``prototypes_``, ``beta_``, ``theta_``,
    ``n_features_in_``, ...). ``save`` writes ``best_estimator_``.
    """

    def __init__(
        self,
        estimator=None,
        l2s=(1e-3, 1e-2, 1e-1, 1.0),
        n_prototypes=None,
        cv=5,
        scoring: str = "log_likelihood",
        max_extensions: int = 3,
        select_rounds: bool = True,
    ):
        _store(self, locals())

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
        from sklearn.base import clone

        from dpp.selection import choose_on_path, cv_splits

        base = DPPClassifier() if self.estimator is None else self.estimator
        l2s = sorted({float(v) for v in self.l2s}, reverse=True)
        if not l2s or l2s[-1] < 0:
            raise ValueError(f"l2s must be a non-empty list of values >= 0, got {self.l2s!r}")
        ks = [base.n_prototypes] if self.n_prototypes is None else list(self.n_prototypes)
        for k in ks:
            check.int_at_least("n_prototypes", k, 1)
        check.choice("scoring", self.scoring, SCORINGS)
        check.int_at_least("max_extensions", self.max_extensions, 0)
        check.boolean("select_rounds", self.select_rounds)
        by_round = self.select_rounds and isinstance(base, DPPClassifier)
        if by_round and self.scoring != "log_likelihood":
            raise ValueError(
                "select_rounds chooses the rounds by the validation log-likelihood: use "
                f"scoring='log_likelihood' or select_rounds=False (got scoring={self.scoring!r})"
            )
        if by_round:
            base = clone(base).set_params(validation_fraction=0.0)  # the folds hold out instead
        sets, classes = labelled_sets(X, y, sample_weight)
        seed = 0 if base.random_state is None else int(base.random_state)
        folds = cv_splits(self.cv, np.asarray(sets.labels), seed, groups)
        weights = np.asarray(sets.weights, np.float64)
        parts = [
            (sets.subset(np.sort(fit_idx)), sets.subset(np.sort(val_idx)))
            for fit_idx, val_idx in folds
        ]
        shrink = [weights[fit_idx].sum() / weights.sum() for fit_idx, _ in folds]
        fold_scores: dict[tuple[int, float], np.ndarray] = {}
        rounds: dict[tuple[int, float], int] = {}
        seconds: dict[tuple[int, float], float] = {}
        last: dict[tuple[int, int], PrototypeClassifier] = {}  # (fold, K) -> weakest l2 fitted

        def cross_validate(k: int, path: list[float], warm: bool) -> None:
            """Scores ``(k, l2)`` for each l2 of ``path`` (strongest first) in every fold."""
            by_fold = []
            for f, (part, held) in enumerate(parts):
                est = last.get((f, k)) if warm and not by_round else None
                if est is None:
                    est = clone(base).set_params(n_prototypes=k, warm_start=not by_round)
                for l2 in path:
                    t0 = time.perf_counter()
                    est.set_params(l2=float(l2 * shrink[f]))
                    key = (k, l2)
                    if by_round:
                        est.fit(part, validation_sets=held)
                        by_fold.append((key, f, _scores_by_round(est)))
                    else:
                        est.fit(part)
                        fold_scores.setdefault(key, np.zeros(len(parts)))[f] = _validation_score(
                            est, held, self.scoring
                        )
                    seconds[key] = seconds.get(key, 0.0) + (time.perf_counter() - t0) / len(parts)
                if warm or (f, k) not in last:
                    last[f, k] = est
            for key in dict.fromkeys(key for key, _, _ in by_fold):
                per_round = np.stack([v for c, _, v in by_fold if c == key])  # [folds, R]
                best = int(np.nanargmax(np.mean(per_round, axis=0)))  # all-NaN rounds skipped
                fold_scores[key], rounds[key] = per_round[:, best], best
            for key in ((k, v) for v in path):
                logger.info(
                    "K=%d l2=%.3g: validation %s %s%s",
                    key[0],
                    key[1],
                    self.scoring,
                    np.round(fold_scores[key], 4).tolist(),
                    f" at round {rounds[key]}" if key in rounds else "",
                )

        for k in ks:
            cross_validate(k, l2s, warm=True)
        mean = {key: float(v.mean()) for key, v in fold_scores.items()}
        # best score; ties go to the stronger l2, then the fewer prototypes
        best_k = max(mean, key=lambda c: (mean[c], c[1], -c[0]))[0]

        def score_new(l2: float) -> float:
            # weaker than the path: continue each fold's path; stronger: a fresh fit
            weakest = min(v for k, v in fold_scores if k == best_k)
            cross_validate(best_k, [l2], warm=l2 < weakest)
            return float(fold_scores[best_k, l2].mean())

        path = [v for k, v in fold_scores if k == best_k]
        choice = choose_on_path(
            path, [mean[best_k, v] for v in path], score_new, int(self.max_extensions)
        )
        candidates = list(fold_scores)
        scores = np.stack([fold_scores[c] for c in candidates])
        mean = scores.mean(axis=1)
        best = max(
            range(len(candidates)), key=lambda i: (mean[i], candidates[i][1], -candidates[i][0])
        )
        order = np.argsort(-mean, kind="stable")
        rank = np.empty(len(candidates), dtype=np.int64)
        rank[order] = np.arange(1, len(candidates) + 1)
        self.cv_results_ = {
            "params": [{"n_prototypes": k, "l2": l2} for k, l2 in candidates],
            "param_n_prototypes": np.array([k for k, _ in candidates]),
            "param_l2": np.array([l2 for _, l2 in candidates]),
            "mean_test_score": mean,
            "std_test_score": scores.std(axis=1),
            **{f"split{f}_test_score": scores[:, f] for f in range(len(folds))},
            "rank_test_score": rank,
            "mean_fit_time": np.array([seconds[c] for c in candidates]),
            **({"rounds": np.array([rounds[c] for c in candidates])} if by_round else {}),
        }
        self.best_params_ = dict(self.cv_results_["params"][best])
        self.best_score_ = float(mean[best])
        self.best_index_ = int(best)
        self.best_position_ = choice.position  # the best is best_k's: only its path grew
        self.l2s_added_ = list(choice.added)
        self.prior_score_ = float(
            np.mean([_prior_score(part, held, self.scoring) for part, held in parts])
        )
        self.beats_prior_ = bool(self.best_score_ > self.prior_score_)
        self.best_rounds_ = rounds[candidates[best]] if by_round else None
        self.best_estimator_ = clone(base).set_params(**self.best_params_)
        if by_round:
            self.best_estimator_.fit(sets, round_cap=self.best_rounds_)
        else:
            self.best_estimator_.fit(sets)
        self.best_estimator_.classes_ = classes
        self.classes_ = classes
        self.n_features_in_ = self.best_estimator_.n_features_in_
        return self

    def __getattr__(self, name):
        # fitted attributes of the refitted estimator (prototypes_, beta_, theta_, model_, ...)
        if name.endswith("_") and not name.startswith("__") and "best_estimator_" in self.__dict__:
            return getattr(self.__dict__["best_estimator_"], name)
        raise AttributeError(name)

    def _best(self):
        check_is_fitted(self, "best_estimator_")
        return self.best_estimator_

    def predict_log_proba(self, X) -> np.ndarray:
        """``[N, C]`` log class probabilities of the refitted estimator."""
        return self._best().predict_log_proba(X)

    def predict_proba(self, X) -> np.ndarray:
        """``[N, C]`` class probabilities of the refitted estimator."""
        return self._best().predict_proba(X)

    def predict(self, X) -> np.ndarray:
        """``[N]`` predicted classes of the refitted estimator."""
        return self._best().predict(X)

    def transform(self, X) -> np.ndarray:
        """``[N, K]`` set representations ``z`` of the refitted estimator."""
        return self._best().transform(X)

    def score(self, X, y, sample_weight=None) -> float:
        """Accuracy of the refitted estimator (see :meth:`PrototypeClassifier.score`)."""
        return self._best().score(X, y, sample_weight)

    def save(self, path) -> None:
        """Writes ``best_estimator_`` (:func:`dpp.persist.save`); it loads as that estimator."""
        self._best().save(path)


def _scores_by_round(estimator: DPPClassifier) -> np.ndarray:
    """``[max_rounds + 1]`` validation log-likelihood per set after each round.

    Of a fit with ``validation_sets``: known up to its last round, carried on to ``max_rounds``
    when it stopped by ``tol`` (a fit capped later stops there too), NaN after a stop by
    ``patience``.
    """
    early = estimator.fit_info_["early_stopping"]
    history = np.asarray(early["validation_history"], np.float64)
    last = early["rounds_monitored"]
    scores = np.full(estimator.max_rounds + 1, np.nan)
    scores[: last + 1] = history
    if last - early["best_round"] < estimator.patience:  # stopped by tol or max_rounds
        scores[last + 1 :] = history[-1]
    return scores


def _validation_score(estimator, sets: RaggedSets, scoring: str) -> float:
    """Weighted mean over ``sets`` of the log-likelihood per set (nats) or of the accuracy."""
    return weighted_score(estimator.predict_log_proba(sets), sets.labels, sets.weights, scoring)


def _prior_score(part: RaggedSets, held: RaggedSets, scoring: str) -> float:
    """The validation score on ``held`` of :class:`ClassPriorClassifier` fitted on ``part``."""
    prior = ClassPriorClassifier(standardize=False).fit(part)
    return _validation_score(prior, held, scoring)
