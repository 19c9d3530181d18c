"""Train/test splits of sets (scikit-learn) and per-split preprocessing of the vectors.

Preprocessing statistics (standardisation, PCA) are always fitted on the training vectors only.
"""

from __future__ import annotations

import numpy as np
from sklearn.decomposition import PCA
from sklearn.model_selection import train_test_split
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import StandardScaler

from dpp.sets import RaggedSets

SPLIT_KINDS = ("stratified", "random", "per_class")


def split_indices(
    labels: np.ndarray,
    kind: str,
    seed: int,
    train_fraction: float | None = None,
    train_per_class: int | None = None,
    subsample: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Indices of the training and test sets.

    Args:
        labels: ``[N, C]`` labels; strata are their argmax.
        kind: ``stratified`` (a fraction per class, scikit-learn ``train_test_split``),
            ``random`` (a fraction, ignoring classes) or ``per_class`` (``train_per_class`` sets
            of every class, the rest for testing).
        seed: random state.
        train_fraction: fraction of sets for training (``stratified``/``random``).
        train_per_class: training sets per class (``per_class``).
        subsample: if set, first draw this many sets at random (with ``seed``) and split them;
            the other sets are in neither part.

    Returns:
        ``(train_idx, test_idx)``, sorted int64 arrays, disjoint; they partition ``0..N-1``
        unless ``subsample`` is set.

    Raises:
        ValueError: unknown kind, missing or out-of-range sizes, or a class too small for
            ``train_per_class`` plus one test set.
    """
    labels = np.asarray(labels)
    if kind not in SPLIT_KINDS:
        raise ValueError(f"unknown split kind {kind!r}; choose from {SPLIT_KINDS}")
    if subsample is not None:
        if not 2 <= subsample <= labels.shape[0]:
            raise ValueError(f"subsample must lie in [2, {labels.shape[0]}], got {subsample}")
        chosen = np.sort(
            np.random.default_rng(seed).choice(labels.shape[0], subsample, replace=False)
        )
        train, test = split_indices(labels[chosen], kind, seed, train_fraction, train_per_class)
        return chosen[train], chosen[test]
    n = labels.shape[0]
    strata = np.argmax(labels, axis=1)
    if kind == "per_class":
        if not train_per_class or train_per_class < 1:
            raise ValueError("split kind per_class needs train_per_class >= 1")
        counts = np.bincount(strata, minlength=labels.shape[1])
        present = counts[counts > 0]
        if np.any(present <= train_per_class):
            raise ValueError(
                f"per_class split needs more than {train_per_class} sets in every class; "
                f"smallest class has {present.min()}"
            )
        rng = np.random.default_rng(seed)
        perm = rng.permutation(n)
        order = perm[np.argsort(strata[perm], kind="stable")]  # shuffled within each class
        first = np.searchsorted(strata[order], strata[order])
        rank = np.arange(n) - first
        train = np.sort(order[rank < train_per_class])
    else:
        if train_fraction is None or not 0 < train_fraction < 1:
            raise ValueError(f"split kind {kind} needs 0 < train_fraction < 1")
        train, _ = train_test_split(
            np.arange(n),
            train_size=train_fraction,
            random_state=seed,
            stratify=strata if kind == "stratified" else None,
        )
        train = np.sort(train)
    test = np.setdiff1d(np.arange(n), train)
    return train, test


def prepare(
    train: RaggedSets,
    test: RaggedSets,
    standardize: bool = False,
    pca_components: int | None = None,
    fit_vectors: np.ndarray | None = None,
) -> tuple[RaggedSets, RaggedSets, Pipeline | None]:
    """Standardises and/or projects the vectors with statistics of the training part only.

    Args:
        train: training sets.
        test: test sets.
        standardize: scale every feature to zero mean and unit variance (scikit-learn
            ``StandardScaler``).
        pca_components: if set, project on this many principal components of the
            (standardised) training vectors.
        fit_vectors: ``[F, D]`` vectors to fit the statistics on (e.g. the training pixels'
            own spectra); default ``train.vectors``.

    Returns:
        ``(train, test, transform)``: the sets with transformed vectors and the fitted
        scikit-learn pipeline (``None`` when there is nothing to do), whose
        ``inverse_transform`` maps back to the loader's units.

    Raises:
        ValueError: if ``pca_components`` exceeds the dimension.
    """
    steps = []
    if standardize:
        steps.append(StandardScaler())
    if pca_components:
        if pca_components > train.dim:
            raise ValueError(f"pca_components = {pca_components} exceeds D = {train.dim}")
        steps.append(PCA(n_components=pca_components, random_state=0))
    if not steps:
        return train, test, None
    transform = make_pipeline(*steps)
    transform.fit(np.asarray(train.vectors if fit_vectors is None else fit_vectors, np.float64))
    x_train = transform.transform(np.asarray(train.vectors, np.float64))
    x_test = transform.transform(np.asarray(test.vectors, np.float64))
    return train.with_vectors(x_train), test.with_vectors(x_test), transform
