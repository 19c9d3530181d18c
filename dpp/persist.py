"""Saving and loading fitted estimators (kept for one release: the code lives elsewhere now).

The file format and its container are :mod:`dpp.model_file`; writing is ``clf.save(path)``
(:meth:`dpp.estimators.base.PrototypeClassifier.save`) and reading :func:`dpp.load`
(:func:`dpp.estimators.io.load`).
"""

from __future__ import annotations

from pathlib import Path

from dpp.errors import ModelFileError
from dpp.estimators.io import load
from dpp.model_file import FORMAT, FORMAT_VERSION

__all__ = ["FORMAT", "FORMAT_VERSION", "ModelFileError", "load", "save"]


def save(estimator, path) -> Path:
    """Writes a fitted estimator to ``path``: ``estimator.save(path)``.

    Returns:
        The path written.

    Raises:
        sklearn.exceptions.NotFittedError: for an unfitted estimator.
    """
    return estimator.save(path)
