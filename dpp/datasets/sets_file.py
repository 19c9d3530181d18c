"""Your own sets from a file: ``.npz``, CSV or Parquet (``dataset=sets_file dataset.path=FILE``).

Formats:

* ``.npz`` (read with ``allow_pickle=False``): ``vectors`` ``[T, D]`` float, ``set_ids`` ``[T]``
  integers (any values, sorted or not), and ``labels`` ``[N]`` (class names or integers) or
  ``soft_labels`` ``[N, C]`` (rows on the simplex); optional ``class_names`` ``[C]`` and
  ``feature_names`` ``[D]``. Label ``n`` belongs to the set with the ``n``-th smallest id.
* CSV or Parquet: one row per vector, a set-id column, a label column (the same label on every
  row of a set) and feature columns (by default every other column, which must be numeric).
* A CSV without a header (``header=False``): the multiple-instance field's long format, each row
  a label, a set (bag) id, then the features, as the MUSK, Elephant and Corel files are
  distributed (e.g. by the ``mil`` package).

Labels are optional (sets to predict on, :func:`read_sets`); a training dataset needs them.
Every problem is reported naming the file and what is wrong (a missing column, a non-numeric
feature, NaN with its row, a set whose rows disagree on the label, counts that do not match).
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd

from dpp.datasets.base import Dataset
from dpp.errors import DataError
from dpp.sets import RaggedSets, one_hot

TABLE_SUFFIXES = (".csv", ".parquet", ".pq")


class SetsFile(NamedTuple):
    """What a sets file holds, with its sets numbered ``0..N-1`` by ascending original id."""

    vectors: np.ndarray  # [T, D] float64, sorted by set
    set_index: np.ndarray  # [T] int32 in 0..N-1, ascending
    set_ids: np.ndarray  # [N] the original ids, ascending
    labels: np.ndarray | None  # [N] class labels, or None
    soft_labels: np.ndarray | None  # [N, C], or None
    class_names: tuple[str, ...]
    feature_names: tuple[str, ...]


def read_sets(
    path,
    set_column: str = "set_id",
    label_column: str | None = "label",
    feature_columns: list[str] | None = None,
    header: bool = True,
) -> SetsFile:
    """Reads sets (labels optional) from an ``.npz``, CSV or Parquet file.

    Args:
        path: the file.
        set_column: the set-id column (tables only).
        label_column: the label column (tables only); absent or ``None`` means no labels.
        feature_columns: the feature columns (tables only); ``None``: every other column.
        header: ``False`` for a CSV without a header row in the long format ``label, set id,
            features...``: its columns are then named ``label``, ``set_id``, ``x0``, ``x1``, ...
            (``set_column`` and ``label_column`` must keep their defaults).

    Returns:
        :class:`SetsFile`.

    Raises:
        FileNotFoundError: naming the path looked at.
        DataError: naming the file and the problem.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no sets file at {path.resolve()}")
    suffix = path.suffix.lower()
    if suffix == ".npz":
        return _read_npz(path)
    if not header and (suffix != ".csv" or (set_column, label_column) != ("set_id", "label")):
        raise DataError(
            f"{path}: header=False reads a CSV of columns label, set id, features; got a "
            f"{suffix} file or set_column={set_column!r}, label_column={label_column!r}"
        )
    if suffix in TABLE_SUFFIXES:
        return _read_table(path, set_column, label_column, feature_columns, header)
    raise DataError(f"{path}: unknown sets file type {suffix!r}; use .npz, .csv or .parquet")


def _group(path: Path, vectors, ids, what: str):
    """Sorts rows by set id: ``(vectors, set_index, unique ids, first row of each set)``."""
    vectors = np.asarray(vectors)
    ids = np.asarray(ids)
    if vectors.ndim != 2 or vectors.shape[0] == 0:
        raise DataError(f"{path}: {what} must be a non-empty [T, D] array, got {vectors.shape}")
    if not np.issubdtype(vectors.dtype, np.number):
        raise DataError(f"{path}: {what} must be numbers, got dtype {vectors.dtype}")
    if ids.shape != (vectors.shape[0],):
        raise DataError(
            f"{path}: {vectors.shape[0]} vectors but set ids of shape {ids.shape} (one per vector)"
        )
    if not np.issubdtype(ids.dtype, np.integer):
        raise DataError(f"{path}: set ids must be integers, got dtype {ids.dtype}")
    bad = ~np.all(np.isfinite(vectors), axis=1)
    if np.any(bad):
        row = int(np.flatnonzero(bad)[0])
        raise DataError(f"{path}: vector row {row} (set id {ids[row]}) holds NaN or inf")
    unique, inverse = np.unique(ids, return_inverse=True)
    order = np.argsort(inverse, kind="stable")
    first = np.searchsorted(inverse[order], np.arange(unique.size))
    return vectors[order].astype(np.float64), inverse[order].astype(np.int32), unique, order, first


