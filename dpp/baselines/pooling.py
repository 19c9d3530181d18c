"""What a practitioner tries first, its numerics: pool each set into one vector; a logistic head.

* :func:`pool_sets`: each set's mean, max or both of its vectors;
* :class:`LogisticHead`: standardised features into scikit-learn's multinomial
  ``LogisticRegression``, soft labels fitted exactly: a set ``n`` becomes one row per class ``j``
  with ``P~_nj > 0``, weighted ``w_n P~_nj``, so the weighted log-loss is eq. (17)'s
  ``sum_n w_n sum_j P~_nj log p_nj``. A class with no label mass gets one row of weight 0, so
  every class has a column (and a small, finite probability).

The estimators over them, :class:`~dpp.estimators.pooled.PoolingClassifier` and
:class:`~dpp.estimators.pooled.BagOfWordsClassifier`, live in :mod:`dpp.estimators.pooled`
(the estimator layer sits above the numerics); the names still resolve from here.
"""

from __future__ import annotations

import warnings

import numpy as np
from scipy.special import log_softmax
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import StandardScaler
from threadpoolctl import threadpool_limits

from dpp import params as check
from dpp.sets import RaggedSets

POOLINGS = ("mean", "max", "mean_max")
#: Default candidates of ``C`` (the inverse ridge strength of scikit-learn's logistic regression).
DEFAULT_CS = (1e-3, 1e-2, 1e-1, 1.0, 10.0, 100.0)


def pool_sets(sets: RaggedSets, pooling: str) -> np.ndarray:
    """One vector per set: the mean, the max, or both side by side, of its vectors.

    Args:
        sets: ``N`` sets (either layout; every set non-empty).
        pooling: ``mean``, ``max`` or ``mean_max``.

    Returns:
        ``[N, D]`` (``[N, 2D]`` for ``mean_max``, mean first) float64.

    Raises:
        ValueError: an unknown ``pooling`` or an empty set.
    """
    check.choice("pooling", pooling, POOLINGS)
    vectors = np.asarray(sets.member_vectors(), np.float64)
    sizes = sets.set_sizes()
    if np.any(sizes == 0):
        raise ValueError(f"set {int(np.flatnonzero(sizes == 0)[0])} is empty; it cannot be pooled")
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])  # set_ids are sorted ascending
    parts = []
    if pooling in ("mean", "mean_max"):
        parts.append(np.add.reduceat(vectors, starts, axis=0) / sizes[:, None])
    if pooling in ("max", "mean_max"):
        parts.append(np.maximum.reduceat(vectors, starts, axis=0))
    return np.concatenate(parts, axis=1)


def pooled_shares(sets: RaggedSets, pooling: str) -> np.ndarray:
    """``[T, F]`` each vector's share of its set's :func:`pool_sets` features: they sum to them.

    The mean's ``x / M``; the max's largest value, split equally among the vectors that hold
    it (every other vector 0); ``mean_max`` both side by side.

    Args:
        sets: ``N`` sets (either layout; every set non-empty).
        pooling: ``mean``, ``max`` or ``mean_max``.

    Returns:
        ``[T, D]`` (``[T, 2D]`` for ``mean_max``) float64, rows in membership order.
    """
    check.choice("pooling", pooling, POOLINGS)
    vectors = np.asarray(sets.member_vectors(), np.float64)
    sizes = sets.set_sizes()
    ids = np.repeat(np.arange(sizes.size), sizes)
    parts = []
    if pooling in ("mean", "mean_max"):
        parts.append(vectors / sizes[ids, None])
    if pooling in ("max", "mean_max"):
        largest = pool_sets(sets, "max")[:, -vectors.shape[1] :][ids]
        ties = vectors == largest
        count = np.zeros((sizes.size, vectors.shape[1]))
        np.add.at(count, ids, ties)
        parts.append(np.where(ties, largest / count[ids], 0.0))
    return np.concatenate(parts, axis=1)


def _rows(features, labels, weights):
    """Rows, classes and weights of the weighted log-loss equal to eq. (17) for soft labels."""
    n, j = np.nonzero(labels > 0)
    missing = np.setdiff1d(np.arange(labels.shape[1]), j)
    rows = np.concatenate([features[n], np.repeat(features[:1], missing.size, axis=0)])
    classes = np.concatenate([j, missing])
    row_weights = np.concatenate([weights[n] * labels[n, j], np.zeros(missing.size)])
    return rows, classes, row_weights


