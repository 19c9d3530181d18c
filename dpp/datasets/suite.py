"""Set tasks nobody here tuned for: generated multiple-instance problems and digits as patches.

Three kinds of task, all generated or shipped with scikit-learn (nothing is downloaded):

* **witness** (:func:`make_witness`): the standard multiple-instance assumption. Every vector of
  a negative set is a distractor, drawn from one of several shared Gaussian components; a
  positive set holds at least one *witness*, drawn from a component of its own, each of its
  vectors being a witness with probability ``witness_rate``. Which prototypes occur decides the
  label; the mean of a set dilutes a rare witness.
* **proportion** (:func:`make_proportion`): every vector of every set comes from the same
  shared components; the classes differ only in how often each component is used. The label
  depends on proportions, where mean pooling of the right codes is the right statistic.
* **digits** (:func:`make_digit_patches`): scikit-learn's 8 x 8 digits, each image the set of
  its 4 x 4 patches (stride 2, 16-D; blank patches dropped), 10 classes.
* **digit bags** (:func:`make_digit_bags`): the "MNIST-bags" protocol of Ilse, Tomczak &
  Welling (ICML 2018) on scikit-learn's 8 x 8 digits: a bag of digit images (64-D each) is
  positive iff it holds the target digit (classes balanced); training and test bags draw on
  disjoint images.

Each returns a :class:`~dpp.datasets.base.Dataset`; ``benchmarks/suite.py`` runs every method on
all of them (:mod:`lab`).
"""

from __future__ import annotations

import dataclasses

import numpy as np
from sklearn.datasets import load_digits

from dpp.datasets.base import Dataset
from dpp.sets import RaggedSets, one_hot


def _dataset(name, vectors, sizes, classes, num_classes, info, instance_labels=None) -> Dataset:
    set_ids = np.repeat(np.arange(len(sizes), dtype=np.int32), sizes)
    sets = RaggedSets.from_flat(vectors, set_ids, one_hot(classes, num_classes))
    names = tuple(f"class {c}" for c in range(num_classes))
    if instance_labels is not None:
        instance_labels = np.asarray(instance_labels, np.int8)
    info = {"num_sets": len(sizes), **info}
    return Dataset(name, sets, names, info, instance_labels=instance_labels)


def make_witness(
    num_sets: int = 200,
    dim: int = 10,
    min_size: int = 2,
    max_size: int = 40,
    witness_rate: float = 0.1,
    distractors: int = 5,
    separation: float = 3.0,
    seed: int = 0,
) -> Dataset:
    """Binary multiple-instance sets: a set is positive iff it holds a witness vector.

    Args:
        num_sets: ``N`` (classes alternate, so they are balanced).
        dim: ``D``.
        min_size: smallest set size (>= 1).
        max_size: largest set size (>= min_size); sizes are uniform in between.
        witness_rate: probability that a vector of a positive set is a witness (each positive
            set gets at least one), in ``(0, 1]``.
        distractors: shared distractor components (unit covariance, means ``N(0, 1.5^2 I)``).
        separation: distance of the witness component's mean from the origin.
        seed: NumPy seed.

    Returns:
        A :class:`~dpp.datasets.base.Dataset` named ``witness``, with ``instance_labels``
        (1 for every witness vector).

    Raises:
        ValueError: for out-of-range arguments.
    """
    if not 0 < witness_rate <= 1 or not 1 <= min_size <= max_size or distractors < 1:
        raise ValueError("need 0 < witness_rate <= 1, 1 <= min_size <= max_size, distractors >= 1")
    rng = np.random.default_rng(seed)
    distractor_means = rng.normal(scale=1.5, size=(distractors, dim))
    witness_mean = rng.normal(size=dim)
    witness_mean *= separation / np.linalg.norm(witness_mean)
    classes = np.arange(num_sets) % 2
    sizes = rng.integers(min_size, max_size + 1, size=num_sets)
    set_ids = np.repeat(np.arange(num_sets), sizes)
    witness = (classes[set_ids] == 1) & (rng.random(set_ids.size) < witness_rate)
    starts = np.cumsum(sizes) - sizes
    one = starts + (rng.random(num_sets) * sizes).astype(np.int64)  # a vector of each set
    witness[one[classes == 1]] = True  # every positive set holds a witness
    means = np.where(
        witness[:, None],
        witness_mean,
        distractor_means[rng.integers(0, distractors, size=set_ids.size)],
    )
    vectors = means + rng.normal(size=means.shape)
    info = {"dim": dim, "witness_rate": witness_rate, "num_vectors": int(sizes.sum())}
    return _dataset("witness", vectors, sizes, classes, 2, info, witness)


