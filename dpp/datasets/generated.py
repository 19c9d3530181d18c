"""Generated sets for stress tests: any dimension, set size, class count, scale and offset.

Every set of class ``c`` draws each of its vectors from a Gaussian mixture: with probability
``signal`` from the class's own component, otherwise from one of ``background`` components shared
by all classes (so a set is recognised by the share of its vectors near its class component, the
bag-of-words situation of the paper and of multiple-instance benchmarks). Components have unit
covariance; class means lie ``separation`` apart on average, background means are spread like
``N(0, 1.5^2 I)``. The vectors are finally mapped to ``offset + scale * x``, which leaves the
problem unchanged for an exact method, so tests can ask for identical results at ``1e-20`` or
``1e6``.

``dataset=generated`` runs it from the command line (``dataset.loader.dim=230`` ...).
"""

from __future__ import annotations

import numpy as np

from dpp.datasets.base import Dataset
from dpp.sets import RaggedSets, one_hot


def make_generated(
    num_sets: int = 200,
    dim: int = 10,
    min_size: int = 1,
    max_size: int = 20,
    num_classes: int = 2,
    signal: float = 0.5,
    separation: float = 3.0,
    background: int = 4,
    offset: float = 0.0,
    scale: float = 1.0,
    seed: int = 0,
    dtype=np.float32,
) -> Dataset:
    """Draws ``num_sets`` labelled sets (classes alternate, so they are balanced).

    Args:
        num_sets: ``N`` (>= num_classes).
        dim: ``D`` (>= 1).
        min_size: smallest set size ``M_n`` (>= 1).
        max_size: largest set size (>= min_size); sizes are uniform in between.
        num_classes: ``C`` (>= 2).
        signal: probability that a vector comes from its class's component (in (0, 1]).
        separation: mean distance between class means, in units of the components' spread.
        background: number of shared background components (>= 1).
        offset: added to every coordinate at the end.
        scale: multiplies every coordinate at the end (> 0).
        seed: NumPy seed.
        dtype: dtype of the returned sets' vectors.

    Returns:
        A :class:`~dpp.datasets.base.Dataset` named ``generated`` with one-hot labels.

    Raises:
        ValueError: for out-of-range arguments.
    """
    if num_classes < 2 or num_sets < num_classes:
        raise ValueError("need num_classes >= 2 and num_sets >= num_classes")
    if dim < 1 or not 1 <= min_size <= max_size or background < 1:
        raise ValueError("need dim >= 1, 1 <= min_size <= max_size and background >= 1")
    if not 0 < signal <= 1 or not scale > 0:
        raise ValueError("need 0 < signal <= 1 and scale > 0")
    rng = np.random.default_rng(seed)
    direction = rng.normal(size=(num_classes, dim))
    direction /= np.linalg.norm(direction, axis=1, keepdims=True)
    class_means = direction * separation / np.sqrt(2.0)
    background_means = rng.normal(scale=1.5, size=(background, dim))
    classes = np.arange(num_sets) % num_classes
    sizes = rng.integers(min_size, max_size + 1, size=num_sets)
    set_ids = np.repeat(np.arange(num_sets, dtype=np.int32), sizes)
    from_class = rng.random(set_ids.size) < signal
    means = np.where(
        from_class[:, None],
        class_means[classes[set_ids]],
        background_means[rng.integers(0, background, size=set_ids.size)],
    )
    x = means + rng.normal(size=means.shape)
    vectors = offset + scale * x
    sets = RaggedSets.from_flat(vectors, set_ids, one_hot(classes, num_classes), dtype=dtype)
    info = {
        "num_sets": num_sets,
        "num_vectors": int(set_ids.size),
        "dim": dim,
        "offset": offset,
        "scale": scale,
    }
    names = tuple(f"class {c}" for c in range(num_classes))
    return Dataset("generated", sets, names, info)
