"""Splits of sets, and cross-validation folds that respect them (issue 12: spatial blocks)."""

import numpy as np
import pytest

from dpp.experiment.splits import block_ids, spatial_block_split, split_indices
from dpp.selection import cv_folds
from dpp.sets import one_hot


def _scene(rng, height=60, width=45, num_classes=3):
    """Every pixel of a grid labelled by a blocky class map (classes form spatial patches)."""
    rows, cols = np.meshgrid(np.arange(height), np.arange(width), indexing="ij")
    positions = np.stack([rows.ravel(), cols.ravel()], axis=1)
    patch = (rows // 10 * 7 + cols // 9 * 3).ravel()
    classes = (patch + rng.integers(0, 2, size=patch.size)) % num_classes
    return positions, one_hot(classes, num_classes)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_spatial_blocks_keep_test_windows_clear_of_training_pixels(rng, seed):
    positions, labels = _scene(rng)
    block, buffer, per_class = 15, 3, 40
    train, test = spatial_block_split(positions, labels, block, buffer, per_class, seed)
    assert np.intersect1d(train, test).size == 0
    # no test set shares a block with a training set ...
    train_blocks = set(block_ids(positions[train], block).tolist())
    assert not set(block_ids(positions[test], block).tolist()) & train_blocks
    # ... and every test set lies more than `buffer` (Chebyshev) from every training set
    gap = np.abs(positions[test][:, None, :] - positions[train][None, :, :]).max(axis=2)
    assert gap.min() > buffer
    # per_class training sets of every class, when the blocks hold them
    counts = np.bincount(np.argmax(labels[train], axis=1), minlength=3)
    np.testing.assert_array_equal(counts, [per_class] * 3)
    assert test.size > 0


def test_spatial_blocks_take_only_blocks_that_add_a_needed_class(rng):
    positions, labels = _scene(rng)
    strata = np.argmax(labels, axis=1)
    train, _ = spatial_block_split(positions, labels, 15, 3, 40, seed=4)
    blocks = block_ids(positions, 15)
    taken = np.unique(blocks[train])
    # every taken block holds training sets; fewer blocks than the grid has
    assert taken.size < np.unique(blocks).size
    # the class counts available in the taken blocks cover every class
    available = np.bincount(strata[np.isin(blocks, taken)], minlength=3)
    assert np.all(available >= 40)


def test_split_indices_dispatches_spatial_blocks_and_checks_its_settings(rng):
    positions, labels = _scene(rng)
    train, test = split_indices(
        labels,
        "spatial_blocks",
        0,
        train_per_class=10,
        positions=positions,
        block_size=15,
        buffer=2,
    )
    assert train.size == 30 and test.size > 0
    with pytest.raises(ValueError, match="grid positions"):
        split_indices(labels, "spatial_blocks", 0, train_per_class=10, block_size=15, buffer=2)
    with pytest.raises(ValueError, match="block_size"):
        spatial_block_split(positions, labels, None, 2, 10, 0)


def test_group_folds_keep_every_block_whole(rng):
    positions, labels = _scene(rng)
    groups = block_ids(positions, 15)
    for fit, val in cv_folds(labels, 4, seed=0, groups=groups):
        assert not set(groups[fit].tolist()) & set(groups[val].tolist())
    with pytest.raises(ValueError, match="at least 5 groups"):
        cv_folds(labels[:20], 5, seed=0, groups=np.zeros(20, int))
