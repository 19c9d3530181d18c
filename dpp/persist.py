"""Saving and loading fitted estimators: one ``.npz`` file, no pickle.

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

A file from a newer format version, or one that is not a dpp model or is damaged, is refused
with a message that says which.
"""

from __future__ import annotations

import inspect
import json
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import jax.numpy as jnp
import numpy as np

from dpp.errors import ModelFileError
from dpp.model import FittedModel
from dpp.reporting import jsonable
from dpp.units import Affine, Normalizer

FORMAT = "dpp-model"
FORMAT_VERSION = 1

__all__ = ["FORMAT", "FORMAT_VERSION", "ModelFileError", "load", "save"]


def _dpp_version() -> str:
    try:
        return version("dpp")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "unknown"


def save(estimator, path) -> Path:
    """Writes a fitted estimator of :mod:`dpp.estimators` to ``path``.

    Args:
        estimator: a fitted :class:`~dpp.estimators.PrototypeClassifier`.
        path: file to write (``.npz`` is appended by NumPy when missing).

    Returns:
        The path written.

    Raises:
        sklearn.exceptions.NotFittedError: for an unfitted estimator.
    """
    from sklearn.utils.validation import check_is_fitted

    check_is_fitted(estimator, "model_")
    model: FittedModel = estimator.model_
    arrays = {
        "mu": np.asarray(model.mu),
        "theta": np.asarray(model.theta),
        "history": np.asarray(model.history, np.float64),
        "normalizer_scale": np.asarray(model.normalizer.scale, np.float64),
    }
    if model.log_beta is not None:
        arrays["log_beta"] = np.asarray(model.log_beta)
    if model.normalizer.shift is not None:
        arrays["normalizer_shift"] = np.asarray(model.normalizer.shift, np.float64)
    if estimator.preprocess_ is not None:
        arrays["preprocess_shift"] = estimator.preprocess_.shift
        arrays["preprocess_matrix"] = estimator.preprocess_.matrix
    params = estimator.get_params(deep=False)
    params["preprocess"] = None  # a prefit map is the preprocess_ arrays, as a fitted one
    if not isinstance(params.get("init"), str | None):
        arrays["param_init"] = np.asarray(params["init"], np.float64)
        params["init"] = None
    classes = np.asarray(estimator.classes_)
    header = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "dpp_version": _dpp_version(),
        "estimator": type(estimator).__name__,
        "method": model.method,
        "params": jsonable(params),
        "classes": jsonable(classes.tolist()),
        "classes_dtype": classes.dtype.kind,
        "n_features_in": int(estimator.n_features_in_),
        "info": jsonable(model.info),
        "arrays": sorted(arrays),
    }
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")  # renamed over ``path``: never half-written
    with open(tmp, "wb") as f:
        np.savez(f, header=np.asarray(json.dumps(header)), **arrays)
    tmp.replace(path)
    return path


def _bad(path: Path, field: str, problem: str) -> ModelFileError:
    return ModelFileError(f"{path}: {field} {problem}".rstrip())


def _read(path: Path) -> tuple[dict, dict]:
    """The arrays and the JSON header of a model file, or :class:`ModelFileError`."""
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
        raise _bad(path, "header", f"must be a JSON text, got a {raw.dtype} array {raw.shape}")
    try:
        header = json.loads(str(raw))
    except json.JSONDecodeError as err:
        raise ModelFileError(f"{path}: the header is not valid JSON ({err})") from None
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        found = header.get("format") if isinstance(header, dict) else type(header).__name__
        raise ModelFileError(f"{path} is not a dpp model file (format {found!r})")
    return header, arrays