def make_proportion(
    num_sets: int = 200,
    dim: int = 10,
    min_size: int = 10,
    max_size: int = 40,
    components: int = 4,
    num_classes: int = 3,
    concentration: float = 20.0,
    separation: float = 3.0,
    seed: int = 0,
) -> Dataset:
    """Sets drawn from shared components whose proportions depend on the class.

    Each class ``c`` has mixing proportions ``pi_c ~ Dirichlet(1)`` over ``components`` shared
    Gaussian components (unit covariance, means ``separation`` apart on average); a set's own
    proportions are ``Dirichlet(concentration * pi_c)``, and its vectors are drawn from them.

    Args:
        num_sets: ``N`` (classes alternate).
        dim: ``D``.
        min_size: smallest set size (>= 1).
        max_size: largest set size (>= min_size); sizes are uniform in between.
        components: shared components.
        num_classes: ``C`` (>= 2).
        concentration: how closely a set's proportions follow its class's (> 0).
        separation: mean distance between component means.
        seed: NumPy seed.

    Returns:
        A :class:`~dpp.datasets.base.Dataset` named ``proportion``.

    Raises:
        ValueError: for out-of-range arguments.
    """
    if num_classes < 2 or components < 2 or not concentration > 0 or not 1 <= min_size <= max_size:
        raise ValueError("need num_classes >= 2, components >= 2, concentration > 0 and sizes")
    rng = np.random.default_rng(seed)
    means = rng.normal(size=(components, dim))
    means *= separation / np.sqrt(2.0) / np.linalg.norm(means, axis=1, keepdims=True)
    class_pi = rng.dirichlet(np.ones(components), size=num_classes)
    classes = np.arange(num_sets) % num_classes
    sizes = rng.integers(min_size, max_size + 1, size=num_sets)
    gamma = rng.gamma(concentration * class_pi[classes] + 1e-3)  # [N, components]
    pi = gamma / gamma.sum(axis=1, keepdims=True)  # a Dirichlet draw per set
    set_ids = np.repeat(np.arange(num_sets), sizes)
    cdf = np.cumsum(pi, axis=1)[set_ids]  # [T, components]
    chosen = np.minimum((rng.random(set_ids.size)[:, None] > cdf).sum(axis=1), components - 1)
    vectors = means[chosen] + rng.normal(size=(set_ids.size, dim))
    info = {"dim": dim, "components": components, "num_vectors": int(sizes.sum())}
    return _dataset("proportion", vectors, sizes, classes, num_classes, info)


def make_digit_patches(num_sets: int | None = 600, seed: int = 0) -> Dataset:
    """scikit-learn's digits, each image the set of its non-blank 4 x 4 patches (stride 2).

    Args:
        num_sets: images drawn at random (``None``: all 1,797).
        seed: NumPy seed of the draw.

    Returns:
        A :class:`~dpp.datasets.base.Dataset` named ``digits`` (16-D vectors, intensities 0-16).
    """
    digits = load_digits()
    images, classes = digits.images, digits.target
    if num_sets is not None:
        chosen = np.sort(np.random.default_rng(seed).choice(len(classes), num_sets, replace=False))
        images, classes = images[chosen], classes[chosen]
    starts = range(0, 5, 2)
    patches = np.stack(
        [images[:, r : r + 4, c : c + 4].reshape(len(images), 16) for r in starts for c in starts],
        axis=1,
    )  # [N, 9, 16]
    keep = patches.sum(axis=2) > 0
    keep[np.arange(len(images)), np.argmax(patches.sum(axis=2), axis=1)] = True  # never empty
    sizes = keep.sum(axis=1)
    info = {"dim": 16, "num_vectors": int(sizes.sum())}
    return _dataset("digits", patches[keep], sizes, classes, 10, info)