class LogisticHead:
    """Standardised features into scikit-learn's multinomial ``LogisticRegression``.

    Fitted once per ``C`` on the same features; each fit starts from the previous solution
    (``warm_start``: the problem is convex, so only the iterations change). scikit-learn runs
    with one BLAS/OpenMP thread: on these small problems that was 5x faster on 2 cores
    (Indian Pines' pooled features, 1,000 x 400, 10 classes: 2.0 s for 6 values of ``C``
    against 11.0 s).

    Args:
        features: ``[N, F]`` features of the training sets.
        labels: ``[N, C]`` (soft) labels.
        weights: ``[N]`` set weights.
        max_iter: lbfgs iterations of each fit.
    """

    def __init__(self, features, labels, weights, max_iter: int):
        self.max_iter = int(max_iter)
        self.scaler = StandardScaler().fit(features)
        self.rows = _rows(self.scaler.transform(features), labels, weights)
        self.model = LogisticRegression(max_iter=self.max_iter, warm_start=True)

    def fit(self, C: float) -> LogisticHead:
        """Fits with inverse ridge strength ``C``; sets ``converged``."""
        rows, classes, row_weights = self.rows
        with warnings.catch_warnings(), threadpool_limits(1):
            warnings.simplefilter("ignore", ConvergenceWarning)  # told by converged below
            self.model.set_params(C=float(C)).fit(rows, classes, sample_weight=row_weights)
        self.iterations = int(np.max(self.model.n_iter_))
        self.converged = self.iterations < self.max_iter
        return self

    def arrays(self) -> dict[str, np.ndarray]:
        """The fitted head as float64 arrays (``scaler_mean``, ``scaler_scale``, ``coef``, ...)."""
        return {
            "scaler_mean": np.asarray(self.scaler.mean_, np.float64),
            "scaler_scale": np.asarray(self.scaler.scale_, np.float64),
            "coef": np.asarray(self.model.coef_, np.float64),
            "intercept": np.asarray(self.model.intercept_, np.float64),
        }

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray], num_classes: int) -> LogisticHead:
        """A fitted head from :meth:`arrays` (a loaded model file), predicting as the saved one.

        Args:
            arrays: ``scaler_mean`` ``[F]``, ``scaler_scale`` ``[F]``, ``coef`` ``[C, F]``
                (``[1, F]`` for two classes) and ``intercept`` ``[C]`` (``[1]``).
            num_classes: ``C``.
        """
        head = cls.__new__(cls)
        head.max_iter = 0
        features = arrays["scaler_mean"].shape[0]
        head.scaler = StandardScaler()
        head.scaler.mean_, head.scaler.scale_ = arrays["scaler_mean"], arrays["scaler_scale"]
        head.scaler.var_ = arrays["scaler_scale"] ** 2
        head.scaler.n_features_in_, head.scaler.n_samples_seen_ = features, 1
        head.model = LogisticRegression()
        head.model.coef_, head.model.intercept_ = arrays["coef"], arrays["intercept"]
        head.model.classes_ = np.arange(num_classes)
        head.model.n_features_in_ = features
        return head

    def linear(self) -> tuple[np.ndarray, np.ndarray]:
        """``(W [F, C], b [C])`` float64 with ``logits = features @ W + b`` (the scaler folded in).

        The logits whose log-softmax is :meth:`log_proba` (two classes: ``[0, d]``, the
        convention of :meth:`log_proba`); linear in the raw features, so they split over
        whatever the features are sums of.
        """
        coef = np.asarray(self.model.coef_, np.float64) / self.scaler.scale_  # [C or 1, F]
        intercept = np.asarray(self.model.intercept_, np.float64) - coef @ self.scaler.mean_
        if coef.shape[0] == 1:  # two classes: one logit, log p(class 1) - log p(class 0)
            coef = np.concatenate([np.zeros_like(coef), coef])
            intercept = np.concatenate([[0.0], intercept])
        return coef.T, intercept

    def log_proba(self, features) -> np.ndarray:
        """``[N, C]`` log class probabilities (every class a column), finite.

        The log-softmax of the logits: ``predict_log_proba`` takes the log of probabilities
        that may have underflowed to 0.
        """
        logits = self.model.decision_function(self.scaler.transform(features))
        if logits.ndim == 1:  # two classes: one logit, log p(class 1) - log p(class 0)
            logits = np.stack([np.zeros_like(logits), logits], axis=1)
        return log_softmax(logits, axis=1)
