"""What a practitioner tries first, as estimators: pool each set, then logistic regression.

Two scikit-learn estimators over the same inputs as :mod:`dpp.estimators`, both ending in
scikit-learn's multinomial ``LogisticRegression`` (:class:`~dpp.baselines.pooling.LogisticHead`)
with its inverse ridge strength ``C`` chosen by cross-validation of the mean validation
log-likelihood per set:

* :class:`PoolingClassifier`: each set's mean, max or both of its vectors (no prototypes);
* :class:`BagOfWordsClassifier`: k-means centres and each set's histogram of nearest centres
  (eqs. 1, 2: the standard prototype's codes), with its features standardised and its own ``C``
  (the standard prototype shares DPP's Theta-step and ``lambda`` instead).

Both save and load through the model file (:mod:`dpp.model_file`) like every estimator.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import ClassVar

import jax.numpy as jnp
import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.validation import check_is_fitted

from dpp import model_file
from dpp import params as check
from dpp.baselines.pooling import DEFAULT_CS, POOLINGS, LogisticHead, pool_sets, pooled_shares
from dpp.baselines.standard import hard_code_model
from dpp.errors import warn_caller
from dpp.estimators.base import SCORINGS, PreprocessedFit, SetClassifierMixin
from dpp.estimators.inputs import per_set, prediction_sets
from dpp.estimators.saving import check_shapes, write_model_file
from dpp.init import KMEANS_MAX_ITER, KMEANS_N_INIT, KMEANS_SOLVER, KMEANS_SOLVERS, kmeans_centres
from dpp.metrics import weighted_score
from dpp.model import CSelection, FitReport, FittedModel
from dpp.selection import EDGES, MAX_EXTENSIONS, choose_on_path, cv_splits, edge_message
from dpp.sets import RaggedSets
from dpp.units import Affine, Normalizer

logger = logging.getLogger(__name__)


class PooledLogisticClassifier(SetClassifierMixin, PreprocessedFit, ClassifierMixin, BaseEstimator):
    """Shared machinery: features of each set, then :class:`LogisticHead` with ``C`` by CV.

    Subclasses set :attr:`method` and implement ``_fit_features`` and ``_features``. Fitted
    attributes: ``classes_``, ``n_features_in_``, ``C_``, ``C_position_`` (``interior``,
    ``strongest edge``, ``weakest edge`` or ``only value``: where the chosen ``C`` lies among
    those scored), ``Cs_added_`` (values scored beyond ``Cs``), ``cv_results_`` (``param_C``,
    ``mean_test_score``), ``fit_report_`` (:class:`dpp.FitReport`: ``status``
    ``converged`` or ``max_rounds`` for the final fit, with its reason, and the selection),
    ``history_`` (empty: no rounds).
    """

    method: ClassVar[str] = ""
    uses_centres: ClassVar[bool] = False
    #: The rules of the parameters (besides ``Cs``, a list); subclasses extend it.
    PARAMETER_RULES: ClassVar[dict[str, check.Rule]] = {
        "scoring": check.Choice(SCORINGS),
        "max_extensions": check.Int(0),
        "max_iter": check.Int(1),
        "random_state": check.Optional(check.Int(0)),
    }

    def check_params(self) -> None:
        """Checks the parameters shared by the pooled classifiers.

        Raises:
            ValueError: naming the parameter, the rule and the value.
        """
        cs = list(self.Cs) if np.ndim(self.Cs) == 1 else []
        if not cs:
            raise ValueError(f"Cs must be a non-empty list of values > 0, got {self.Cs!r}")
        for i, c in enumerate(cs):
            check.number(f"Cs[{i}]", c, low=0, low_open=True)
        check.check_table(self, self.PARAMETER_RULES)

    def fit(self, X, y=None, sample_weight=None, groups=None):
        """Chooses ``C`` by cross-validation on the training sets, then fits on all of them.

        Args:
            X: ``N`` training sets (list of ``[M_n, D]`` arrays, ``RaggedSets`` or a
                ``(vectors, set_ids)`` pair).
            y: ``[N]`` class labels or ``[N, C]`` soft labels; ``None`` for labelled
                ``RaggedSets``.
            sample_weight: optional ``[N]`` non-negative per-set weights.
            groups: optional ``[N]`` group of each set; the folds then keep groups whole (the
                spatial blocks of a ``spatial_blocks`` split, as ``DPPClassifierCV``).

        Returns:
            ``self``.

        Raises:
            ValueError: bad parameters or inputs (naming which).
        """
        t0 = time.perf_counter()
        sets, seed = self.prepare_sets(X, y, sample_weight)
        self._fit_features(sets, seed)
        features = self._features(sets)
        labels = np.asarray(sets.labels, np.float64)
        weights = np.asarray(sets.weights, np.float64)
        folds = cv_splits(self.cv, labels, seed, groups)
        heads = [
            LogisticHead(features[fit], labels[fit], weights[fit], self.max_iter)
            for fit, _ in folds
        ]

        def score(strength: float) -> float:  # strength = 1 / C; each fold's path goes on
            return float(
                np.mean(
                    [
                        weighted_score(
                            head.fit(1.0 / strength).log_proba(features[val]),
                            labels[val],
                            weights[val],
                            self.scoring,
                        )
                        for head, (_, val) in zip(heads, folds, strict=True)
                    ]
                )
            )

        strengths = sorted({1.0 / float(c) for c in self.Cs}, reverse=True)  # smallest C first
        choice = choose_on_path(
            strengths, [score(s) for s in strengths], score, int(self.max_extensions)
        )
        self.C_ = 1.0 / choice.values[choice.best]
        self.C_position_ = choice.position
        in_c = choice._replace(values=[1.0 / v for v in choice.values])
        separable = choice.position == "weakest edge" and all(
            np.all(head.fit(self.C_).log_proba(features[val]).argmax(1) == labels[val].argmax(1))
            for head, (_, val) in zip(heads, folds, strict=True)
        )
        if separable:  # the edge is the answer: no finite C is best, the fit is not in doubt
            logger.info(
                "%s: C = %.3g, the weakest scored: every fold's held-out sets are classified "
                "without error there, so the classes are separable in these features and a "
                "weaker penalty only sharpens the probabilities (C_position_ %r)",
                type(self).__name__, self.C_, choice.position,
            )  # fmt: skip
        elif choice.position in EDGES:  # values are strengths 1 / C: say it in C
            warn_caller(edge_message(type(self).__name__, "C", in_c, self.max_extensions))
        self.Cs_added_ = [1.0 / s for s in choice.added]
        self.cv_results_ = {
            "param_C": np.array([1.0 / s for s in choice.values]),
            "mean_test_score": np.asarray(choice.scores),
        }
        self.head_ = LogisticHead(features, labels, weights, self.max_iter).fit(self.C_)
        status = "converged" if self.head_.converged else "max_rounds"
        reason = (
            f"lbfgs converged in {self.head_.iterations} iterations"
            if self.head_.converged
            else f"lbfgs stopped at max_iter = {self.max_iter} iterations"
        )
        self.history_ = np.zeros(0)
        self.fit_report_ = FitReport(
            self.method,
            status,
            reason,
            seconds=time.perf_counter() - t0,
            selection=CSelection(float(self.C_), self.C_position_, tuple(self.Cs_added_)),
        )
        return self

    #: Arrays of this estimator's model file besides the shared ones: ``(required, optional)``.
    FILE_ARRAYS: ClassVar[tuple[frozenset, frozenset]] = (
        frozenset({"scaler_mean", "scaler_scale", "coef", "intercept"}),
        frozenset(),
    )

    def file_arrays(self) -> tuple[frozenset, frozenset, str | None]:
        """``(required, optional, prefix)`` names of this estimator's own model-file arrays."""
        return (*self.FILE_ARRAYS, None)

    def save(self, path) -> Path:
        """Writes the fitted estimator to one ``.npz`` model file (:mod:`dpp.model_file`).

        The file holds the logistic regression (the features' scaler, ``coef_``,
        ``intercept_``), what the features need (the bag-of-words' centres) and the
        preprocessing map, with every constructor parameter; :func:`dpp.load` reads it back.

        Args:
            path: file to write.

        Returns:
            The path written.

        Raises:
            sklearn.exceptions.NotFittedError: for an unfitted estimator.
        """
        check_is_fitted(self, "head_")
        arrays = {**self.head_.arrays(), **self._feature_arrays()}
        return write_model_file(self, path, self.method, arrays, self.fit_report_.to_dict())

    def _feature_arrays(self) -> dict[str, np.ndarray]:
        """What the features need beyond the preprocessing (nothing for pooling)."""
        return {}

    def _num_features(self, dim: int) -> int:
        """``F``, the features of a set (``dim``: the vectors' ``D'`` after preprocessing)."""
        raise NotImplementedError

    def restore_arrays(self, path: Path, header: dict, arrays: dict, dim: int) -> None:
        """Sets the fitted head from a model file's arrays (:func:`dpp.load`), checked first.

        Raises:
            ModelFileError: an array whose shape disagrees with the header or the others.
        """
        classes = len(header["classes"])
        rows, features = (1 if classes == 2 else classes), self._num_features(dim)
        shapes = {
            "scaler_mean": (features,),
            "scaler_scale": (features,),
            "coef": (rows, features),
            "intercept": (rows,),
        }
        check_shapes(path, arrays, shapes, f"{classes} classes and {features} set features")
        if not np.all(arrays["scaler_scale"] > 0):
            raise model_file.bad(path, "array scaler_scale", "must be > 0")
        self._restore_features(path, arrays, dim)
        self.head_ = LogisticHead.from_arrays(arrays, classes)
        self.fit_report_ = FitReport.from_dict(self.method, header["info"])
        self.history_ = np.zeros(0)
        selection = self.fit_report_.selection
        self.C_ = None if selection is None else selection.C
        self.C_position_ = None if selection is None else selection.position
        self.Cs_added_ = None if selection is None else list(selection.added)

    def _restore_features(self, path: Path, arrays: dict, dim: int) -> None:
        """Sets what the features need from a model file (nothing for pooling)."""

    def _fit_preprocess(self, sets: RaggedSets) -> Affine | None:
        """The prefit ``preprocess`` (checked), else none (the pooled features are scaled)."""
        if self.preprocess is None:
            return None
        return Affine.prefit(self.preprocess, sets.dim)

    def _fit_features(self, sets: RaggedSets, seed: int) -> None:
        """Fits what the features need (k-means centres) on preprocessed sets; nothing here."""

    def _features(self, sets: RaggedSets) -> np.ndarray:
        """``[N, F]`` features of preprocessed sets."""
        raise NotImplementedError

    def predict_log_proba(self, X) -> np.ndarray:
        """``[N, C]`` float64 log class probabilities, columns in ``classes_``.

        Raises:
            sklearn.exceptions.NotFittedError: before ``fit``.
            ValueError: sets whose dimension differs from the training sets'.
        """
        check_is_fitted(self, "head_")
        sets = self._preprocessed(prediction_sets(X, self))
        return np.asarray(self.head_.log_proba(self._features(sets)), np.float64)

    def transform(self, X) -> np.ndarray:
        """``[N, F]`` float64 pooled features of each set, the logistic regression's input.

        The features before the fitted scaler (the pooled statistics, or the bag-of-words
        histogram), in the units of the preprocessed vectors.

        Raises:
            sklearn.exceptions.NotFittedError: before ``fit``.
            ValueError: sets whose dimension differs from the training sets'.
        """
        check_is_fitted(self, "head_")
        sets = self._preprocessed(prediction_sets(X, self))
        return np.asarray(self._features(sets), np.float64)

    def _feature_shares(self, sets: RaggedSets) -> np.ndarray:
        """``[T, F]`` each vector's share of its set's features (they sum to them)."""
        raise NotImplementedError

    def instance_scores(self, X) -> list[np.ndarray]:
        """Each vector's contribution to its set's logits: one ``[M_n, C]`` array per set.

        The features are sums over a set's vectors (a mean's ``x / M``, a max's winner, a
        histogram's ``1 / M`` at the nearest centre: :func:`~dpp.baselines.pooling.pooled_shares`)
        and the standardised logistic regression is linear in them
        (:meth:`~dpp.baselines.pooling.LogisticHead.linear`), so each vector's share through
        its weights is its part of the logits; ``instance_scores(X)[n].sum(0) + intercept_``
        are set ``n``'s logits, whose log-softmax is ``predict_log_proba(X)[n]``.

        Returns:
            ``N`` float64 arrays ``[M_n, C]`` (logit units), columns in ``classes_``.

        Raises:
            sklearn.exceptions.NotFittedError: before ``fit``.
            ValueError: sets that :func:`~dpp.estimators.base.prediction_sets` refuses.
        """
        check_is_fitted(self, "head_")
        sets = self._preprocessed(prediction_sets(X, self))
        return per_set(self._feature_shares(sets) @ self.head_.linear()[0], sets)

    @property
    def intercept_(self) -> np.ndarray:
        """``[C]`` float64: the logits' part no vector carries (the scaler folded in).

        Raises:
            AttributeError: before ``fit``.
        """
        head = self.__dict__.get("head_")
        if head is None:
            raise AttributeError(f"{type(self).__name__} is not fitted: no intercept_")
        return head.linear()[1]


