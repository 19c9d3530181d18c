"""Reading ``X``, ``y`` and ``sample_weight`` as every estimator over sets does.

See :mod:`dpp.estimators` for the input conventions: a list of ``[M_n, D]`` arrays, an
``[N, M, D]`` array (``N`` sets of ``M`` vectors each), a ``(vectors, set_ids)`` pair, or
:class:`~dpp.sets.RaggedSets`; ``y`` as ``[N]`` class labels or ``[N, C]`` soft labels
(``C >= 2``).
"""

from __future__ import annotations

import numpy as np

from dpp.sets import RaggedSets, one_hot


def as_sets(X, dtype=np.float32) -> RaggedSets:
    """The sets of ``X`` (see the module docstring) as :class:`RaggedSets`, unlabelled.

    A :class:`RaggedSets` is returned as it is (labels included).

    Raises:
        ValueError: no sets, an empty set, a set that is not 2-D, a set of strings or other
            non-numbers, mismatched dimensions, NaN or inf, set ids that are not integers or do
            not match the vectors, an array that is neither ``[N, M, D]`` nor of objects.
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
            f"X must be a list of [M_n, D] arrays, an [N, M, D] array of sets of equal size, a "
            f"(vectors, set_ids) pair or RaggedSets; got an array of shape {X.shape}"
        )
    if isinstance(X, str) or not hasattr(X, "__len__"):
        raise ValueError(
            f"X must be a list of [M_n, D] arrays, an [N, M, D] array of sets of equal size, a "
            f"(vectors, set_ids) pair or RaggedSets; got {type(X).__name__}"
        )
    if len(X) == 0:
        raise ValueError("no sets given: X is an empty list; pass at least one [M_n, D] set")
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


def per_set(rows: np.ndarray, sets: RaggedSets) -> list[np.ndarray]:
    """The ``[T, ...]`` rows of every membership split into one array per set, in set order.

    Each set's rows are its vectors in the order they were given (a list's arrays, a
    ``(vectors, set_ids)`` pair's vectors of that set).
    """
    return np.split(np.asarray(rows), np.cumsum(sets.set_sizes())[:-1])


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
        if y.shape[1] < 2:
            raise ValueError(
                f"soft labels need a column per class and at least 2 classes; y has shape "
                f"{y.shape} (one class): pass [N] class labels, or [N, C] with C >= 2"
            )
        return y.astype(np.float64), np.arange(y.shape[1]), True
    if y.ndim != 1:
        raise ValueError(f"y must be [N] class labels or [N, C] soft labels, got {y.shape}")
    import pandas as pd  # noqa: PLC0415  (imported where labels need it: import dpp stays light)

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
        ValueError: no labels, a count mismatch, fewer than 2 classes (one soft-label column
            too), labels off the simplex,
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
