"""Progress of a fit, reported after it from its returned history (no state, no host callback)."""

from __future__ import annotations

import logging

import numpy as np

from dpp.solvers.settings import FitResult

logger = logging.getLogger(__name__)


def log_rounds(result: FitResult, name: str = "coordinate ascent") -> None:
    """Logs ``L``, ``beta`` and the relative change of every round of a finished fit (INFO).

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
        logger.info(
            "%s round %3d  L = %.6g  beta = %.4g  rel. change = %.3g",
            name,
            round_,
            value,
            beta[round_],
            (value - previous) / max(abs(previous), 1e-30),
        )