class PoolingClassifier(PooledLogisticClassifier):
    """Each set's mean, max or mean and max of its vectors, into logistic regression.

    The pooled features are standardised (scikit-learn ``StandardScaler``) and classified by
    scikit-learn's multinomial ``LogisticRegression``; ``C`` is chosen from ``Cs`` by
    cross-validation of the mean validation log-likelihood per set, the grid extended while the
    best ``C`` lies at its edge (:func:`dpp.selection.choose_on_path`).

    Args:
        pooling: ``mean``, ``max`` or ``mean_max`` (:func:`pool_sets`).
        Cs: candidate ``C`` values (> 0).
        cv: folds of the selection, as :func:`dpp.selection.cv_splits` reads them.
        scoring: ``log_likelihood`` or ``accuracy`` (the selection's score).
        max_extensions: values that may be added beyond each end of ``Cs``.
        max_iter: lbfgs iterations of each logistic regression.
        random_state: seed of the folds (``None``: a fresh one, as every estimator here).
        preprocess: a prefit :class:`~dpp.units.Affine` applied to the vectors before they are
            pooled (the experiments' per-trial map); ``None``: the vectors as given.
    """

    method = "pooling"

    def __init__(
        self,
        pooling: str = "mean_max",
        Cs=DEFAULT_CS,
        cv=5,
        scoring: str = "log_likelihood",
        max_extensions: int = MAX_EXTENSIONS,
        max_iter: int = 1000,
        random_state: int | None = 0,
        preprocess: Affine | None = None,
    ):
        self.pooling = pooling
        self.Cs = Cs
        self.cv = cv
        self.scoring = scoring
        self.max_extensions = max_extensions
        self.max_iter = max_iter
        self.random_state = random_state
        self.preprocess = preprocess

    PARAMETER_RULES: ClassVar[dict[str, check.Rule]] = {
        **PooledLogisticClassifier.PARAMETER_RULES,
        "pooling": check.Choice(POOLINGS),
    }

    def _features(self, sets: RaggedSets) -> np.ndarray:
        return pool_sets(sets, self.pooling)

    def _feature_shares(self, sets: RaggedSets) -> np.ndarray:
        return pooled_shares(sets, self.pooling)

    def _num_features(self, dim: int) -> int:
        return 2 * dim if self.pooling == "mean_max" else dim


