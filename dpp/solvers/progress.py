"""Progress of a fit: what ``verbose=True`` shows, and the round log read from a fit's history.

A fit's progress goes to the ``dpp`` loggers at INFO, so the command line's log files keep it.
In a session where nobody configured logging (a script, a notebook), INFO records go nowhere:
there :func:`say` prints the line to stderr instead (through tqdm, so it does not break a
bar), and :func:`bar` draws a tqdm progress bar (``tqdm.auto``: a widget in a notebook). The
round log (:func:`log_rounds`) is read from a fit's returned history: no state, no host
callback.
"""

from __future__ import annotations

import logging
import sys

import numpy as np
from tqdm.auto import tqdm

from dpp.solvers.settings import FitResult

logger = logging.getLogger(__name__)


def _configured(logger: logging.Logger) -> bool:
    """Whether an INFO record of ``logger`` reaches a handler someone configured."""
    return logger.isEnabledFor(logging.INFO) and logger.hasHandlers()


def say(logger: logging.Logger, message: str, *args) -> None:
    """One progress line: logged at INFO, or printed to stderr where logging is not set up.

    Args:
        logger: the module's logger.
        message: a ``%``-format string.
        *args: its arguments.
    """
    if _configured(logger):
        logger.info(message, *args)
    else:
        tqdm.write(message % args if args else message, file=sys.stderr)


def bar(total: int, desc: str, enabled: bool, unit: str = "fit") -> tqdm:
    """A progress bar on stderr (a no-op object when not ``enabled``); use it as a context.

    Its ``total`` may grow while it runs (``bar.total += n; bar.refresh()``), as a model
    selection adds candidates past a grid's edge.
    """
    return tqdm(total=total, desc=desc, disable=not enabled, unit=unit, leave=False,
                file=sys.stderr, dynamic_ncols=True)  # fmt: skip


def log_rounds(result: FitResult, name: str = "coordinate ascent") -> None:
    """Logs ``L``, ``beta`` and the relative change of every round of a finished fit (INFO).

    Printed to stderr where logging is not configured (:func:`say`).

    The round log of a verbose fit, read from the returned history after the fit: a host
    callback inside the round loop would put a pointer into the compiled program, which then
    cannot be stored in JAX's persistent compilation cache, and would make verbose and quiet
    fits two programs.

    Args:
        result: a fit's :class:`FitResult`.
        name: the learner named in each line.
    """
    history = np.asarray(result.history, np.float64)
    beta = np.exp(np.asarray(result.diagnostics.log_beta, np.float64))
    for round_ in range(1, int(result.num_rounds) + 1):
        previous, value = history[round_ - 1], history[round_]
        say(
            logger,
            "%s round %3d  L = %.6g  beta = %.4g  rel. change = %.3g",
            name,
            round_,
            value,
            beta[round_],
            (value - previous) / max(abs(previous), 1e-30),
        )
