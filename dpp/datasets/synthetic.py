"""The synthetic data of section 4.1 (Figure 1) and the authors' larger demo variant.

Two 2-D Gaussian components, with the means and covariances of the authors' released MATLAB demo:
class 0 is isotropic, ``N((0.75, 0), I)``; class 1 is correlated, ``N((-0.75, 0), [[1, 0.95],
[0.95, 1]])``. Every vector of a set comes from its class's component; set sizes are uniform on
``{min_size, ..., max_size}``; the classes alternate, so they are balanced.

Paper setting: 20 sets with ``M_n`` in ``{1..20}`` and ``K = 2`` (the default config draws 100
sets and trains on 20% of them, testing on the other 80). Demo variant: 500 sets per class of
100-200 vectors, ``K = 10``, 20% for training (``dataset=synthetic_large``).
"""

from __future__ import annotations

import numpy as np

from dpp.datasets.base import Dataset
from dpp.sets import RaggedSets, one_hot

MEANS = np.array([[0.75, 0.0], [-0.75, 0.0]])
COVARIANCES = np.array([[[1.0, 0.0], [0.0, 1.0]], [[1.0, 0.95], [0.95, 1.0]]])


def make_synthetic(num_sets: int, min_size: int, max_size: int, seed: int) -> Dataset:
    """Draws ``num_sets`` sets from the two-Gaussian model.

    Args:
        num_sets: ``N`` (>= 2).
        min_size: smallest set size (>= 1).
        max_size: largest set size (>= min_size).
        seed: NumPy seed of the draw.

    Returns:
        A :class:`Dataset` with one-hot labels, ``D = 2``, ``C = 2``.

    Raises:
        ValueError: for sizes or counts out of range.
    """
    if num_sets < 2:
        raise ValueError("num_sets must be >= 2")
    if not 1 <= min_size <= max_size:
        raise ValueError("need 1 <= min_size <= max_size")
    rng = np.random.default_rng(seed)
    classes = np.arange(num_sets) % 2
    sizes = rng.integers(min_size, max_size + 1, size=num_sets)
    set_ids = np.repeat(np.arange(num_sets, dtype=np.int32), sizes)
    vector_class = classes[set_ids]
    chol = np.linalg.cholesky(COVARIANCES)  # [2, 2, 2]
    noise = rng.standard_normal((set_ids.size, 2))
    vectors = MEANS[vector_class] + np.einsum("tij,tj->ti", chol[vector_class], noise)
    sets = RaggedSets.from_flat(vectors, set_ids, one_hot(classes, 2))
    info = {"num_sets": num_sets, "num_vectors": int(set_ids.size)}
    return Dataset("synthetic", sets, ("isotropic", "correlated"), info)
