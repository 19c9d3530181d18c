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
from typing import TYPE_CHECKING

import numpy as np
from jax import monitoring
from tqdm.auto import tqdm

if TYPE_CHECKING:  # the round loop imports nothing from here
    from dpp.solvers.coordinate_ascent import FitResult

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


#: JAX's monitoring event of one XLA backend compilation (with its duration).
BACKEND_COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"
#: JAX's events of the work before it: tracing a function to a jaxpr, lowering it to MLIR.
PREPARE_EVENTS = (
    "/jax/core/compile/jaxpr_trace_duration", "/jax/core/compile/jaxpr_to_mlir_module_duration",
)  # fmt: skip
#: Every event whose seconds are compiling, as a user waits for it.
COMPILE_EVENTS = (*PREPARE_EVENTS, BACKEND_COMPILE_EVENT)


def interactive() -> bool:
    """Whether stderr is a terminal a person watches (not a pipe, a file or a CI log)."""
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):  # a replaced or closed stream
        return False


class CompileAwareBar(tqdm):
    """A tqdm bar whose rate and ETA leave out the seconds XLA spent compiling.

    A cold selection compiles for most of its first fits; a rate taken over them promises a
    wait many times the real one (an ETA of 24 min for a 70 s selection). Here the rate is
    the fits done over the seconds *not* spent compiling while the bar was open (JAX's tracing,
    lowering and backend-compile events, :data:`COMPILE_EVENTS`), and the bar says how long it
    has compiled.
    """

    def __init__(self, *args, **kwargs):
        self.compile_seconds = 0.0
        self._listening = False
        super().__init__(*args, smoothing=0, **kwargs)
        if not self.disable:
            monitoring.register_event_duration_secs_listener(self._on_duration)
            self._listening = True

    def _on_duration(self, event: str, duration: float, **_) -> None:
        if event in COMPILE_EVENTS:
            self.compile_seconds += duration
            self.set_postfix_str(f"compiled {self.compile_seconds:.0f} s", refresh=False)

    @property
    def format_dict(self):
        """Tqdm's fields, the rate over the seconds not spent compiling (where some fit is done)."""
        info = super().format_dict
        working = info["elapsed"] - self.compile_seconds
        if info["n"] and working > 0:
            info["rate"] = info["n"] / working
        return info

    def close(self):
        """Closes the bar and stops listening to JAX's compile events."""
        if self._listening:  # once, however often tqdm closes (its __del__ closes too)
            self._listening = False
            monitoring.unregister_event_duration_listener(self._on_duration)
        super().close()


def bar(total: int, desc: str, enabled: bool | str, unit: str = "fit") -> tqdm:
    """A progress bar on stderr (a no-op object when not enabled); use it as a context.

    ``enabled``: ``True``, ``False``, or ``"auto"``: on where stderr is a terminal
    (:func:`interactive`), off in a pipe, a log file or a notebook's captured output. Its rate
    and ETA leave out compilation (:class:`CompileAwareBar`). Its ``total`` may grow while it
    runs (``bar.total += n; bar.refresh()``), as a model selection adds candidates past a
    grid's edge.
    """
    on = interactive() if enabled == "auto" else bool(enabled)
    return CompileAwareBar(total=total, desc=desc, disable=not on, unit=unit, leave=False,
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
