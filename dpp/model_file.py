"""The model file: one ``.npz`` archive with a JSON header, no pickle; no estimator in sight.

Format (version :data:`FORMAT_VERSION`): a NumPy ``.npz`` archive, read with
``allow_pickle=False``, holding

* ``header``: a 0-d unicode array with a JSON object: ``format`` (``"dpp-model"``),
  ``format_version``, ``dpp_version``, ``estimator`` (class name), ``params`` (every constructor
  parameter), ``classes`` (the class labels, JSON numbers or strings), ``n_features_in``,
  ``method``, ``info`` (the fit's report) and ``arrays`` (the names of the arrays below);
* ``mu`` ``[K, D']``, ``theta`` ``[K, C]``, ``history`` ``[R]`` and, for a soft encoder,
  ``log_beta`` ``[]`` or ``[K]``: the model in its internal units;
* ``normalizer_shift`` ``[D']`` and ``normalizer_scale`` ``[]``: the map into internal units;
* ``preprocess_shift`` ``[D]`` and ``preprocess_matrix`` ``[D, D']`` when the estimator
  standardises or projects;
* ``param_init`` ``[K, D']`` when ``init`` was an array.

The header's ``digests`` gives each array's SHA-256 (of its dtype, shape and bytes,
:func:`digest`), so an array that was altered, or swapped with another of the same shape, is
refused by name. What the format cannot detect: a file written before the digests (no
``digests`` key; it loads unchecked, as before) or with them removed, and a file rewritten
with digests recomputed, since a digest is a checksum and not a signature: it catches damage
and mix-ups, not forgery. ``tests/test_model_files.py`` tests both statements.

A file from a newer format version, or one that is not a dpp model or is damaged, is refused
with a message that says which.

This module reads and writes the container and checks what every model file must satisfy (the
format, its version, the header's JSON, float and finite arrays that the header lists);
:mod:`dpp.estimators.io` checks the fields against the estimators' own rules and builds one.
"""

from __future__ import annotations

import hashlib
import json
import math
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import numpy as np

from dpp.errors import ModelFileError

FORMAT = "dpp-model"
FORMAT_VERSION = 1


def _dpp_version() -> str:
    try:
        return version("dpp")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "unknown"


def write(path, header: dict, arrays: dict[str, np.ndarray]) -> Path:
    """Writes ``header`` (JSON-ready) and ``arrays`` atomically to ``path``.

    ``format``, ``format_version``, ``dpp_version`` and ``arrays`` (the names) are added to the
    header. The file is written beside ``path`` and renamed over it: never half-written.

    Returns:
        The path written.
    """
    header = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "dpp_version": _dpp_version(),
        **header,
        "arrays": sorted(arrays),
        "digests": {name: digest(np.asarray(value)) for name, value in sorted(arrays.items())},
    }
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as f:
        np.savez(f, header=np.asarray(json.dumps(header)), **arrays)
    tmp.replace(path)
    return path