def make_digit_bags(
    num_bags: int = 100,
    num_test_bags: int = 100,
    mean_size: float = 10.0,
    sd_size: float = 2.0,
    target: int = 9,
    seed: int = 0,
) -> Dataset:
    """Bags of digit images, positive iff they hold the target digit (after Ilse et al. 2018).

    The "MNIST-bags" protocol of *Attention-based deep multiple instance learning* (ICML 2018,
    section 5.2) on scikit-learn's 8 x 8 digits (1,797 images, 64-D, intensities 0-16): a bag's
    size is drawn from a normal of mean ``mean_size`` and s.d. ``sd_size`` (rounded, at least
    1) and it is positive iff it holds an image of ``target``; every vector keeps its instance
    label (1 for an image of ``target``). One change: the classes alternate (balanced), since
    with uniform draws the share of positive bags grows with the bag size (``1 - 0.9^M``: 0.65
    at ``M = 10``, 0.995 at 50, where predicting "positive" is right 99 % of the time). A
    negative bag draws its images from the other digits; a positive bag draws from all of them
    and, if it drew no target, one of its images (at random) is replaced by a target image. The
    images are split in half once (by ``seed``): training bags draw on one half, test bags on
    the other, so no test image was seen in training.

    Args:
        num_bags: training bags (the first ``num_bags`` sets).
        num_test_bags: test bags (the last ``num_test_bags`` sets; ``info["test_sets"]``).
        mean_size: mean bag size.
        sd_size: s.d. of the bag size (>= 0).
        target: the digit that makes a bag positive (0-9).
        seed: NumPy seed of the split and the draws.

    Returns:
        A :class:`~dpp.datasets.base.Dataset` named ``digit_bags`` (classes ``negative``,
        ``positive``) with ``instance_labels``; ``info`` holds ``train_sets`` and
        ``test_sets`` (index lists) and the share of target images in positive bags.

    Raises:
        ValueError: for out-of-range arguments.
    """
    if num_bags < 2 or num_test_bags < 0 or not mean_size >= 1 or sd_size < 0:
        raise ValueError("need num_bags >= 2, num_test_bags >= 0, mean_size >= 1, sd_size >= 0")
    if not 0 <= int(target) <= 9:
        raise ValueError(f"target must be a digit 0-9, got {target}")
    digits = load_digits()
    images, digit = digits.data.astype(np.float64), digits.target
    rng = np.random.default_rng(seed)
    half = rng.permutation(len(digit)) % 2  # each image in the training (0) or test (1) half
    total = num_bags + num_test_bags
    sizes = np.maximum(np.rint(rng.normal(mean_size, sd_size, size=total)), 1).astype(np.int64)
    classes = np.concatenate([np.arange(num_bags), np.arange(num_test_bags)]) % 2
    pool_of_bag = np.repeat([0, 1], [num_bags, num_test_bags])
    is_target = digit == int(target)
    picks = []
    for h, m, c in zip(pool_of_bag, sizes, classes, strict=True):  # drawing bags, not numerics
        allowed = np.flatnonzero((half == h) & (~is_target | (c == 1)))
        drawn = rng.choice(allowed, size=m, replace=m > allowed.size)
        if c == 1 and not is_target[drawn].any():
            drawn[rng.integers(m)] = rng.choice(np.flatnonzero((half == h) & is_target))
        picks.append(drawn)
    picks = np.concatenate(picks)
    witness = is_target[picks]
    positive_vectors = np.repeat(classes, sizes) == 1
    info = {
        "dim": 64,
        "num_vectors": int(sizes.sum()),
        "target": int(target),
        "mean_size": float(mean_size),
        "witness_share": float(witness[positive_vectors].mean()),
        "train_sets": list(range(num_bags)),
        "test_sets": list(range(num_bags, total)),
    }
    dataset = _dataset("digit_bags", images[picks], sizes, classes, 2, info, witness)
    return dataclasses.replace(dataset, class_names=("negative", "positive"))
