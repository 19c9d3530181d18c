"""What every estimator over sets shares: the set classifiers' base and the prototype base class.

Reading ``X`` and ``y`` is :mod:`dpp.estimators.inputs`; see :mod:`dpp.estimators` for the
input conventions.
"""

from __future__ import annotations

import inspect
import logging
from pathlib import Path
from typing import ClassVar

import jax.numpy as jnp
import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from dpp import model_file
from dpp import params as check
from dpp.errors import ModelFileError, NonFiniteResultError, recording_statuses, warn_caller
from dpp.estimators.inputs import labelled_sets, per_set, prediction_sets
from dpp.estimators.saving import check_shapes, write_model_file
from dpp.init import KMEANS_MAX_ITER, KMEANS_N_INIT, KMEANS_SOLVER, KMEANS_SOLVERS, kmeans_centres
from dpp.model import FitReport, FittedModel
from dpp.pooling import MEAN, make_pooling
from dpp.pooling import REGISTRY as POOLING_REGISTRY
from dpp.sets import RaggedSets
from dpp.solvers import options as solver_options
from dpp.units import Affine, Normalizer

logger = logging.getLogger(__name__)


#: Scores of a model selection: mean validation log-likelihood per set (nats), or accuracy.
SCORINGS = ("log_likelihood", "accuracy")


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
    "kmeans_solver",
    "random_state",
    "verbose",
    "devices",
)


#: Per-vector readings that other set models give under their own name: what a set classifier
#: here offers in their place (:func:`missing_attribute`).
INSTEAD = {
    "attention_weights": {
        "instance_scores": "each vector's part of its set's class scores",
        "instance_proba": "each vector classified as a set of its own",
    },
}


def missing_attribute(owner, name: str) -> AttributeError:
    """The ``AttributeError`` for ``owner.name``, saying what to use where another model has it.

    For a name of :data:`INSTEAD` (attention MIL's ``attention_weights``), the methods of
    ``owner``'s class that give that reading; otherwise Python's own message.
    """
    cls = type(owner).__name__
    offered = {m: what for m, what in INSTEAD.get(name, {}).items() if hasattr(type(owner), m)}
    if not offered:
        return AttributeError(f"{cls!r} object has no attribute {name!r}")
    uses = " or ".join(f"{m}(X) ({what})" for m, what in offered.items())
    return AttributeError(
        f"{cls} has no {name!r} (an attention network's); its per-vector evidence: {uses}"
    )