def _int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_header(path: Path, header: dict):
    """The estimator class and its parameters, every header field checked.

    Parameters are checked by the estimator's own ``check_params`` (the rules of its
    constructor), after refusing names the constructor does not take.
    """
    from dpp.estimators import ESTIMATORS

    file_version = header.get("format_version")
    if not _int(file_version) or not 1 <= file_version <= FORMAT_VERSION:
        raise ModelFileError(
            f"{path} has model format version {file_version}, newer than the version "
            f"{FORMAT_VERSION} this dpp ({_dpp_version()}) reads; it was written by dpp "
            f"{header.get('dpp_version')}: upgrade dpp to load it"
            if _int(file_version) and file_version > FORMAT_VERSION
            else f"{path}: format_version must be an integer in 1..{FORMAT_VERSION}, got "
            f"{file_version!r}"
        )
    cls = ESTIMATORS.get(header.get("method")) if isinstance(header.get("method"), str) else None
    if cls is None or cls.__name__ != header.get("estimator"):
        raise _bad(
            path,
            "estimator",
            f"{header.get('estimator')!r} with method {header.get('method')!r} is not a dpp "
            f"estimator (known: {', '.join(c.__name__ for c in ESTIMATORS.values())})",
        )
    params = header.get("params")
    if not isinstance(params, dict):
        raise _bad(path, "params", f"must be a JSON object, got {type(params).__name__}")
    accepted = set(inspect.signature(cls.__init__).parameters) - {"self"}
    unknown = sorted(set(params) - accepted)
    if unknown:
        raise _bad(path, f"params.{unknown[0]}", f"is not a parameter of {cls.__name__}")
    try:
        estimator = cls(**params)
        estimator.check_params()
    except ValueError as err:
        raise _bad(path, f"params.{err}", "") from None
    except Exception as err:  # a value of a type the rules do not expect
        raise _bad(path, "params", f"are invalid ({type(err).__name__}: {err})") from None
    classes = header.get("classes")
    if (
        not isinstance(classes, list)
        or len(classes) < 2
        or not all(isinstance(c, str | int | float) and not isinstance(c, bool) for c in classes)
        or len({(type(c), c) for c in classes}) != len(classes)
    ):
        raise _bad(path, "classes", f"must list 2 or more distinct labels, got {classes!r}")
    if header.get("classes_dtype") not in (None, "U", "S", "O", "i", "u", "f", "b"):
        found = header.get("classes_dtype")
        raise _bad(path, "classes_dtype", f"must be a NumPy dtype kind, got {found!r}")
    if not _int(header.get("n_features_in")) or header["n_features_in"] < 1:
        found = header.get("n_features_in")
        raise _bad(path, "n_features_in", f"must be a positive integer, got {found!r}")
    info = header.get("info")
    if not isinstance(info, dict):
        raise _bad(path, "info", f"must be a JSON object, got {type(info).__name__}")
    if "rounds" in info and (not _int(info["rounds"]) or info["rounds"] < 0):
        raise _bad(path, "info.rounds", f"must be an integer >= 0, got {info['rounds']!r}")
    if "status" in info and not isinstance(info["status"], str | None):
        raise _bad(path, "info.status", f"must be text, got {info['status']!r}")
    listed = header.get("arrays")
    if not isinstance(listed, list) or not all(isinstance(a, str) for a in listed):
        raise _bad(path, "arrays", f"must list the array names, got {listed!r}")
    return cls, estimator