class BagOfWordsClassifier(PooledLogisticClassifier):
    """k-means bag-of-words: each set's histogram of nearest centres, into logistic regression.

    The centres are k-means centres of the training vectors (:func:`dpp.init.kmeans_centres`);
    a set's features are the shares of its vectors nearest each centre (eqs. 1, 2), standardised
    and classified by scikit-learn's ``LogisticRegression`` with ``C`` chosen as in
    :class:`PoolingClassifier`. The selection's folds share the centres fitted on all the
    training vectors (k-means sees no label; the standard prototype's selection does the same).

    Args:
        n_prototypes: ``K``, the number of centres (words).
        standardize: scale every feature of the vectors to zero mean and unit variance before
            k-means (fitted on the training vectors).
        preprocess: a prefit :class:`~dpp.units.Affine` used instead of ``standardize``
            (the experiments' per-trial map).
        init: ``"k-means"`` or ``[K, D]`` centres (in the units after ``standardize``).
        kmeans_n_init: k-means restarts.
        kmeans_max_iter: Lloyd iterations per restart.
        kmeans_solver: which k-means starts the prototypes: ``auto`` (the default: JAX's on
            the device for large problems, scikit-learn's otherwise), ``scikit-learn`` or ``jax``
            (:data:`dpp.init.KMEANS_SOLVERS`).

    ``Cs``, ``cv``, ``scoring``, ``max_extensions``, ``max_iter`` and ``random_state`` are as
    :class:`PoolingClassifier`'s (``random_state`` seeds k-means too).

    Fitted: ``prototypes_`` ``[K, D]`` (the centres in the input units) and the attributes of
    :class:`PooledLogisticClassifier`.
    """

    method = "bag_of_words"
    uses_centres = True

    def __init__(
        self,
        n_prototypes: int = 10,
        standardize: bool = True,
        preprocess: Affine | None = None,
        init="k-means",
        kmeans_n_init: int = KMEANS_N_INIT,
        kmeans_max_iter: int = KMEANS_MAX_ITER,
        kmeans_solver: str = KMEANS_SOLVER,
        Cs=DEFAULT_CS,
        cv=5,
        scoring: str = "log_likelihood",
        max_extensions: int = MAX_EXTENSIONS,
        max_iter: int = 1000,
        random_state: int | None = 0,
    ):
        self.n_prototypes = n_prototypes
        self.standardize = standardize
        self.preprocess = preprocess
        self.init = init
        self.kmeans_n_init = kmeans_n_init
        self.kmeans_max_iter = kmeans_max_iter
        self.kmeans_solver = kmeans_solver
        self.Cs = Cs
        self.cv = cv
        self.scoring = scoring
        self.max_extensions = max_extensions
        self.max_iter = max_iter
        self.random_state = random_state

    PARAMETER_RULES: ClassVar[dict[str, check.Rule]] = {
        **PooledLogisticClassifier.PARAMETER_RULES,
        "n_prototypes": check.Int(1),
        "standardize": check.Bool(),
        "kmeans_n_init": check.Int(1),
        "kmeans_max_iter": check.Int(1),
        "kmeans_solver": check.Choice(KMEANS_SOLVERS),
    }

    def _fit_preprocess(self, sets: RaggedSets) -> Affine | None:
        if self.preprocess is not None:
            return Affine.prefit(self.preprocess, sets.dim)
        return Affine.fit(np.asarray(sets.vectors), self.standardize, None)

    def _fit_features(self, sets: RaggedSets, seed: int) -> None:
        k = int(self.n_prototypes)
        if isinstance(self.init, str) and self.init == "k-means":
            vectors = np.asarray(sets.vectors, np.float64)
            centres = kmeans_centres(
                vectors,
                k,
                seed,
                self.kmeans_n_init,
                self.kmeans_max_iter,
                self.kmeans_solver,
            )
        else:
            centres = np.asarray(self.init, np.float64)
            if centres.shape != (k, sets.dim):
                raise ValueError(
                    f"init must be [n_prototypes, D] = [{k}, {sets.dim}] centres (in the units "
                    f"after standardize), got {centres.shape}"
                )
        # eqs. (1, 2) as the standard prototype codes them (internal units, blocked scatter-add)
        self.encoder_ = hard_code_model(sets, centres, self.method)
        inverse = self.preprocess_.inverse if self.preprocess_ is not None else np.asarray
        self.prototypes_ = inverse(centres)

    def _features(self, sets: RaggedSets) -> np.ndarray:
        return np.asarray(self.encoder_.encode(sets), np.float64)

    def _feature_shares(self, sets: RaggedSets) -> np.ndarray:
        return self.encoder_.membership_shares(sets)

    FILE_ARRAYS: ClassVar[tuple[frozenset, frozenset]] = (
        PooledLogisticClassifier.FILE_ARRAYS[0] | {"mu", "normalizer_scale"},
        frozenset({"normalizer_shift"}),
    )

    def _num_features(self, dim: int) -> int:
        return int(self.n_prototypes)

    def _feature_arrays(self) -> dict[str, np.ndarray]:
        """The centres in the encoder's internal units and its normaliser."""
        encoder = self.encoder_
        arrays = {
            "mu": np.asarray(encoder.mu, np.float64),
            "normalizer_scale": np.asarray(encoder.normalizer.scale, np.float64),
        }
        if encoder.normalizer.shift is not None:
            arrays["normalizer_shift"] = np.asarray(encoder.normalizer.shift, np.float64)
        return arrays

    def _restore_features(self, path: Path, arrays: dict, dim: int) -> None:
        """The hard encoder of the saved centres (eqs. 1, 2) and ``prototypes_``."""
        k = int(self.n_prototypes)
        shapes = {"mu": (k, dim), "normalizer_shift": (dim,), "normalizer_scale": ()}
        check_shapes(path, arrays, shapes, f"n_prototypes = {k} and {dim} features")
        if not float(arrays["normalizer_scale"]) > 0:
            raise model_file.bad(path, "array normalizer_scale", "must be > 0")
        normalizer = Normalizer(
            shift=arrays.get("normalizer_shift"), scale=float(arrays["normalizer_scale"])
        )
        mu = jnp.asarray(arrays["mu"], jnp.float32)
        theta = jnp.zeros((k, 2), jnp.float32)  # the encoder's Theta is never used
        report = FitReport(self.method)
        self.encoder_ = FittedModel(self.method, mu, None, theta, np.zeros(0), report, normalizer)
        centres = self.encoder_.prototypes
        self.prototypes_ = (
            centres if self.preprocess_ is None else self.preprocess_.inverse(centres)
        )
