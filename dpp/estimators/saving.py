"""Writing a fitted estimator's model file: the part every ``save`` shares, and shape checks.

Each estimator's ``save`` gives its own arrays and report to :func:`write_model_file`; its
``restore_arrays`` checks what a file holds with :func:`check_shapes`. Reading a file back is
:func:`dpp.load` (:mod:`dpp.estimators.io`); the container is :mod:`dpp.model_file`.
"""

from __future__ import annotations

import inspect
from pathlib import Path

import numpy as np

from dpp import model_file
from dpp.model_file import jsonable


def check_shapes(path: Path, arrays: dict, shapes: dict, why: str) -> None:
    """Refuses an array of ``arrays`` whose shape is not its entry of ``shapes``.

    Raises:
        ModelFileError: naming the file, the array, its shape, the shape needed and ``why``.
    """
    for name, shape in shapes.items():
        if name in arrays and arrays[name].shape != shape:
            raise model_file.bad(
                path, f"array {name}", f"has shape {arrays[name].shape}; {why} need {shape}"
            )


def write_model_file(estimator, path, method: str, arrays: dict, info: dict) -> Path:
    """Writes a fitted estimator's model file: its arrays, preprocessing and header.

    The shared part of every estimator's ``save``: the fitted preprocessing
    (``preprocess_shift``, ``preprocess_matrix``), an array ``init`` (``param_init``), and
    the header (estimator, method, every constructor parameter, classes, ``n_features_in``,
    the fit's report). A prefit ``preprocess`` is saved as the fitted map, and a ``cv`` that
    is not a number of folds (a splitter) as the constructor's default: neither is needed to
    predict.

    Args:
        estimator: a fitted estimator (``classes_``, ``n_features_in_``, ``preprocess_``).
        path: the file to write.
        method: the method name recorded (the loader's registry key).
        arrays: the estimator's own arrays (floats).
        info: the fit's report (JSON-ready after :func:`~dpp.model_file.jsonable`).

    Returns:
        The path written.
    """
    arrays = dict(arrays)
    preprocess = getattr(estimator, "preprocess_", None)
    if preprocess is not None:
        arrays["preprocess_shift"] = preprocess.shift
        arrays["preprocess_matrix"] = preprocess.matrix
    params = estimator.get_params(deep=False)
    if "preprocess" in params:
        params["preprocess"] = None  # a prefit map is the preprocess_ arrays, as a fitted one
    if not isinstance(params.get("init"), str | None):
        arrays["param_init"] = np.asarray(params["init"], np.float64)
        params["init"] = None
    if "cv" in params and not model_file.is_int(params["cv"]):
        params["cv"] = inspect.signature(type(estimator).__init__).parameters["cv"].default
    classes = np.asarray(estimator.classes_)
    header = {
        "estimator": type(estimator).__name__,
        "method": method,
        "params": jsonable(params),
        "classes": jsonable(classes.tolist()),
        "classes_dtype": classes.dtype.kind,
        "n_features_in": int(estimator.n_features_in_),
        "info": jsonable(info),
    }
    return model_file.write(path, header, arrays)
