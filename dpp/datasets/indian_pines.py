"""Indian Pines (AVIRIS, 145 x 145 pixels, 200 bands), the stand-in for SPECTRAL (section 4.3).

The paper's SPECTRAL data (Table 2) are private; Indian Pines is public.

Each labelled pixel of the ``num_classes`` largest classes is a set: the spectra of the
``window x window`` pixels around it (7 x 7 = 49 in the paper). Windows are cut from the image
padded by reflection (NumPy's ``reflect`` mode, mirrored about the edge pixel), so a border pixel
also has 49 members. Windows overlap, so the sets use the shared-pool layout: the pool holds the
21,025 spectra of the scene once and ``members`` index into it.

Note: the windows of training and test pixels overlap spatially (a test pixel's spectrum can be a
member of a training window, unlabelled), as in any windowed evaluation on one scene.
"""

from __future__ import annotations

import numpy as np
import scipy.io
from numpy.lib.stride_tricks import sliding_window_view

from dpp.datasets.base import Dataset, resolve_data_dir
from dpp.errors import DataError
from dpp.sets import RaggedSets, one_hot

CUBE_FILE = "Indian_pines_corrected.npy"
GT_FILE = "Indian_pines_gt.mat"
CLASS_NAMES = (
    "Alfalfa", "Corn-notill", "Corn-mintill", "Corn", "Grass-pasture", "Grass-trees",
    "Grass-pasture-mowed", "Hay-windrowed", "Oats", "Soybean-notill", "Soybean-mintill",
    "Soybean-clean", "Wheat", "Woods", "Buildings-Grass-Trees-Drives", "Stone-Steel-Towers",
)  # fmt: skip


def window_members(shape: tuple[int, int], pixels: np.ndarray, window: int) -> np.ndarray:
    """Flat pool indices of the ``window x window`` neighbourhood of each pixel.

    Args:
        shape: ``(rows, cols)`` of the image.
        pixels: ``[P, 2]`` (row, col) of the centre pixels.
        window: odd window side.

    Returns:
        ``[P, window * window]`` int32 indices into the row-major pixel pool; the centre pixel is
        at position ``window * window // 2``; borders are reflect-padded.

    Raises:
        ValueError: for an even window or one larger than the image.
    """
    if window % 2 != 1 or window < 1:
        raise ValueError(f"window must be an odd positive size, got {window}")
    half = window // 2
    if half >= min(shape):
        raise ValueError(f"window {window} is too large for an image of shape {shape}")
    index = np.arange(shape[0] * shape[1], dtype=np.int32).reshape(shape)
    padded = np.pad(index, half, mode="reflect")
    windows = sliding_window_view(padded, (window, window))  # [rows, cols, w, w]
    return windows[pixels[:, 0], pixels[:, 1]].reshape(len(pixels), window * window)


def load_indian_pines(
    data_dir: str | None,
    window: int = 7,
    num_classes: int = 10,
    classes: list[int] | None = None,
    max_per_class: int | None = None,
    seed: int = 0,
) -> Dataset:
    """Loads the labelled pixels of Indian Pines as windows of spectra (shared-pool layout).

    Args:
        data_dir: data directory (``None``: ``$DPP_DATA_DIR`` or ``../shared/data``).
        window: odd window side (7 in the paper).
        num_classes: keep the ``num_classes`` largest classes (10 in the paper's protocol).
        classes: explicit ground-truth class numbers (1-16) instead of the largest ones.
        max_per_class: optional cap on pixels per class, drawn at random with ``seed`` (for small
            experiments and tests).
        seed: seed of that draw.

    Returns:
        :class:`~dpp.datasets.base.Dataset` whose pool is the ``[145 * 145, 200]`` float32 cube
        (raw radiance; standardise per split with ``dataset.standardize``) and whose ``anchors``
        are the pool index of each set's own pixel.

    Raises:
        FileNotFoundError: naming the folder or file looked at.
        DataError: (a ``ValueError``) for a file that cannot be read, a cube and ground truth that
            do not line up, non-finite spectra, or an unknown class label, naming the file.
        ValueError: for unknown classes or a bad window.
    """
    folder = resolve_data_dir(data_dir, "hyperspectral")
    for name in (CUBE_FILE, GT_FILE):
        if not (folder / name).is_file():
            raise FileNotFoundError(f"Indian Pines file not found: {folder / name}")
    try:
        cube = np.load(folder / CUBE_FILE, allow_pickle=False).astype(np.float32)  # uint16
    except (OSError, ValueError) as err:
        raise DataError(f"{folder / CUBE_FILE}: cannot be read as a .npy array ({err})") from err
    try:
        gt = scipy.io.loadmat(folder / GT_FILE)["indian_pines_gt"]
    except (OSError, ValueError, KeyError) as err:
        raise DataError(
            f"{folder / GT_FILE}: cannot be read as a .mat file holding 'indian_pines_gt' ({err})"
        ) from err
    if cube.ndim != 3 or cube.shape[:2] != gt.shape:
        raise DataError(f"cube {cube.shape} and ground truth {gt.shape} do not line up")
    if not np.all(np.isfinite(cube)):
        raise DataError(f"{folder / CUBE_FILE}: the cube holds NaN or inf")
    if gt.min() < 0 or gt.max() > 16:
        bad = gt[(gt < 0) | (gt > 16)][0]
        raise DataError(f"{folder / GT_FILE}: unknown class label {bad}; expected 0 to 16")
    counts = np.bincount(gt.ravel(), minlength=17)[1:]
    if classes:
        chosen = np.array(sorted(classes))
        if chosen.min() < 1 or chosen.max() > 16:
            raise ValueError("Indian Pines classes are numbered 1 to 16")
    else:
        chosen = np.sort(np.argsort(-counts, kind="stable")[:num_classes] + 1)
    rows, cols = np.nonzero(np.isin(gt, chosen))
    labels = gt[rows, cols]
    if max_per_class:
        rng = np.random.default_rng(seed)
        keep = np.concatenate(
            [rng.permutation(np.flatnonzero(labels == c))[:max_per_class] for c in chosen]
        )
        keep.sort()
        rows, cols, labels = rows[keep], cols[keep], labels[keep]
    pixels = np.stack([rows, cols], axis=1)
    members = window_members(gt.shape, pixels, window)
    n, per_set = members.shape
    set_ids = np.repeat(np.arange(n, dtype=np.int32), per_set)
    y = np.searchsorted(chosen, labels)
    pool = cube.reshape(-1, cube.shape[2])
    sets = RaggedSets.from_flat(pool, set_ids, one_hot(y, len(chosen)), members=members.ravel())
    info = {
        "num_pixels": int(n),
        "window": window,
        "classes": [int(c) for c in chosen],
        "pool_size": int(pool.shape[0]),
        "bands": int(pool.shape[1]),
        "class_counts": [int(np.sum(labels == c)) for c in chosen],
    }
    anchors = rows * gt.shape[1] + cols
    names = tuple(CLASS_NAMES[c - 1] for c in chosen)
    return Dataset(
        "indian_pines",
        sets,
        names,
        info,
        anchors=anchors.astype(np.int64),
        positions=pixels.astype(np.int64),
    )
