"""The estimator registry, and loading a fitted estimator from its model file.

Writing is each estimator's ``save`` (:func:`dpp.estimators.saving.write_model_file` writes the
shared part); the format is described in :mod:`dpp.model_file`. One registry,
:data:`ESTIMATORS`, names every estimator that writes a model file: the prototype methods and
the pooled logistic regressions. The loader checks the header and the shared arrays
(preprocessing) here, then hands the estimator's own arrays to its ``restore_arrays``, which checks
their shapes against each other and the header before setting anything.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from types import MappingProxyType

import numpy as np

from dpp import model_file
from dpp.errors import ModelFileError
from dpp.estimators import ensemble
from dpp.estimators.base import SHARED_PARAMETERS
from dpp.estimators.baselines import (
    ClassPriorClassifier,
    InfoLossClassifier,
    StandardPrototypeClassifier,
)
from dpp.estimators.dpp import DPPClassifier
from dpp.estimators.embedded import EmbeddedDPPClassifier
from dpp.estimators.neural import (
    AttentionMILClassifier,
    DeepSetsClassifier,
    NeuralSetClassifier,
)
from dpp.estimators.pooled import (
    BagOfWordsClassifier,
    PooledLogisticClassifier,
    PoolingClassifier,
)
from dpp.model import FitReport
from dpp.model_file import bad, is_int
from dpp.networks.training import TrainSettings
from dpp.units import Affine

#: Every estimator that writes a model file, by method name (the ``method`` in its records).
ESTIMATORS: dict[str, type] = {
    cls.method: cls
    for cls in (
        DPPClassifier,
        EmbeddedDPPClassifier,
        StandardPrototypeClassifier,
        InfoLossClassifier,
        ClassPriorClassifier,
        PoolingClassifier,
        BagOfWordsClassifier,
        AttentionMILClassifier,
        DeepSetsClassifier,
    )
}
#: The pooled baselines by method name: the part of :data:`ESTIMATORS` that pools features.
POOLED_ESTIMATORS = {
    method: cls for method, cls in ESTIMATORS.items() if issubclass(cls, PooledLogisticClassifier)
}
#: The neural set models by method name: the part of :data:`ESTIMATORS` trained by Adam.
NEURAL_ESTIMATORS = {
    method: cls for method, cls in ESTIMATORS.items() if issubclass(cls, NeuralSetClassifier)
}
#: :class:`~dpp.EmbeddedDPPClassifier`'s parameters added after its model files were first
#: written, with the value that reproduces those files' fits (a file without one reads so).
EMBEDDED_ADDED = MappingProxyType({
    "normalize": False, "theta_options": None, "weight_average": 0.0, "widen_validation": False,
})  # fmt: skip
#: Arrays every model file may hold besides an estimator's own (its ``file_arrays()``).
SHARED_ARRAYS = frozenset({"preprocess_shift", "preprocess_matrix", "param_init"})


def upgraded_header(path: Path, header: dict) -> dict:
    """A model file's header as today's estimators read it.

    dpp 0.1's ``DPPClassifier(embedding=...)`` (removed in 0.2.0) trained the embedded DPP: its
    files become the :class:`~dpp.EmbeddedDPPClassifier` it fitted, with the parameters it
    forwarded (:meth:`~dpp.EmbeddedDPPClassifier.like`: no dropout, no normalisation, the
    networks' weight decay, Adam's ``learning_rate`` and ``batch_size`` from its
    ``optimizer_options``), the same network
    arrays and the same predictions. Every other header is returned as it is.

    ``ClassPriorClassifier`` took the prototype estimators' shared parameters until it was
    given only its own (``n_prototypes``, ``l2``); none of them changed its predictions, so its
    earlier files drop them. A file of :class:`~dpp.EmbeddedDPPClassifier` written before one
    of its later parameters existed takes the value that reproduces its fit
    (:data:`EMBEDDED_ADDED`: no normalisation before eq. 3, no moving average); the networks'
    ``widen_validation`` (removed in 0.3.0) is dropped where it was off and refused where it
    was on, naming dpp 0.2, which reads such a file.

    Raises:
        ModelFileError: such a header whose parameters ``DPPClassifier`` 0.1 did not take.
    """
    params = header.get("params")
    if header.get("estimator") == EmbeddedDPPClassifier.__name__ and isinstance(params, dict):
        return {**header, "params": {**EMBEDDED_ADDED, **params}}
    if header.get("method") in NEURAL_ESTIMATORS and isinstance(params, dict):
        if params.get("widen_validation"):
            raise bad(
                path, "params.widen_validation", "is true: a network trained with a widened "
                "hold-out, which dpp 0.2 reads (pip install 'dpp<0.3'); 0.3 removed it",
            )  # fmt: skip
        kept = {k: v for k, v in params.items() if k != "widen_validation"}
        return {**header, "params": kept}
    if header.get("estimator") == ClassPriorClassifier.__name__ and isinstance(params, dict):
        # only the shared parameters go: any other name is refused by name, as before
        kept = {k: v for k, v in params.items() if k not in SHARED_PARAMETERS}
        return {**header, "params": kept}
    if (
        header.get("estimator") != DPPClassifier.__name__
        or not isinstance(params, dict)
        or params.get("embedding") is None
    ):
        return header
    old = {k: tuple(v) if isinstance(v, list) else v for k, v in params.items()}
    widths = old.pop("embedding")
    try:
        new = EmbeddedDPPClassifier.like(
            DPPClassifier(**old), embedding=widths, dropout=0.0, normalize=False,
            weight_decay=TrainSettings().weight_decay, weight_average=0.0,
            widen_validation=False,  # the fit those files had
        )  # fmt: skip
    except (TypeError, ValueError) as err:
        raise bad(path, "params", f"of DPPClassifier(embedding=...) are invalid ({err})") from None
    return {
        **header,
        "estimator": EmbeddedDPPClassifier.__name__,
        "method": EmbeddedDPPClassifier.method,
        "params": new.get_params(deep=False),
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
    # JSON has no tuples: a list was a tuple parameter (Cs, embedding widths) when saved
    params = {k: tuple(v) if isinstance(v, list) else v for k, v in params.items()}
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
    try:  # the typed report the estimator will carry
        FitReport.from_dict(str(header.get("method")), info)
    except (TypeError, ValueError) as err:
        raise bad(path, "info", f"is not a fit report ({err})") from None
    return cls, estimator


def _check_names(path: Path, header: dict, arrays: dict, estimator) -> None:
    """The estimator's required arrays are there, and every listed one is known."""
    required, optional, prefix = estimator.file_arrays()  # prefix: a network's numbered arrays
    listed = {n for n in header["arrays"] if not (prefix and n.startswith(prefix))}
    missing = sorted((set(header["arrays"]) | required) - set(arrays))
    if missing:
        raise ModelFileError(f"{path} is damaged: missing array(s) {', '.join(missing)}")
    if not listed <= required | optional | SHARED_ARRAYS:
        raise bad(path, "arrays", f"{sorted(listed)} do not match the file's {sorted(arrays)}")


