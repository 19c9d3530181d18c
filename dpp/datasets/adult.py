"""UCI ADULT with soft labels (section 4.5): groups of census records and their workclass mix.

Both files are parsed with pandas (``adult.test`` starts with a ``|1x3 Cross validator`` line and
ends its income labels with ``.``; fields are separated by ``", "``; ``?`` marks missing values).
Records whose workclass is ``?`` are dropped. The records are grouped by the values of all
discrete variables except native-country and workclass, i.e. by (education, marital-status,
occupation, relationship, race, sex, income); every group is a set whose vectors are its records'
six continuous variables (age, fnlwgt, education-num, capital-gain, capital-loss, hours-per-week)
and whose soft label is the proportion of each of the 8 workclass values among its records.

The heavy-tailed capital-gain and capital-loss are mapped by ``log1p`` when ``log_capital`` is
set (the default); standardisation with training statistics happens per split
(``dataset.standardize``). The sub-sample of 4,146 groups and the 50/50 split are drawn per trial
by the split settings.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from dpp.datasets.base import Dataset, resolve_data_dir
from dpp.errors import DataError
from dpp.sets import RaggedSets

COLUMNS = (
    "age", "workclass", "fnlwgt", "education", "education-num", "marital-status", "occupation",
    "relationship", "race", "sex", "capital-gain", "capital-loss", "hours-per-week",
    "native-country", "income",
)  # fmt: skip
CONTINUOUS = ("age", "fnlwgt", "education-num", "capital-gain", "capital-loss", "hours-per-week")
GROUP_BY = ("education", "marital-status", "occupation", "relationship", "race", "sex", "income")
WORKCLASSES = (
    "Private", "Self-emp-not-inc", "Self-emp-inc", "Federal-gov", "Local-gov", "State-gov",
    "Without-pay", "Never-worked",
)  # fmt: skip
LOG_COLUMNS = ("capital-gain", "capital-loss")


INCOMES = ("<=50K", ">50K")


def read_records(folder) -> pd.DataFrame:
    """Both ADULT files as one frame, with a ``source`` column (``data`` or ``test``).

    Every record is checked: 15 non-empty fields, numbers in the six continuous columns, a known
    workclass (or ``?``) and an income of ``<=50K`` or ``>50K`` (``adult.test`` adds a ``.``).

    Raises:
        FileNotFoundError: naming a missing file.
        DataError: (a ``ValueError``) naming the file, the line and the problem of the first
            corrupt record (a line cut short, a field that is not a number, an unknown label).
    """
    frames = []
    for name, skip in (("adult.data", 0), ("adult.test", 1)):
        path = folder / name
        if not path.is_file():
            raise FileNotFoundError(f"ADULT file not found: {path}")
        frame = pd.read_csv(
            path, header=None, names=list(COLUMNS), skipinitialspace=True, skiprows=skip,
            dtype=str, keep_default_na=False, na_values=[], skip_blank_lines=False,
            on_bad_lines="error",
        ).fillna("")  # fmt: skip
        line = np.arange(len(frame)) + skip + 1  # 1-based line numbers in the file
        blank = (frame == "").all(axis=1).to_numpy()
        frame, line = frame[~blank].reset_index(drop=True), line[~blank]
        _check_records(frame, line, path)
        for column in CONTINUOUS:
            frame[column] = frame[column].astype(np.float64)
        frame["income"] = frame["income"].str.rstrip(".")
        frame["source"] = name.split(".")[1]
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)


def _check_records(frame: pd.DataFrame, line: np.ndarray, path) -> None:
    """Raises ``ValueError`` naming the file and line of the first corrupt record."""

    def fail(row: int, problem: str):
        raise DataError(f"{path}, line {int(line[row])}: {problem}")

    missing = (frame == "").to_numpy()
    if missing.any():
        row, col = np.argwhere(missing)[0]
        fail(row, f"record cut short or empty field: no value for {COLUMNS[col]!r}")
    for column in CONTINUOUS:
        values = pd.to_numeric(frame[column], errors="coerce")
        bad = ~np.isfinite(values.to_numpy(dtype=np.float64))
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            fail(row, f"{column!r} is not a number: {frame[column].iloc[row]!r}")
    income = frame["income"].str.rstrip(".")
    bad = ~income.isin(INCOMES).to_numpy()
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        fail(row, f"unknown income {frame['income'].iloc[row]!r}; expected one of {INCOMES}")
    bad = ~frame["workclass"].isin((*WORKCLASSES, "?")).to_numpy()
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        fail(row, f"unknown workclass {frame['workclass'].iloc[row]!r}")


def group_records(records: pd.DataFrame, log_capital: bool = True):
    """Groups the records (workclass ``?`` dropped) into sets with workclass proportions.

    Args:
        records: output of :func:`read_records`.
        log_capital: map capital-gain and capital-loss by ``log1p``.

    Returns:
        ``(vectors [T, 6] float64, set_ids [T] int32, labels [N, 8] float64, keys)``: vectors of
        the records sorted by group, soft labels, and the group key tuple of every set.

    Raises:
        ValueError: if a workclass outside the 8 known values remains.
    """
    records = records[records["workclass"] != "?"]
    unknown = set(records["workclass"]) - set(WORKCLASSES)
    if unknown:
        raise ValueError(f"unknown workclass values {sorted(unknown)}")
    group = records.groupby(list(GROUP_BY), sort=True).ngroup().to_numpy()
    order = np.argsort(group, kind="stable")
    records, group = records.iloc[order], group[order]
    vectors = records[list(CONTINUOUS)].to_numpy(dtype=np.float64)
    if log_capital:
        for name in LOG_COLUMNS:
            column = CONTINUOUS.index(name)
            vectors[:, column] = np.log1p(vectors[:, column])
    workclass = pd.Categorical(records["workclass"], categories=WORKCLASSES).codes
    counts = np.zeros((group.max() + 1, len(WORKCLASSES)))
    np.add.at(counts, (group, workclass), 1.0)
    labels = counts / counts.sum(axis=1, keepdims=True)
    keys = records.drop_duplicates(list(GROUP_BY))[list(GROUP_BY)].itertuples(index=False)
    return vectors, group.astype(np.int32), labels, [tuple(k) for k in keys]


def load_adult(data_dir: str | None, log_capital: bool = True) -> Dataset:
    """Loads ADULT as groups of records with soft workclass labels.

    Args:
        data_dir: data directory (``None``: ``$DPP_DATA_DIR`` or ``../shared/data``).
        log_capital: ``log1p`` of capital-gain and capital-loss.

    Returns:
        :class:`~dpp.datasets.base.Dataset` with ``D = 6``, ``C = 8`` soft labels and
        ``decode_vectors`` mapping (unstandardised) vectors back to the original units.

    Raises:
        FileNotFoundError: naming the file or folder looked at.
    """
    folder = resolve_data_dir(data_dir, "adult")
    records = read_records(folder)
    vectors, set_ids, labels, _ = group_records(records, log_capital)
    sets = RaggedSets.from_flat(vectors, set_ids, labels)
    info = {
        "num_records": int(vectors.shape[0]),
        "num_groups": int(labels.shape[0]),
        "records_dropped_workclass_unknown": int(np.sum(records["workclass"] == "?")),
        "group_by": list(GROUP_BY),
        "features": list(CONTINUOUS),
        "log_capital": log_capital,
    }
    return Dataset(
        "adult",
        sets,
        WORKCLASSES,
        info,
        feature_names=CONTINUOUS,
        decode_vectors=_expm1_capital if log_capital else None,
    )


def _expm1_capital(vectors: np.ndarray) -> np.ndarray:
    out = np.array(vectors, dtype=np.float64)
    for name in LOG_COLUMNS:
        column = CONTINUOUS.index(name)
        out[:, column] = np.expm1(out[:, column])
    return out