class SetClassifierMixin:
    """What every set classifier derives from its ``predict_log_proba``: one definition each.

    The base of the five estimator roots (the prototype estimators, :class:`~dpp.DPPClassifierCV`,
    the networks, the pooled regressions and the ensemble), placed first among their bases:
    ``predict_proba``, ``predict``, ``score`` and ``instance_proba`` follow from the class's
    ``predict_log_proba`` (``[N, C]`` float64, columns in ``classes_``, raising
    ``NotFittedError`` before ``fit``), ``classes_`` and ``n_features_in_``.
    """

    def predict_log_proba(self, X) -> np.ndarray:  # pragma: no cover (every root defines it)
        """``[N, C]`` float64 log class probabilities, columns in ``classes_``."""
        raise NotImplementedError

    def __getattr__(self, name):
        # only where normal lookup failed: a name of another set model says what to use here;
        # any other name fails as it did (a property's own AttributeError, raised again)
        if name in INSTEAD:
            raise missing_attribute(self, name)
        return object.__getattribute__(self, name)

    def predict_proba(self, X) -> np.ndarray:
        """``[N, C]`` float64 class probabilities, columns in ``classes_`` (rows sum to 1).

        ``exp`` of :meth:`predict_log_proba`, each row divided by its sum: log-probabilities
        computed in float32 sum to 1 only to about 1e-7 after ``exp``, and scikit-learn's
        ``log_loss`` (``scoring="neg_log_loss"``) warns from 1.5e-8; divided, a row sums to 1 to
        float64's precision.

        Raises:
            sklearn.exceptions.NotFittedError: before ``fit``.
        """
        proba = np.exp(self.predict_log_proba(X))
        return proba / proba.sum(axis=1, keepdims=True)

    def predict(self, X) -> np.ndarray:
        """``[N]`` the most probable class of each set (a value of ``classes_``).

        Raises:
            sklearn.exceptions.NotFittedError: before ``fit``.
        """
        log_proba = self.predict_log_proba(X)  # NotFittedError first
        return self.classes_[np.argmax(log_proba, axis=1)]

    def score(self, X, y, sample_weight=None) -> float:
        """Accuracy on ``(X, y)``; for soft labels, against each set's most probable class.

        Args:
            X: ``N`` sets (as ``fit`` takes them).
            y: ``[N]`` class labels or ``[N, C]`` soft labels.
            sample_weight: optional ``[N]`` weights of the sets.

        Returns:
            The (weighted) share of sets whose predicted class is their label, in ``[0, 1]``.

        Raises:
            sklearn.exceptions.NotFittedError: before ``fit``.
        """
        predicted = self.predict(X)
        y = np.asarray(y)
        if y.ndim == 2:
            y = self.classes_[np.argmax(y, axis=1)]
        return float(np.average(predicted == y, weights=sample_weight))

    def instance_proba(self, X) -> list[np.ndarray]:
        """Each vector's class probabilities as a set of one: one ``[M_n, C]`` array per set.

        The instance classifier of mi-Net (Wang, Yan, Tang, Bai & Liu, *Revisiting multiple
        instance neural networks*, Pattern Recognition 2018): every vector ``x`` is given to
        the fitted model as the set ``{x}``, so for DPP its codes ``f(x)`` (eq. 3) are its own
        ``z`` under every pooling and its row is eq. (16) on them. Rows sum to 1. It ranks
        vectors where :meth:`instance_scores` cannot: under max pooling, the exact decomposition
        gives every vector that holds no code's maximum a share of 0, while a vector alone
        keeps all its evidence. :meth:`instance_scores` stays the exact contribution to the
        set's scores; this one is no decomposition of them.

        Args:
            X: ``N`` sets (as ``fit`` takes them).

        Returns:
            ``N`` float64 arrays ``[M_n, C]``, rows in the order of each set's vectors, columns
            in ``classes_``.

        Raises:
            sklearn.exceptions.NotFittedError: before ``fit``.
            ValueError: sets that :func:`prediction_sets` refuses (empty, NaN, wrong ``D``).
        """
        check_is_fitted(self, "n_features_in_")
        sets = prediction_sets(X, self)
        vectors = np.asarray(sets.member_vectors(), np.float64)
        singletons = (vectors, np.arange(vectors.shape[0]))  # each vector a set of its own
        return per_set(np.asarray(self.predict_proba(singletons), np.float64), sets)


#: The constructor parameters every prototype estimator shares (the standard prototype,
#: InfoLoss, the class prior and DPP), with their defaults. Each class lists them explicitly,
#: keyword-only, after its own parameters (scikit-learn's convention: what IDEs, type checkers,
#: ``get_params``, the Hydra config store and the model file read); a test holds every
#: estimator that takes one of them to this default. Documented in :class:`dpp.DPPClassifier`'s
#: arguments.
SHARED_PARAMETERS: dict[str, object] = {
    "standardize": True,
    "pca_components": None,
    "preprocess": None,
    "init": "k-means",
    "warm_start": False,
    "optimizer": solver_options.DEFAULT_OPTIMIZER,
    "optimizer_options": None,
    "kmeans_n_init": KMEANS_N_INIT,
    "kmeans_max_iter": KMEANS_MAX_ITER,
    "kmeans_solver": KMEANS_SOLVER,
    "random_state": 0,
    "verbose": False,
}


