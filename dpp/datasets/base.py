"""The dataset container and the data directory rule."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from pathlib import Path

import numpy as np

from dpp.sets import RaggedSets
from dpp.solvers.cache import CACHE_DIR_ENV

#: Environment variables naming the data directory and the feature cache directory.
DATA_DIR_ENV = "DPP_DATA_DIR"
_REPO_ROOT = Path(__file__).resolve().parents[2]


@dataclasses.dataclass(frozen=True)
class Dataset:
    """All sets of a dataset, before any train/test split.

    Attributes:
        name: dataset name.
        sets: the ``N`` sets with labels.
        class_names: ``C`` names of the classes.
        info: descriptive scalars (counts, extraction parameters, ...), written to results.json.
        anchors: optional ``[N]`` index into ``sets.vectors`` of the vector that *is* each set's
            own item (a windowed pixel's spectrum); preprocessing statistics are then fitted on
            the anchors of the training sets only, not on every vector of their windows.
        feature_names: optional ``D`` names of the vector components.
        positions: optional ``[N, 2]`` integer (row, column) of each set on an image grid (a
            windowed pixel's position), for spatially disjoint splits.
        decode_vectors: optional map from ``[*, D]`` loader vectors (before the per-split
            standardisation) back to the original units, for reports.
        instance_labels: optional ``[T]`` int label of every membership (in the order of
            ``sets.set_ids``): 1 for a witness (a vector that makes its set positive), 0
            otherwise, on generated tasks that know it (instance-level evidence is scored
            against it).
        item_paths: optional ``N`` files the sets were read from, one per set (MPEG-7's
            silhouettes), for figures that draw an item.
    """

    name: str
    sets: RaggedSets
    class_names: tuple[str, ...]
    info: dict = dataclasses.field(default_factory=dict)
    anchors: np.ndarray | None = None
    feature_names: tuple[str, ...] = ()
    positions: np.ndarray | None = None
    decode_vectors: Callable[[np.ndarray], np.ndarray] | None = None
    instance_labels: np.ndarray | None = None
    item_paths: tuple[Path, ...] = ()


def default_data_dir() -> Path:
    """``$DPP_DATA_DIR`` if set, else ``../shared/data`` beside the repository."""
    env = os.environ.get(DATA_DIR_ENV)
    if env:
        return Path(env).expanduser()
    return (_REPO_ROOT.parent / "shared" / "data").resolve()


def default_cache_dir() -> Path:
    """``$DPP_CACHE_DIR`` if set, else ``.cache`` in the repository (ignored by git)."""
    env = os.environ.get(CACHE_DIR_ENV)
    return Path(env).expanduser() if env else _REPO_ROOT / ".cache"


def resolve_data_dir(data_dir: str | os.PathLike | None, subdir: str) -> Path:
    """The folder of one dataset, checked to exist.

    Args:
        data_dir: configured data directory, or ``None`` for :func:`default_data_dir`.
        subdir: the dataset's folder inside it (``mpeg7``, ``hyperspectral``, ``adult``).

    Returns:
        The existing directory ``data_dir / subdir``.

    Raises:
        FileNotFoundError: naming the path looked at and how to point dpp elsewhere.
    """
    root = default_data_dir() if data_dir in (None, "") else Path(data_dir).expanduser()
    path = root / subdir
    if not path.is_dir():
        raise FileNotFoundError(
            f"data directory not found: {path} (set {DATA_DIR_ENV} or data_dir=... to the folder "
            f"that holds {subdir}/)"
        )
    return path
