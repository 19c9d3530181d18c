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

import json
import zipfile
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import jax.numpy as jnp
import numpy as np

from dpp.errors import ModelFileError
from dpp.model import FittedModel
from dpp.normalize import Normalizer
from dpp.reporting import jsonable

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
    with open(path, "wb") as f:
        np.savez(f, header=np.asarray(json.dumps(header)), **arrays)
    return path


def load(path):
    """Reads an estimator written by :func:`save` (or ``clf.save``).

    Returns:
        The fitted estimator; its ``predict_proba`` equals the saved one's.

    Raises:
        FileNotFoundError: no file at ``path``.
        ModelFileError: not a dpp model file, a damaged file (naming what is missing or
            unreadable), or a format version newer than this dpp reads.
    """
    from dpp.estimators import ESTIMATORS, Affine

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no model file at {path}")
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {name: data[name] for name in data.files}
    except (zipfile.BadZipFile, ValueError, OSError, EOFError) as err:
        raise ModelFileError(f"{path} is not a readable dpp model file ({err})") from None
    if "header" not in arrays:
        raise ModelFileError(f"{path} is not a dpp model file (no header)")
    try:
        header = json.loads(str(arrays["header"]))
    except json.JSONDecodeError as err:
        raise ModelFileError(f"{path}: the header is not valid JSON ({err})") from None
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise ModelFileError(f"{path} is not a dpp model file (format {header.get('format')!r})")
    file_version = header.get("format_version")
    if not isinstance(file_version, int) or file_version > FORMAT_VERSION:
        raise ModelFileError(
            f"{path} has model format version {file_version}, newer than the version "
            f"{FORMAT_VERSION} this dpp ({_dpp_version()}) reads; it was written by dpp "
            f"{header.get('dpp_version')}: upgrade dpp to load it"
        )
    missing = [a for a in header.get("arrays", []) if a not in arrays]
    missing += [a for a in ("mu", "theta", "history", "normalizer_scale") if a not in arrays]
    if missing:
        raise ModelFileError(f"{path} is damaged: missing array(s) {', '.join(sorted(missing))}")
    cls = ESTIMATORS.get(header.get("method"))
    if cls is None or cls.__name__ != header.get("estimator"):
        raise ModelFileError(f"{path}: unknown estimator {header.get('estimator')!r}")
    params = dict(header["params"])
    if "param_init" in arrays:
        params["init"] = arrays["param_init"]
    estimator = cls(**params)
    normalizer = Normalizer(
        shift=arrays.get("normalizer_shift"), scale=float(arrays["normalizer_scale"])
    )
    mu = jnp.asarray(arrays["mu"])
    log_beta = jnp.asarray(arrays["log_beta"]) if "log_beta" in arrays else None
    theta = jnp.asarray(arrays["theta"])
    classes = np.asarray(header["classes"])
    if header.get("classes_dtype") in ("U", "S", "O"):
        classes = classes.astype(str)
    if theta.shape[1] != classes.size or mu.shape[0] != theta.shape[0]:
        raise ModelFileError(
            f"{path} is damaged: theta {theta.shape}, mu {mu.shape} and {classes.size} classes "
            "do not agree"
        )
    model = FittedModel(
        header["method"], mu, log_beta, theta, arrays["history"], header["info"], normalizer
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