def read(path) -> tuple[dict, dict[str, np.ndarray]]:
    """The header and the arrays of a model file, checked as every model file must be.

    Raises:
        FileNotFoundError: no file at ``path``.
        ModelFileError: not a dpp model file, damaged, a newer format version, a header that is
            not a JSON object, arrays not listed in it or not float and finite; naming the file
            and the field.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no model file at {path}")
    header, arrays = _read(path)
    file_version = header.get("format_version")
    if not is_int(file_version) or not 1 <= file_version <= FORMAT_VERSION:
        raise ModelFileError(
            f"{path} has model format version {file_version}, newer than the version "
            f"{FORMAT_VERSION} this dpp ({_dpp_version()}) reads; it was written by dpp "
            f"{header.get('dpp_version')}: upgrade dpp to load it"
            if is_int(file_version) and file_version > FORMAT_VERSION
            else f"{path}: format_version must be an integer in 1..{FORMAT_VERSION}, got "
            f"{file_version!r}"
        )
    listed = header.get("arrays")
    if not isinstance(listed, list) or not all(isinstance(a, str) for a in listed):
        raise bad(path, "arrays", f"must list the array names, got {listed!r}")
    extra = sorted(set(arrays) - set(listed))
    if extra:
        raise bad(path, "arrays", f"{sorted(listed)} do not match the file's {sorted(arrays)}")
    digests = header.get("digests")
    if digests is not None:  # files written before the digests have none
        if not isinstance(digests, dict):
            raise bad(path, "digests", f"must map array names to digests, got {digests!r}")
        for name, value in arrays.items():  # a missing array: the loader names it
            if name not in digests:
                raise bad(path, f"array {name}", "has no digest in the header")
            if digests[name] != digest(value):
                raise bad(
                    path,
                    f"array {name}",
                    "does not match its digest: the array was altered or swapped with another",
                )
    for name, value in arrays.items():
        if value.dtype.kind != "f":
            raise bad(path, f"array {name}", f"must hold floats, got dtype {value.dtype}")
        if not np.all(np.isfinite(value)):
            raise bad(path, f"array {name}", "holds NaN or infinite values")
    return header, arrays


def digest(array: np.ndarray) -> str:
    """The hex SHA-256 of an array's dtype, shape and C-order bytes (the header's ``digests``)."""
    h = hashlib.sha256(f"{array.dtype.str}{array.shape}".encode())
    h.update(np.ascontiguousarray(array).tobytes())
    return h.hexdigest()


def is_int(value) -> bool:
    """Whether a JSON value is an integer (not a bool)."""
    return isinstance(value, int) and not isinstance(value, bool)


def bad(path: Path, field: str, problem: str) -> ModelFileError:
    """The error for a field of a model file that breaks a rule."""
    return ModelFileError(f"{path}: {field} {problem}".rstrip())


#: The first bytes of a ZIP archive (an ``.npz``) and of a NumPy ``.npy`` array.
_ZIP, _NPY = b"PK\x03\x04", b"\x93NUMPY"
#: The first byte of a pickle (protocol 2 and later).
_PICKLE = b"\x80"


def _kind_of(path: Path) -> str | None:
    """Why ``path`` cannot be a model file judging by its first bytes, or ``None`` if it may be."""
    with open(path, "rb") as f:
        start = f.read(512)
    if start.startswith((_ZIP, _NPY, _PICKLE)):
        return None
    if not start:
        return "it is empty"
    try:
        text = start.decode("utf-8")
    except UnicodeDecodeError:
        return "it is not an .npz archive"
    first = text.splitlines()[0][:60] if text.strip() else ""
    return f"it is a text file (it begins {first!r}), not an .npz archive"


def _read(path: Path) -> tuple[dict, dict]:
    """The arrays and the JSON header of a model file, or :class:`ModelFileError`."""
    kind = _kind_of(path)
    if kind is not None:  # NumPy would call a text file "pickled data"
        raise ModelFileError(f"{path} is not a dpp model file: {kind}")
    try:
        with np.load(path, allow_pickle=False) as data:
            if not hasattr(data, "files"):
                raise ModelFileError(f"{path} is not a dpp model file (a bare array, not .npz)")
            arrays = {name: data[name] for name in data.files}
    except ModelFileError:
        raise
    except ValueError as err:
        if "allow_pickle" in str(err):  # an object array: pickled Python objects
            raise ModelFileError(
                f"{path} is not a dpp model file: it holds pickled Python objects, which dpp "
                "never writes and never loads"
            ) from None
        raise ModelFileError(f"{path} is not a readable dpp model file ({err})") from None
    except Exception as err:  # zip, CRC and NumPy format errors of a truncated or damaged file
        raise ModelFileError(
            f"{path} is not a readable dpp model file ({type(err).__name__}: {err})"
        ) from None
    if "header" not in arrays:
        raise ModelFileError(f"{path} is not a dpp model file (no header)")
    raw = arrays.pop("header")
    if raw.shape != () or raw.dtype.kind != "U":
        raise bad(path, "header", f"must be a JSON text, got a {raw.dtype} array {raw.shape}")
    try:
        header = json.loads(str(raw))
    except json.JSONDecodeError as err:
        raise ModelFileError(f"{path}: the header is not valid JSON ({err})") from None
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        found = header.get("format") if isinstance(header, dict) else type(header).__name__
        raise ModelFileError(f"{path} is not a dpp model file (format {found!r})")
    return header, arrays


def jsonable(value):
    """``value`` with arrays as lists, NumPy scalars as Python ones and NaN/inf as ``None``."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return jsonable(value.tolist())
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
