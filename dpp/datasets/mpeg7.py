"""MPEG-7 CE-Shape-1 part B (section 4.2, Table 1): 1400 silhouettes, 70 classes x 20.

Features as in the paper: the outer contour of each shape, 1 in every ``keep_every`` contour
points kept, the complete graph over the kept points with Euclidean edge lengths normalised to
``[0, 1]`` per shape (divided by the largest), and for each point the ``bins``-bin frequency
histogram of its edge lengths to the other points. One shape is one set of ``D = bins``
vectors.

Features are cached in ``cache_dir`` as ``.npz`` keyed by the extraction parameters and the list
of image files (name and size); the cache is safe to delete.
"""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path

import numpy as np
from PIL import Image
from scipy import ndimage
from scipy.spatial.distance import pdist, squareform
from skimage import measure
from tqdm.auto import tqdm

from dpp.datasets.base import Dataset, resolve_data_dir
from dpp.errors import DataError
from dpp.sets import RaggedSets, one_hot

logger = logging.getLogger(__name__)

#: Bump when the extraction changes, so that old caches are not reused.
FEATURE_VERSION = 1
#: The only mask stored with reversed polarity (dark shape on white), per the data README.
INVERTED = ("rat-09.png",)


def read_mask(path: Path) -> np.ndarray:
    """Reads a silhouette as a boolean mask (shape = True), as the data README prescribes.

    Grey levels, not palette indices, are thresholded at ``> 0``; ``rat-09.png`` is inverted.

    Args:
        path: PNG file.

    Returns:
        ``[H, W]`` bool mask.
    """
    mask = np.asarray(Image.open(path).convert("L")) > 0
    return ~mask if Path(path).name in INVERTED else mask


def outer_contour(mask: np.ndarray) -> np.ndarray:
    """The outer contour of the shape, as scikit-image ``find_contours`` points.

    How the contour is chosen: the mask is padded by one pixel (456 shapes touch the image edge);
    its 8-connected components are labelled and the largest by area is kept (37 masks have several
    pieces, e.g. device1-9 has 9); its holes are filled (473 masks have holes), so that the only
    iso-line at level 0.5 is the outer boundary of that piece, traced with sub-pixel points about
    one pixel apart.

    Args:
        mask: ``[H, W]`` bool silhouette.

    Returns:
        ``[P, 2]`` float (row, column) points of the closed contour, the repeated end point
        dropped.

    Raises:
        ValueError: for an empty mask.
    """
    padded = np.pad(np.asarray(mask, dtype=bool), 1)
    labels, count = ndimage.label(padded, structure=np.ones((3, 3)))
    if count == 0:
        raise ValueError("empty mask: no shape pixels")
    areas = np.bincount(labels.ravel())[1:]
    piece = ndimage.binary_fill_holes(labels == 1 + int(np.argmax(areas)))
    contours = measure.find_contours(piece.astype(np.float32), 0.5)
    contour = max(contours, key=len)
    if len(contour) > 1 and np.allclose(contour[0], contour[-1]):
        contour = contour[:-1]
    return contour


def contour_features(contour: np.ndarray, keep_every: int = 10, bins: int = 10) -> np.ndarray:
    """Edge-length histograms of the complete graph over the kept contour points.

    Args:
        contour: ``[P, 2]`` contour points.
        keep_every: keep points ``0, keep_every, 2 keep_every, ...``.
        bins: number of equal-width bins on ``[0, 1]``.

    Returns:
        ``[M, bins]`` float32, ``M = ceil(P / keep_every)``; row ``i`` is the frequency histogram
        (sums to 1) of the normalised lengths of the ``M - 1`` edges at point ``i``.

    Raises:
        ValueError: if fewer than 3 points are kept or they all coincide.
    """
    points = np.asarray(contour)[::keep_every]
    m = len(points)
    if m < 3:
        raise ValueError(f"only {m} contour points kept; need at least 3")
    lengths = squareform(pdist(points))
    longest = lengths.max()
    if longest <= 0:
        raise ValueError("contour points coincide")
    lengths /= longest
    index = np.minimum((lengths * bins).astype(np.int64), bins - 1)  # 1.0 falls in the last bin
    off_diagonal = ~np.eye(m, dtype=bool)
    rows = np.broadcast_to(np.arange(m)[:, None], (m, m))
    counts = np.bincount((rows * bins + index)[off_diagonal], minlength=m * bins)
    return (counts.reshape(m, bins) / (m - 1)).astype(np.float32)


def class_of(path: Path) -> str:
    """Class name of an image: the file stem before its last ``-`` (``bottle-01`` -> ``bottle``)."""
    return Path(path).stem.rsplit("-", 1)[0]