def _preprocess(path: Path, header: dict, arrays: dict, estimator) -> tuple[Affine | None, int]:
    """The fitted preprocessing map, checked against the parameters, and ``D'`` after it."""
    dim = header["n_features_in"]
    standardize = getattr(estimator, "standardize", None)
    pca = getattr(estimator, "pca_components", None)
    if standardize is not None:  # an estimator that fits its own map: the file must agree
        preprocessed = bool(standardize) or pca is not None
        if preprocessed != ("preprocess_matrix" in arrays):
            state = "has no" if preprocessed else "has"
            raise bad(
                path, "params.standardize",
                f"= {standardize} and pca_components = {pca}, but the file {state} "
                "preprocessing arrays",
            )  # fmt: skip
    if "preprocess_matrix" not in arrays and "preprocess_shift" not in arrays:
        return None, dim
    matrix, shift = arrays.get("preprocess_matrix"), arrays.get("preprocess_shift")
    if matrix is None or shift is None:
        raise bad(path, "arrays", "preprocess_shift and preprocess_matrix come together")
    if matrix.ndim != 2 or matrix.shape[0] != dim or shift.shape != (dim,):
        raise bad(
            path, "array preprocess_matrix",
            f"{matrix.shape} and preprocess_shift {shift.shape} must be [D, D'] and [D] with "
            f"D = n_features_in = {dim}",
        )  # fmt: skip
    if pca not in (None, matrix.shape[1]):
        raise bad(
            path, "array preprocess_matrix",
            f"projects on {matrix.shape[1]} components, not pca_components = {pca}",
        )  # fmt: skip
    return Affine(shift, matrix), matrix.shape[1]


def load(path):
    """Reads an estimator written by its ``save``.

    One check covers the whole file before anything is built: every header field by the rules
    the constructors use (unknown parameter names refused), every array for dtype, finiteness
    and shapes that agree with each other and with the header.

    Returns:
        The fitted estimator (any of :data:`ESTIMATORS`, or a
        :class:`~dpp.estimators.ensemble.SetEnsembleClassifier` of them); its
        ``predict_proba`` equals the saved one's.

    Raises:
        FileNotFoundError: no file at ``path``.
        ModelFileError: anything else wrong with the file (not a dpp model, damaged, a newer
            format version, a field or array that breaks a rule), naming the file and the
            field.
    """
    path = Path(path)
    header, arrays = model_file.read(path)
    if header.get("estimator") == ensemble.ENSEMBLE:
        return ensemble.from_file(path, header, arrays, _build)
    return _build(path, header, arrays)


def _build(path: Path, header: dict, arrays: dict):
    """The fitted estimator of one model file's checked header and arrays (see :func:`load`)."""
    header = upgraded_header(path, header)
    cls, estimator = _check_header(path, header)
    _check_names(path, header, arrays, estimator)
    preprocess, dim = _preprocess(path, header, arrays, estimator)
    if "param_init" in arrays and "init" in estimator.get_params(deep=False):
        estimator.set_params(init=arrays["param_init"])
    elif getattr(estimator, "init", None) not in ("k-means", None):
        raise bad(path, "params.init", f"must be 'k-means' here, got {estimator.init!r}")
    classes = np.asarray(header["classes"])
    if header.get("classes_dtype") in ("U", "S", "O"):
        classes = classes.astype(str)
    estimator.classes_ = classes
    estimator.n_features_in_ = int(header["n_features_in"])
    estimator.preprocess_ = preprocess
    estimator.restore_arrays(path, header, arrays, dim)
    return estimator