def _read_npz(path: Path) -> SetsFile:
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {k: data[k] for k in data.files}
    except ValueError as err:
        raise DataError(f"{path}: cannot read without pickle ({err}); store plain arrays") from None
    except Exception as err:  # a damaged archive
        raise DataError(f"{path} is not a readable .npz file ({err})") from None
    for key in ("vectors", "set_ids"):
        if key not in arrays:
            raise DataError(f"{path}: no {key!r} array (it holds {sorted(arrays)})")
    vectors, index, unique, _, _ = _group(path, arrays["vectors"], arrays["set_ids"], "vectors")
    n = unique.size
    labels = soft = None
    if "soft_labels" in arrays:
        soft = np.asarray(arrays["soft_labels"], np.float64)
        if soft.shape[:1] != (n,) or soft.ndim != 2:
            raise DataError(f"{path}: soft_labels must be [N = {n}, C], got {soft.shape}")
    elif "labels" in arrays:
        labels = np.asarray(arrays["labels"])
        if labels.shape != (n,):
            raise DataError(
                f"{path}: labels must be [N] = [{n}] (one per distinct set id), got {labels.shape}"
            )
    names = tuple(str(c) for c in arrays.get("class_names", ()))
    features = tuple(str(f) for f in arrays.get("feature_names", ()))
    return SetsFile(vectors, index, unique, labels, soft, names, features)


def _plain(value):
    """A NumPy scalar as the Python value it holds (repr ``1000``, not ``np.int64(1000)``)."""
    return value.item() if isinstance(value, np.generic) else value


def _read_table(path: Path, set_column, label_column, feature_columns, header=True) -> SetsFile:
    try:
        if path.suffix.lower() != ".csv":
            frame = pd.read_parquet(path)
        else:
            frame = pd.read_csv(path, header=0 if header else None)
    except Exception as err:
        raise DataError(f"{path}: cannot read the table ({err})") from None
    if not header:
        if frame.shape[1] < 3:
            raise DataError(
                f"{path}: a headerless CSV needs a label, a set id and at least one feature "
                f"column; it has {frame.shape[1]} column(s)"
            )
        frame.columns = ["label", "set_id", *(f"x{j}" for j in range(frame.shape[1] - 2))]
    if frame.empty:  # pandas reads a header alone as columns of dtype object
        raise DataError(f"{path}: the table has no rows (columns: {', '.join(frame.columns)})")
    if set_column not in frame.columns:
        columns = ", ".join(map(str, frame.columns))
        raise DataError(f"{path}: no set-id column {set_column!r} (columns: {columns})")
    has_labels = label_column is not None and label_column in frame.columns
    if feature_columns is None:
        skip = {set_column, label_column if has_labels else None}
        feature_columns = [c for c in frame.columns if c not in skip]
    missing = [c for c in feature_columns if c not in frame.columns]
    if missing:
        raise DataError(f"{path}: no feature column(s) {', '.join(map(str, missing))}")
    if not feature_columns:
        raise DataError(f"{path}: no feature columns")
    for c in feature_columns:
        if not pd.api.types.is_numeric_dtype(frame[c]):
            raise DataError(f"{path}: feature column {c!r} is not numeric (dtype {frame[c].dtype})")
    ids = frame[set_column].to_numpy()
    vectors, index, unique, order, first = _group(
        path, frame[feature_columns].to_numpy(np.float64), ids, "the feature columns"
    )
    labels = None
    if has_labels:
        column = frame[label_column].to_numpy()[order]
        if pd.isna(column).any():
            row = int(order[np.flatnonzero(pd.isna(column))[0]])
            raise DataError(f"{path}: row {row} has no label in column {label_column!r}")
        labels = column[first]
        disagree = column != labels[index]
        if np.any(disagree):
            at = int(np.flatnonzero(disagree)[0])
            row = int(order[at])
            raise DataError(
                f"{path}: set {_plain(ids[row])!r} has rows with different labels (row {row}: "
                f"{_plain(column[at])!r}, its first row: {_plain(labels[index[at]])!r})"
            )
    features = tuple(str(c) for c in feature_columns)
    return SetsFile(vectors, index, unique, labels, None, (), features)


def load_sets_file(
    path: str,
    set_column: str = "set_id",
    label_column: str = "label",
    feature_columns: list[str] | None = None,
    header: bool = True,
) -> Dataset:
    """A labelled :class:`~dpp.datasets.base.Dataset` from a sets file (see the module doc).

    Arguments as :func:`read_sets`.

    Raises:
        FileNotFoundError: naming the path.
        DataError: naming the file and the problem (also: no labels, one class only, soft
            labels off the simplex).
    """
    data = read_sets(path, set_column, label_column, feature_columns, header)
    if data.soft_labels is not None:
        labels = data.soft_labels
        names = data.class_names or tuple(str(c) for c in range(labels.shape[1]))
    elif data.labels is not None:
        classes, index = np.unique(data.labels, return_inverse=True)
        if classes.size < 2:
            raise DataError(f"{path}: the labels hold one class only ({_plain(classes[0])!r})")
        labels = one_hot(index, classes.size)
        names = tuple(str(c) for c in classes)
    else:
        raise DataError(
            f"{path}: no labels (an npz needs 'labels' or 'soft_labels'; a table "
            f"needs the column {label_column!r})"
        )
    try:
        sets = RaggedSets.from_flat(
            data.vectors, data.set_index, labels, num_sets=len(data.set_ids)
        )
    except ValueError as err:
        raise DataError(f"{path}: {err}") from None
    info = {
        "path": str(Path(path).resolve()),
        "num_sets": sets.num_sets,
        "num_vectors": sets.num_memberships,
        "dim": sets.dim,
        "soft_labels": data.soft_labels is not None,
    }
    return Dataset(
        name="sets_file",
        sets=sets,
        class_names=names,
        info=info,
        feature_names=data.feature_names,
    )