def _image_files(folder: Path, classes, max_per_class) -> list[Path]:
    files = sorted(folder.glob("*.png"), key=lambda p: (class_of(p), int(p.stem.rsplit("-", 1)[1])))
    if not files:
        raise FileNotFoundError(f"no MPEG-7 PNG images in {folder}")
    if classes:
        wanted = set(classes)
        unknown = wanted - {class_of(p) for p in files}
        if unknown:
            raise ValueError(f"unknown MPEG-7 classes {sorted(unknown)}")
        files = [p for p in files if class_of(p) in wanted]
    if max_per_class:
        names = np.array([class_of(p) for p in files])
        first = {c: i for i, c in reversed(list(enumerate(names)))}
        files = [p for i, p in enumerate(files) if i - first[names[i]] < max_per_class]
    return files


def extract_features(
    files: list[Path], keep_every: int, bins: int, progress: bool = True
) -> tuple[list[np.ndarray], list[int]]:
    """Features of every image (a progress bar over the images).

    Returns:
        ``(features, contour_lengths)``: one ``[M_n, bins]`` array and one contour point count
        per image.

    Raises:
        DataError: naming the image that cannot be read or holds no usable contour.
    """
    features, lengths = [], []
    for path in tqdm(files, desc="MPEG-7 features", disable=not progress, unit="shape"):
        try:
            contour = outer_contour(read_mask(path))
            features.append(contour_features(contour, keep_every, bins))
        except (OSError, ValueError) as err:  # unreadable, truncated or empty image
            raise DataError(f"{path}: {err}") from err
        lengths.append(len(contour))
    return features, lengths


def load_mpeg7(
    data_dir: str | None,
    cache_dir: str | None,
    keep_every: int = 10,
    bins: int = 10,
    classes: list[str] | None = None,
    max_per_class: int | None = None,
    progress: bool = True,
) -> Dataset:
    """Loads MPEG-7 part B from ``data_dir/mpeg7/images`` as sets of edge-length histograms.

    Args:
        data_dir: data directory (``None``: ``$DPP_DATA_DIR`` or ``../shared/data``).
        cache_dir: feature cache folder (``None`` disables caching).
        keep_every: keep 1 in every ``keep_every`` contour points.
        bins: histogram bins (the feature dimension ``D``).
        classes: optional subset of class names.
        max_per_class: optional cap on images per class (the lowest indices).
        progress: show a progress bar while extracting.

    Returns:
        :class:`~dpp.datasets.base.Dataset` with one-hot labels over the classes present,
        sorted by name.

    Raises:
        FileNotFoundError: naming the folder looked at when the images are missing.
        ValueError: for unknown classes or degenerate contours.
    """
    folder = resolve_data_dir(data_dir, "mpeg7") / "images"
    if not folder.is_dir():
        raise FileNotFoundError(f"MPEG-7 images not found: {folder}")
    files = _image_files(folder, classes, max_per_class)
    key = json.dumps(
        {
            "v": FEATURE_VERSION,
            "keep_every": keep_every,
            "bins": bins,
            "files": [(p.name, p.stat().st_size) for p in files],
        }
    )
    cache = None
    if cache_dir:
        digest = hashlib.sha1(key.encode()).hexdigest()[:16]
        cache = Path(cache_dir) / f"mpeg7-features-{digest}.npz"
    if cache is not None and cache.is_file():
        stored = np.load(cache, allow_pickle=False)
        vectors, sizes, lengths = stored["vectors"], stored["sizes"], stored["contour_lengths"]
        logger.info("MPEG-7 features read from cache %s", cache)
    else:
        features, lengths = extract_features(files, keep_every, bins, progress)
        vectors = np.concatenate(features)
        sizes = np.array([len(f) for f in features])
        lengths = np.array(lengths)
        if cache is not None:
            cache.parent.mkdir(parents=True, exist_ok=True)
            tmp = cache.with_suffix(".tmp.npz")
            np.savez(tmp, vectors=vectors, sizes=sizes, contour_lengths=lengths)
            tmp.replace(cache)
            logger.info("MPEG-7 features cached in %s", cache)
    names = [class_of(p) for p in files]
    class_names = tuple(sorted(set(names)))
    y = np.searchsorted(np.array(class_names), np.array(names))
    set_ids = np.repeat(np.arange(len(files), dtype=np.int32), sizes)
    sets = RaggedSets.from_flat(vectors, set_ids, one_hot(y, len(class_names)))
    info = {
        "num_shapes": len(files),
        "num_vectors": int(vectors.shape[0]),
        "keep_every": keep_every,
        "bins": bins,
        "median_contour_points": float(np.median(lengths)),
    }
    return Dataset("mpeg7", sets, class_names, info, item_paths=tuple(files))


def kept_points(path: Path, keep_every: int = 10) -> np.ndarray:
    """``[M, 2]`` (row, column) of the contour points a shape's set holds, in its rows' order.

    The points :func:`contour_features` keeps (``outer_contour(...)[::keep_every]``): row ``i``
    of the shape's set is the histogram at point ``i``.
    """
    return outer_contour(read_mask(Path(path)))[::keep_every]
