"""Train/test splits of sets (scikit-learn): stratified, random, per class, spatial blocks.

The preprocessing of a split's vectors is :class:`dpp.units.Affine`, fitted on its training part.
"""

from __future__ import annotations

import numpy as np
from scipy import ndimage
from sklearn.model_selection import train_test_split

from dpp.selection import holdout_split  # noqa: F401  (re-exported: its old home)

SPLIT_KINDS = ("stratified", "random", "per_class", "spatial_blocks")


def split_indices(
    labels: np.ndarray,
    kind: str,
    seed: int,
    train_fraction: float | None = None,
    train_per_class: int | None = None,
    subsample: int | None = None,
    positions: np.ndarray | None = None,
    block_size: int | None = None,
    buffer: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Indices of the training and test sets.

    Args:
        labels: ``[N, C]`` labels; strata are their argmax.
        kind: ``stratified`` (a fraction per class, scikit-learn ``train_test_split``),
            ``random`` (a fraction, ignoring classes), ``per_class`` (``train_per_class`` sets
            of every class, the rest for testing) or ``spatial_blocks`` (sets on an image grid;
            see :func:`spatial_block_split`).
        seed: random state.
        train_fraction: fraction of sets for training (``stratified``/``random``).
        train_per_class: training sets per class (``per_class``).
        subsample: if set, first draw this many sets at random (with ``seed``) and split them;
            the other sets are in neither part.
        positions: ``[N, 2]`` (row, column) of each set (``spatial_blocks`` only).
        block_size: side of the square blocks in pixels (``spatial_blocks`` only).
        buffer: Chebyshev distance in pixels that a test set must exceed from every training
            set (``spatial_blocks`` only; the window diameter minus one keeps every test
            window free of training spectra).

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
    if kind == "spatial_blocks":
        if positions is None:
            raise ValueError("split kind spatial_blocks needs the sets' grid positions")
        if subsample is not None:
            raise ValueError("split kind spatial_blocks does not take a subsample")
        return spatial_block_split(positions, labels, block_size, buffer, train_per_class, seed)
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


def check_split(labels: np.ndarray, class_names, kind: str, train_per_class=None, **_) -> None:
    """Refuses a split that a class is too small for, naming the class.

    Args:
        labels: ``[N, C]`` labels of all sets (classes are their argmax).
        class_names: ``C`` class names.
        kind: the split kind (``stratified`` needs 2 sets per class, one to train and one to
            test; ``per_class`` needs more than ``train_per_class``); other keys are ignored.
        train_per_class: training sets per class of a ``per_class`` split.

    Raises:
        ValueError: naming the class, its number of sets and what the split needs.
    """
    if kind == "stratified":
        need = 2
    elif kind == "per_class" and train_per_class:
        need = int(train_per_class) + 1
    else:
        return
    counts = np.bincount(np.argmax(np.asarray(labels), axis=1), minlength=len(class_names))
    for name, count in zip(class_names, counts, strict=False):
        if 0 < count < need:
            raise ValueError(
                f"class {name!r} has {count} set(s); a {kind} split needs at least {need} sets "
                "per class (to train and to test)"
            )


def block_ids(positions: np.ndarray, block_size: int) -> np.ndarray:
    """``[N]`` int64 id of the ``block_size`` x ``block_size`` block holding each position."""
    positions = np.asarray(positions, dtype=np.int64)
    rows, cols = positions[:, 0] // block_size, positions[:, 1] // block_size
    return rows * (cols.max() + 1 if cols.size else 1) + cols


def spatial_block_split(
    positions: np.ndarray,
    labels: np.ndarray,
    block_size: int | None,
    buffer: int | None,
    train_per_class: int | None,
    seed: int,
) -> tuple[np.ndarray, np.ndarray]:
    """A spatially disjoint split of sets on an image grid (for overlapping pixel windows).

    The grid is cut into ``block_size`` x ``block_size`` blocks. Blocks are visited in a random
    order (``seed``); a block is taken for training only if it holds sets of a class that still
    has fewer than ``train_per_class`` sets available in the blocks taken so far. From the
    training blocks, up to ``train_per_class`` sets of every class are drawn at random. Test
    sets are the sets outside the training blocks whose Chebyshev distance to every training
    set exceeds ``buffer``, so that with ``buffer = window - 1`` no test window shares a
    single pixel with a training window. A class can end with fewer training sets (if the whole
    grid holds fewer) or with no test sets: the caller reports the per-class counts.

    Args:
        positions: ``[N, 2]`` non-negative integer (row, column) of each set.
        labels: ``[N, C]`` labels; classes are their argmax.
        block_size: block side in pixels (>= 1).
        buffer: Chebyshev distance that test sets must exceed from training sets (>= 0).
        train_per_class: training sets per class (>= 1).
        seed: random state of the block order and of the draws.

    Returns:
        ``(train_idx, test_idx)``: sorted, disjoint int64 arrays (together not all sets: the
        buffer's and the training blocks' unused sets are in neither).

    Raises:
        ValueError: for missing or out-of-range settings, or positions of the wrong shape.
    """
    positions = np.asarray(positions, dtype=np.int64)
    n = np.asarray(labels).shape[0]
    if positions.shape != (n, 2) or (n and positions.min() < 0):
        raise ValueError(f"positions must be [{n}, 2] non-negative integers")
    if not block_size or block_size < 1:
        raise ValueError("split kind spatial_blocks needs block_size >= 1")
    if buffer is None or buffer < 0:
        raise ValueError("split kind spatial_blocks needs buffer >= 0")
    if not train_per_class or train_per_class < 1:
        raise ValueError("split kind spatial_blocks needs train_per_class >= 1")
    strata = np.argmax(np.asarray(labels), axis=1)
    num_classes = np.asarray(labels).shape[1]
    blocks = block_ids(positions, block_size)
    rng = np.random.default_rng(seed)
    available = np.zeros(num_classes, dtype=np.int64)
    in_training_block = np.zeros(n, dtype=bool)
    for block in rng.permutation(np.unique(blocks)):
        members = blocks == block
        present = np.bincount(strata[members], minlength=num_classes)
        if np.any((present > 0) & (available < train_per_class)):
            in_training_block |= members
            available += present
        if np.all(available[np.bincount(strata, minlength=num_classes) > 0] >= train_per_class):
            break
    train = np.concatenate(
        [
            rng.permutation(np.flatnonzero(in_training_block & (strata == c)))[:train_per_class]
            for c in range(num_classes)
        ]
    )
    grid = np.zeros(tuple(positions.max(axis=0) + 1), dtype=bool)
    grid[positions[train, 0], positions[train, 1]] = True
    near = ndimage.maximum_filter(grid, size=2 * buffer + 1, mode="constant", cval=False)
    test = np.flatnonzero(~in_training_block & ~near[positions[:, 0], positions[:, 1]])
    return np.sort(train).astype(np.int64), test.astype(np.int64)