def _check_arrays(path: Path, header: dict, arrays: dict, estimator) -> None:
    """Every array: listed in the header, float, finite, and of shapes that agree."""
    listed = set(header["arrays"])
    required = {"mu", "theta", "history", "normalizer_scale"}
    required |= {"log_beta"} if header["method"] == "dpp" else set()
    missing = sorted((listed | required) - set(arrays))
    if missing:
        raise ModelFileError(f"{path} is damaged: missing array(s) {', '.join(missing)}")
    known = required | {"log_beta", "normalizer_shift", "preprocess_shift", "preprocess_matrix",
                        "param_init"}  # fmt: skip
    extra = sorted(set(arrays) - listed - {"header"})
    if extra or not listed <= known:
        raise _bad(path, "arrays", f"{sorted(listed)} do not match the file's {sorted(arrays)}")
    for name, value in arrays.items():
        if value.dtype.kind != "f":
            raise _bad(path, f"array {name}", f"must hold floats, got dtype {value.dtype}")
        if not np.all(np.isfinite(value)):
            raise _bad(path, f"array {name}", "holds NaN or infinite values")
    k, classes, dim = estimator.n_prototypes, len(header["classes"]), header["n_features_in"]
    preprocessed = bool(estimator.standardize) or estimator.pca_components is not None
    if preprocessed != ("preprocess_matrix" in arrays):
        state = "has no" if preprocessed else "has"
        raise _bad(
            path, "params.standardize",
            f"= {estimator.standardize} and pca_components = {estimator.pca_components}, but "
            f"the file {state} preprocessing arrays",
        )  # fmt: skip
    if "preprocess_matrix" in arrays or "preprocess_shift" in arrays:
        matrix = arrays.get("preprocess_matrix")
        if matrix is None or "preprocess_shift" not in arrays:
            raise _bad(path, "arrays", "preprocess_shift and preprocess_matrix come together")
        if matrix.ndim != 2 or matrix.shape[0] != dim or arrays["preprocess_shift"].shape != (dim,):
            raise _bad(
                path, "array preprocess_matrix",
                f"{matrix.shape} and preprocess_shift {arrays['preprocess_shift'].shape} must be "
                f"[D, D'] and [D] with D = n_features_in = {dim}",
            )  # fmt: skip
        dim = matrix.shape[1]
    if estimator.pca_components not in (None, dim):
        raise _bad(
            path, "array preprocess_matrix",
            f"projects on {dim} components, not pca_components = {estimator.pca_components}",
        )  # fmt: skip
    shapes = {
        "mu": (k, dim),
        "theta": (k, classes),
        "normalizer_scale": (),
        "normalizer_shift": (dim,),
        "param_init": (k, dim),
    }
    if header["method"] == "dpp":
        shapes["log_beta"] = (k,) if estimator.per_prototype_beta else ()
    for name, shape in shapes.items():
        if name in arrays and arrays[name].shape != shape:
            raise _bad(
                path, f"array {name}",
                f"has shape {arrays[name].shape}; n_prototypes = {k}, {classes} classes and "
                f"{dim} features (after preprocessing) need {shape}",
            )  # fmt: skip
    if arrays["history"].ndim != 1:
        raise _bad(path, "array history", f"must be [rounds], got {arrays['history'].shape}")
    if not float(arrays["normalizer_scale"]) > 0:
        raise _bad(path, "array normalizer_scale", "must be > 0")
    if "param_init" not in arrays and estimator.init not in ("k-means", None):
        raise _bad(path, "params.init", f"must be 'k-means' here, got {estimator.init!r}")


def load(path):
    """Reads an estimator written by :func:`save` (or ``clf.save``).

    One check covers the whole file before anything is built: every header field by the rules
    the constructors use (unknown parameter names refused), every array for dtype, finiteness
    and shapes that agree with each other and with the header.

    Returns:
        The fitted estimator; its ``predict_proba`` equals the saved one's.

    Raises:
        FileNotFoundError: no file at ``path``.
        ModelFileError: anything else wrong with the file (not a dpp model, damaged, a newer
            format version, a field or array that breaks a rule), naming the file and the
            field.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no model file at {path}")
    header, arrays = _read(path)
    cls, estimator = _check_header(path, header)
    _check_arrays(path, header, arrays, estimator)
    if "param_init" in arrays:
        estimator.set_params(init=arrays["param_init"])
    normalizer = Normalizer(
        shift=arrays.get("normalizer_shift"), scale=float(arrays["normalizer_scale"])
    )
    log_beta = jnp.asarray(arrays["log_beta"]) if "log_beta" in arrays else None
    classes = np.asarray(header["classes"])
    if header.get("classes_dtype") in ("U", "S", "O"):
        classes = classes.astype(str)
    model = FittedModel(
        header["method"],
        jnp.asarray(arrays["mu"]),
        log_beta,
        jnp.asarray(arrays["theta"]),
        arrays["history"],
        header["info"],
        normalizer,
    )
    estimator.classes_ = classes
    estimator.n_features_in_ = int(header["n_features_in"])
    estimator.preprocess_ = (
        Affine(arrays["preprocess_shift"], arrays["preprocess_matrix"])
        if "preprocess_matrix" in arrays
        else None
    )
    estimator._set_fitted(model)
    return estimator
