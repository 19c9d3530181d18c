"""Loading a fitted estimator from its model file (:mod:`dpp.model_file`), every field checked.

Writing is :meth:`dpp.estimators.base.PrototypeClassifier.save`; the format is described in
:mod:`dpp.model_file`.
"""

from __future__ import annotations

import inspect
from pathlib import Path

import jax.numpy as jnp
import numpy as np

from dpp import model_file
from dpp.errors import ModelFileError
from dpp.estimators.base import PrototypeClassifier
from dpp.estimators.baselines import (
    ClassPriorClassifier,
    InfoLossClassifier,
    StandardPrototypeClassifier,
)
from dpp.estimators.dpp import DPPClassifier
from dpp.model import FittedModel
from dpp.model_file import bad, is_int
from dpp.units import Affine, Normalizer

#: Estimators by method name (the ``method`` recorded in results).
ESTIMATORS: dict[str, type[PrototypeClassifier]] = {
    cls.method: cls
    for cls in (
        DPPClassifier,
        StandardPrototypeClassifier,
        InfoLossClassifier,
        ClassPriorClassifier,
    )
}


def _check_header(path: Path, header: dict):
    """The estimator class and its parameters, every header field checked.

    Parameters are checked by the estimator's own ``check_params`` (the rules of its
    constructor), after refusing names the constructor does not take.
    """
    cls = ESTIMATORS.get(header.get("method")) if isinstance(header.get("method"), str) else None
    if cls is None or cls.__name__ != header.get("estimator"):
        raise bad(
            path,
            "estimator",
            f"{header.get('estimator')!r} with method {header.get('method')!r} is not a dpp "
            f"estimator (known: {', '.join(c.__name__ for c in ESTIMATORS.values())})",
        )
    params = header.get("params")
    if not isinstance(params, dict):
        raise bad(path, "params", f"must be a JSON object, got {type(params).__name__}")
    accepted = set(inspect.signature(cls.__init__).parameters) - {"self"}
    unknown = sorted(set(params) - accepted)
    if unknown:
        raise bad(path, f"params.{unknown[0]}", f"is not a parameter of {cls.__name__}")
    try:
        estimator = cls(**params)
        estimator.check_params()
    except ValueError as err:
        raise bad(path, f"params.{err}", "") from None
    except Exception as err:  # a value of a type the rules do not expect
        raise bad(path, "params", f"are invalid ({type(err).__name__}: {err})") from None
    classes = header.get("classes")
    if (
        not isinstance(classes, list)
        or len(classes) < 2
        or not all(isinstance(c, str | int | float) and not isinstance(c, bool) for c in classes)
        or len({(type(c), c) for c in classes}) != len(classes)
    ):
        raise bad(path, "classes", f"must list 2 or more distinct labels, got {classes!r}")
    if header.get("classes_dtype") not in (None, "U", "S", "O", "i", "u", "f", "b"):
        found = header.get("classes_dtype")
        raise bad(path, "classes_dtype", f"must be a NumPy dtype kind, got {found!r}")
    if not is_int(header.get("n_features_in")) or header["n_features_in"] < 1:
        found = header.get("n_features_in")
        raise bad(path, "n_features_in", f"must be a positive integer, got {found!r}")
    info = header.get("info")
    if not isinstance(info, dict):
        raise bad(path, "info", f"must be a JSON object, got {type(info).__name__}")
    if "rounds" in info and (not is_int(info["rounds"]) or info["rounds"] < 0):
        raise bad(path, "info.rounds", f"must be an integer >= 0, got {info['rounds']!r}")
    if "status" in info and not isinstance(info["status"], str | None):
        raise bad(path, "info.status", f"must be text, got {info['status']!r}")
    return cls, estimator


def _check_arrays(path: Path, header: dict, arrays: dict, estimator) -> None:
    """Every array this estimator needs is there, known, and of shapes that agree.

    (:func:`dpp.model_file.read` has checked that they are listed, float and finite.)
    """
    listed = set(header["arrays"])
    required = {"mu", "theta", "history", "normalizer_scale"}
    required |= {"log_beta"} if header["method"] == "dpp" else set()
    missing = sorted((listed | required) - set(arrays))
    if missing:
        raise ModelFileError(f"{path} is damaged: missing array(s) {', '.join(missing)}")
    known = required | {"log_beta", "normalizer_shift", "preprocess_shift", "preprocess_matrix",
                        "param_init"}  # fmt: skip
    if not listed <= known:
        raise bad(path, "arrays", f"{sorted(listed)} do not match the file's {sorted(arrays)}")
    k, classes, dim = estimator.n_prototypes, len(header["classes"]), header["n_features_in"]
    preprocessed = bool(estimator.standardize) or estimator.pca_components is not None
    if preprocessed != ("preprocess_matrix" in arrays):
        state = "has no" if preprocessed else "has"
        raise bad(
            path, "params.standardize",
            f"= {estimator.standardize} and pca_components = {estimator.pca_components}, but "
            f"the file {state} preprocessing arrays",
        )  # fmt: skip
    if "preprocess_matrix" in arrays or "preprocess_shift" in arrays:
        matrix = arrays.get("preprocess_matrix")
        if matrix is None or "preprocess_shift" not in arrays:
            raise bad(path, "arrays", "preprocess_shift and preprocess_matrix come together")
        if matrix.ndim != 2 or matrix.shape[0] != dim or arrays["preprocess_shift"].shape != (dim,):
            raise bad(
                path, "array preprocess_matrix",
                f"{matrix.shape} and preprocess_shift {arrays['preprocess_shift'].shape} must be "
                f"[D, D'] and [D] with D = n_features_in = {dim}",
            )  # fmt: skip
        dim = matrix.shape[1]
    if estimator.pca_components not in (None, dim):
        raise bad(
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
            raise bad(
                path, f"array {name}",
                f"has shape {arrays[name].shape}; n_prototypes = {k}, {classes} classes and "
                f"{dim} features (after preprocessing) need {shape}",
            )  # fmt: skip
    if arrays["history"].ndim != 1:
        raise bad(path, "array history", f"must be [rounds], got {arrays['history'].shape}")
    if not float(arrays["normalizer_scale"]) > 0:
        raise bad(path, "array normalizer_scale", "must be > 0")
    if "param_init" not in arrays and estimator.init not in ("k-means", None):
        raise bad(path, "params.init", f"must be 'k-means' here, got {estimator.init!r}")


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
    header, arrays = model_file.read(path)
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