def resolve_seed(random_state) -> int:
    """The integer seed of a fit: ``random_state`` itself, or a fresh one for ``None``.

    scikit-learn's reading of ``random_state=None`` (fresh randomness on every fit), the same
    for every estimator here: the prototype estimators, the pooled regressions, the networks
    and the folds of :class:`~dpp.DPPClassifierCV`. The default, ``0``, repeats exactly.
    """
    if random_state is None:
        return int(np.random.SeedSequence().entropy % (2**31 - 1))
    return int(random_state)


def warn_unclean(estimator) -> None:
    """A :class:`~dpp.errors.FitWarning` at the caller's line for a fit that did not end clean.

    The command line logs each one as a line of the run's log; from Python,
    ``logging.captureWarnings(True)`` does the same.
    """
    report = estimator.fit_report_
    if not report.clean and not recording_statuses():  # a search records it (DPPClassifierCV)
        warn_caller(f"{estimator.describe()}: fit {report.status}: {report.reason}")


class PreprocessedFit:
    """What a fit that reads labelled sets and preprocesses them itself shares.

    The prototype estimators, the networks and the pooled regressions: :meth:`prepare_sets`
    checks the parameters and the inputs, fits the class's preprocessing
    (``_fit_preprocess(sets)``, the fitted map or ``None``) and draws the fit's seed from
    ``random_state`` (a class without one gives its own ``_seed``).
    """

    def prepare_sets(self, X, y, sample_weight) -> tuple[RaggedSets, int]:
        """Checks the parameters and inputs, fits the preprocessing: ``(sets, seed)``.

        What ``fit`` runs first; what :class:`~dpp.DPPClassifierCV` asks of a fold's sets for
        their k-means, and what an Adam-trained estimator's ``training_member`` starts from.
        Sets ``classes_``, ``n_features_in_`` and ``preprocess_``.

        Args:
            X: ``N`` sets: a list of ``[M_n, D]`` arrays or labelled :class:`~dpp.sets.RaggedSets`.
            y: ``[N]`` class labels or ``[N, C]`` soft labels; ``None`` for labelled sets.
            sample_weight: ``[N]`` per-set weights, or ``None``.

        Returns:
            The preprocessed sets (``D'`` features, float32) and the fit's integer seed.

        Raises:
            ValueError: a bad parameter or input, naming it.
        """
        self.check_params()
        sets, self.classes_ = labelled_sets(X, y, sample_weight)
        self.n_features_in_ = sets.dim
        self.preprocess_ = self._fit_preprocess(sets)
        return self._preprocessed(sets), self._seed()

    def _seed(self) -> int:
        return resolve_seed(self.random_state)

    def _preprocessed(self, sets: RaggedSets) -> RaggedSets:
        return sets if self.preprocess_ is None else self.preprocess_.sets(sets)


