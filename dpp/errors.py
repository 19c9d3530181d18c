"""Errors a user can act on; the command line prints their message alone, without a traceback.

* :class:`ConfigError`: a config value is invalid (raised before any data is read).
* :class:`DataError`: a data file is corrupt or holds unknown values (names the file and line).
* :class:`NonFiniteResultError`: a fit or an evaluation produced NaN or inf (names the method and
  the trial); the run ends with status ``failed``.
* :class:`ModelFileError`: a saved model file is not a dpp model, is damaged, or is from a newer
  format version.
* :class:`RunInterrupted`: SIGTERM or SIGINT stopped the run; it ends with status
  ``interrupted``.

and one warning category, :class:`FitWarning`: a fit ended with a status that is not clean.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import warnings

from sklearn.exceptions import ConvergenceWarning

_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep


class ConfigError(ValueError):
    """A config value is invalid; the message names the key, the rule and the value."""


class DataError(ValueError):
    """A data file is corrupt or holds values the loader does not know."""


class ModelFileError(ValueError):
    """A model file that cannot be read: not a dpp model, damaged, or from a newer format."""


class NonFiniteResultError(RuntimeError):
    """A fit or a metric is NaN or infinite."""


class FitWarning(ConvergenceWarning):
    """A fit whose status is not clean (``saturated``, ``max_rounds``, ``stalled``).

    A subclass of scikit-learn's ``ConvergenceWarning``, so ``warnings`` filters, pytest and
    scikit-learn's model selection see it; the message names the estimator and its parameters
    (which candidate of a search it came from), the status and the reason. The fitted estimator
    keeps the status in ``fit_report_``.
    """


def warn_caller(message: str, category: type[Warning] = None) -> None:
    """Issues a warning attributed to the first caller outside the dpp package.

    ``warnings.warn`` with a fixed ``stacklevel`` points at whichever dpp frame happens to be
    that many calls up (a ``FitWarning`` used to name ``dpp/estimators/dpp.py:193``); this one
    names the user's line (or scikit-learn's, inside ``GridSearchCV``), whatever the depth.

    Args:
        message: the warning's text.
        category: the warning class (default :class:`FitWarning`).
    """
    location = _this_thread("location")
    if location is not None:  # a worker thread of a call made at ``location``
        filename, lineno, module_globals = location
        warnings.warn_explicit(
            message,
            category or FitWarning,
            filename,
            lineno,
            module=module_globals.get("__name__"),
            registry=module_globals.setdefault("__warningregistry__", {}),
            module_globals=module_globals,
        )
        return
    frame, level = sys._getframe(1), 2  # level 1 is this function, 2 its caller
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category or FitWarning, stacklevel=level)


#: This thread's ``location`` (:func:`warnings_attributed_to`) and ``recording``
#: (:func:`statuses_recorded`).
_THREAD = threading.local()
_THREAD_DEFAULTS = {"location": None, "recording": False}


def caller_location() -> tuple[str, int, dict] | None:
    """``(filename, line, module globals)`` of the first caller outside the dpp package."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame = frame.f_back
    return None if frame is None else (frame.f_code.co_filename, frame.f_lineno, frame.f_globals)


def _this_thread(name: str):
    """This thread's ``name`` (``location`` or ``recording``), or its default."""
    return getattr(_THREAD, name, _THREAD_DEFAULTS[name])


@contextlib.contextmanager
def _in_this_thread(name: str, value):
    """Sets this thread's ``name`` (``location`` or ``recording``) to ``value`` within."""
    previous = _this_thread(name)
    setattr(_THREAD, name, value)
    try:
        yield
    finally:
        setattr(_THREAD, name, previous)


def warnings_attributed_to(location: tuple[str, int, dict] | None):
    """In this thread, :func:`warn_caller` names ``location`` (a worker's caller's line).

    A worker thread's stack holds no line of the user's; the thread that started the work
    takes :func:`caller_location` and each worker runs inside this context.
    """
    return _in_this_thread("location", location)


def statuses_recorded():
    """In this thread, a fit that does not end clean issues no :class:`FitWarning`.

    For the fits of a search whose caller records each fit's status and warns about what it
    returns (:class:`dpp.DPPClassifierCV`: a candidate's fold fits are rows of
    ``cv_results_``, the chosen candidate's and the refit's statuses its own warnings). Nests.
    """
    return _in_this_thread("recording", True)


def recording_statuses() -> bool:
    """Whether this thread runs inside :func:`statuses_recorded`."""
    return _this_thread("recording")


class RunInterrupted(BaseException):
    """The run received SIGTERM or SIGINT (a ``BaseException``, like ``KeyboardInterrupt``)."""

    def __init__(self, signal_name: str):
        super().__init__(f"interrupted by {signal_name}")
        self.signal_name = signal_name


#: Errors whose message is the whole story for a command-line user.
USER_ERRORS = (ConfigError, DataError, ModelFileError, FileNotFoundError)