class PrototypeClassifier(
    SetClassifierMixin, PreprocessedFit, ClassifierMixin, TransformerMixin, BaseEstimator
):
    """Shared machinery of the prototype classifiers (not used directly).

    Subclasses set :attr:`method` and implement ``_fit_model``. Fitted attributes:

    * ``model_``: the :class:`~dpp.model.FittedModel` (internal units; what the experiments use);
    * ``prototypes_`` ``[K, D]`` float64, in the units of the input features (through the
      inverse preprocessing; with PCA, the back-projection), computed when first read: the
      inverse of a standardisation in thousands of dimensions is a dense SVD (minutes), which a
      selection's fold fits never need;
    * ``beta_``: ``float`` or ``[K]`` (1 / squared units of the preprocessed features), or
      ``None`` for the hard encoder of eq. (1);
    * ``theta_`` ``[K, C]`` float64 classifier weights (eq. 16);
    * ``classes_`` ``[C]``, ``n_features_in_``, ``history_`` (the objective per round),
      ``n_iter_`` (rounds), ``converged_`` (``True`` only for a fit whose status is
      ``converged``; ``None`` where the method has no iterative status), ``fit_report_``
      (:class:`dpp.FitReport`).
    """

    method: ClassVar[str] = ""
    #: Whether the method starts from k-means centres (the experiments share them per ``K``).
    uses_centres: ClassVar[bool] = True
    #: How :class:`~dpp.DPPClassifierCV` fits this kind's candidates on its folds
    #: (:data:`dpp.estimators.search.FOLD_FITS`): ``"path"``, each fold's ``l2`` path with warm
    #: starts; ``"theta_paths"``, codes that do not depend on ``l2`` (``fold_codes``), every
    #: fold's Theta-steps as one program; ``"rounds"``, coordinate ascent whose rounds the
    #: search may choose, on one padded layout; ``"adam"``, Adam-trained fits batched.
    fold_fits: ClassVar[str] = "path"

    #: The rules of the parameters, one entry per constructor parameter that has one (read by
    #: :meth:`check_params`, so by ``fit``, the config check and the model-file loader, and by
    #: the Hydra config store, which checks the defaults). Subclasses extend it.
    PARAMETER_RULES: ClassVar[dict[str, check.Rule]] = {
        "n_prototypes": check.Int(1),
        "l2": check.Real(low=0),
        "standardize": check.Bool(),
        "pca_components": check.Optional(check.Int(1)),
        "kmeans_n_init": check.Int(1),
        "kmeans_max_iter": check.Int(1),
        "kmeans_solver": check.Choice(KMEANS_SOLVERS),
        "random_state": check.Optional(check.Int(0)),
        "warm_start": check.Bool(),
        "verbose": check.Bool(),
    }

    def check_params(self) -> None:
        """Checks every parameter by the class's table, then the optimizer and its options.

        Raises:
            ValueError: naming the parameter, the rule and the value.
        """
        check.check_table(self, self.PARAMETER_RULES)
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
        sets, seed = self.prepare_sets(X, y, sample_weight)
        model = self._fit_model(sets, seed, **fit_params)
        self.set_fitted(model)
        self._warn_status()
        return self

    def _warn_status(self) -> None:
        """A fit whose status is not clean raises a :class:`~dpp.errors.FitWarning`.

        The command line logs each one as a line of the run's log (:mod:`dpp.experiment.runner`);
        from Python, ``logging.captureWarnings(True)`` does the same.
        """
        warn_unclean(self)

    def describe(self) -> str:
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

    def initial_centres(self, sets: RaggedSets, seed: int) -> np.ndarray:
        """``[K, D']`` float64 starting prototypes ``mu`` of preprocessed sets.

        ``init`` if given, else the previous fit's prototypes (``warm_start``), else k-means of
        the vectors, seeded by ``seed``.

        Raises:
            ValueError: an ``init`` that is not ``[n_prototypes, D']``.
        """
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
            np.asarray(sets.vectors),
            k,
            seed,
            self.kmeans_n_init,
            self.kmeans_max_iter,
            self.kmeans_solver,
        )

    def _warm_model(self, sets: RaggedSets) -> FittedModel | None:
        """The previous fit's model when ``warm_start`` is on and it has the same shapes."""
        model = getattr(self, "model_", None) if self.warm_start else None
        if model is None or model.mu.shape != (self.n_prototypes, sets.dim):
            return None
        return model if model.theta.shape[1] == sets.num_classes else None

    def _fit_model(self, sets: RaggedSets, seed: int) -> FittedModel:
        raise NotImplementedError

    def set_fitted(self, model: FittedModel) -> None:
        """Sets the fitted attributes from ``model``.

        Raises:
            NonFiniteResultError: a parameter of ``model`` is NaN or infinite (every method,
                not only DPP, so no estimator predicts NaN).
        """
        for name, value in (("mu", model.mu), ("log_beta", model.log_beta), ("theta", model.theta)):
            if value is not None and not np.all(np.isfinite(np.asarray(value))):
                raise NonFiniteResultError(f"{model.method} fit produced non-finite {name}")
        self.model_ = model
        self.__dict__.pop("_input_prototypes", None)  # a refit's prototypes_ are its own
        beta = model.beta
        self.beta_ = None if beta is None else (float(beta) if beta.ndim == 0 else beta)
        self.theta_ = np.asarray(model.theta, np.float64)
        self.history_ = np.asarray(model.history, np.float64)
        self.fit_report_ = model.report
        self.n_iter_ = self.fit_report_.rounds if self.fit_report_.iterative else 1
        self.converged_ = None if self.fit_report_.status is None else self.fit_report_.converged

    @property
    def prototypes_(self) -> np.ndarray:
        """``[K, D]`` float64 prototypes in the input units, computed on first read and kept.

        Raises:
            AttributeError: before ``fit`` (so ``hasattr`` and scikit-learn's checks say so).
        """
        if "model_" not in self.__dict__:
            raise AttributeError(f"{type(self).__name__} has no prototypes_ before fit")
        if "_input_prototypes" not in self.__dict__:
            self._input_prototypes = self.model_.input_prototypes(self.preprocess_)
        return self._input_prototypes

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

    def transform(self, X) -> np.ndarray:
        """``[N, K]`` float64 set representations ``z`` (eq. 2 over eq. 3, or eq. 1)."""
        sets = self._prediction_sets(X)
        return np.asarray(self.model_.encode(sets), np.float64)

    # ------------------------------------------------------------------ instance evidence
    def instance_scores(self, X) -> list[np.ndarray]:
        r"""Each vector's contribution to its set's class scores: one ``[M_n, C]`` array per set.

        Row ``x`` of set ``n`` is its share ``s_x`` of the set's representation ``z`` times the
        classifier's weights, :math:`s_x \Theta` (eqs. 2, 3, 16), in logit units (nats). The
        shares sum to ``z`` exactly (:func:`dpp.pooling.segment_shares`): mean pooling's
        ``f(x) / M_n``, max pooling's largest code (split equally at ties), the generalised
        mean's weights. So ``instance_scores(X)[n].sum(0) + intercept_`` are the set's class
        scores, whose log-softmax is ``predict_log_proba(X)[n]`` (to float32 rounding; the
        scores are float64). A vector with a large score in column ``c`` is evidence for class
        ``classes_[c]``; only differences between columns matter to the probabilities.

        Its argument, its result (``N`` float64 arrays ``[M_n, C]``, rows in the order of each
        set's vectors, columns in ``classes_``) and its errors are :meth:`instance_proba`'s.
        """
        sets = self._prediction_sets(X)
        return per_set(self.model_.instance_scores(sets), sets)

    @property
    def intercept_(self) -> np.ndarray:
        """``[C]`` float64 zeros: eq. (16) has no intercept.

        The part of the class scores that no vector carries (see :meth:`instance_scores`).

        Raises:
            AttributeError: before ``fit``.
        """
        theta = self.__dict__.get("theta_")
        if theta is None:
            raise AttributeError(f"{type(self).__name__} is not fitted: no intercept_")
        return np.zeros(theta.shape[1])

    def soft_assignments(self, X) -> list[np.ndarray]:
        """Every vector's code: one ``[M_n, K]`` float64 array per set, rows on the simplex.

        The soft assignment of eq. (3) to the learned prototypes (with an ``embedding``, of the
        embedded vector); for the standard prototype's hard encoder, eq. (1)'s one-hot nearest
        centre. What a set pools into ``z`` (:meth:`transform`).

        Raises:
            sklearn.exceptions.NotFittedError: before ``fit``.
            ValueError: sets that :func:`prediction_sets` refuses.
        """
        sets = self._prediction_sets(X)
        return per_set(self.model_.membership_codes(sets), sets)

    def save(self, path) -> Path:
        """Writes the fitted estimator to one ``.npz`` model file (:mod:`dpp.model_file`).

        The file holds the model in its internal units, the maps into them (preprocessing and
        the normaliser) and every constructor parameter; :func:`dpp.load` reads it back.

        Args:
            path: file to write (``.npz`` is appended by NumPy when missing).

        Returns:
            The path written.

        Raises:
            sklearn.exceptions.NotFittedError: for an unfitted estimator.
        """
        check_is_fitted(self, "model_")
        model: FittedModel = self.model_
        arrays = {
            "mu": np.asarray(model.mu),
            "theta": np.asarray(model.theta),
            "history": np.asarray(model.history, np.float64),
            "normalizer_scale": np.asarray(model.normalizer.scale, np.float64),
        }
        if model.log_beta is not None:
            arrays["log_beta"] = np.asarray(model.log_beta)
        if model.normalizer.shift is not None:
            arrays["normalizer_shift"] = np.asarray(model.normalizer.shift, np.float64)
        for name in type(model.pooling).parameters:  # by name: the generalised mean's rho
            arrays[f"pool_{name}"] = np.asarray(getattr(model.pooling, name), np.float64)
        return write_model_file(self, path, model.method, arrays, self.fit_report_.to_dict())

    #: Arrays of this estimator's model file besides the shared ones (preprocessing and
    #: ``param_init``): ``(required, optional)`` names.
    FILE_ARRAYS: ClassVar[tuple[frozenset, frozenset]] = (
        frozenset({"mu", "theta", "history", "normalizer_scale"}),
        frozenset({"log_beta", "normalizer_shift"})
        | {f"pool_{name}" for cls in POOLING_REGISTRY.values() for name in cls.parameters},
    )

    def file_arrays(self) -> tuple[frozenset, frozenset, str | None]:
        """``(required, optional, prefix)`` names of this estimator's own model-file arrays."""
        return (*self.FILE_ARRAYS, None)

    def restore_arrays(self, path: Path, header: dict, arrays: dict, dim: int) -> None:
        """Sets the fitted model from a model file's arrays (:func:`dpp.load`), checked first.

        Args:
            path: the file (named in every error).
            header: its header (checked by the loader).
            arrays: its arrays (float and finite; the names checked by the loader).
            dim: ``D'``, the features after preprocessing.

        Raises:
            ModelFileError: an array whose shape disagrees with the header or the others.
        """
        k, classes = self.n_prototypes, len(header["classes"])
        shapes = {
            "mu": (k, dim),
            "theta": (k, classes),
            "normalizer_scale": (),
            "normalizer_shift": (dim,),
            "param_init": (k, dim),
        }
        pooling = MEAN
        if self.method == "dpp":
            shapes["log_beta"] = (k,) if self.per_prototype_beta else ()
            if "log_beta" not in arrays:
                raise ModelFileError(f"{path} is damaged: missing array(s) log_beta")
            own = {f"pool_{n}" for n in POOLING_REGISTRY[self.pooling].parameters}
            for name in sorted({n for n in arrays if n.startswith("pool_")} ^ own):
                owner = [k for k, c in POOLING_REGISTRY.items() if name[5:] in c.parameters]
                found = "has" if name in arrays else "lacks"
                raise model_file.bad(
                    path, f"array {name}",
                    f"comes with pooling = {owner[0] if owner else 'none'!r} alone (pooling = "
                    f"{self.pooling!r}, and the file {found} it)",
                )  # fmt: skip
            shapes.update({name: () for name in own})
            pooling = make_pooling(self.pooling, *(arrays[name] for name in sorted(own)))
        check_shapes(path, arrays, shapes, f"n_prototypes = {k}, {classes} classes and {dim} "
                     "features (after preprocessing)")  # fmt: skip
        if arrays["history"].ndim != 1:
            raise model_file.bad(
                path, "array history", f"must be [rounds], got {arrays['history'].shape}"
            )
        if not float(arrays["normalizer_scale"]) > 0:
            raise model_file.bad(path, "array normalizer_scale", "must be > 0")
        normalizer = Normalizer(
            shift=arrays.get("normalizer_shift"), scale=float(arrays["normalizer_scale"])
        )
        log_beta = jnp.asarray(arrays["log_beta"]) if "log_beta" in arrays else None
        model = FittedModel(
            header["method"],
            jnp.asarray(arrays["mu"]),
            log_beta,
            jnp.asarray(arrays["theta"]),
            arrays["history"],
            FitReport.from_dict(header["method"], header["info"], arrays["history"]),
            normalizer,
            pooling,
        )
        self.set_fitted(model)
