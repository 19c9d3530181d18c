"""The class-prior baseline: every set gets the training proportions of the classes.

It is the softmax classifier of eq. (16) with every row of ``Theta`` equal to ``log q``: since
``z`` sums to 1, ``softmax(Theta^T z) = q`` for any set. ``q`` is the weighted mean of the
training soft labels, the maximiser of the set-level likelihood (eqs. 5, 17) among constant
predictions, so the baseline tells how much of a score the encoding actually earns.
"""

from __future__ import annotations

import numpy as np

from dpp.model import FitReport, FittedModel
from dpp.sets import RaggedSets, to_device


def fit_class_prior(train: RaggedSets, centres: np.ndarray) -> FittedModel:
    """The constant predictor ``q = sum_n w_n P~_n / sum_n w_n``.

    Args:
        train: training sets.
        centres: ``[K, D]`` any centres (the encoding does not matter; ``K = 1`` is enough).

    Returns:
        :class:`~dpp.model.FittedModel` named ``class_prior``; ``report.prior`` holds ``q``.
    """
    weights = np.asarray(train.weights, np.float64)
    q = weights @ np.asarray(train.labels, np.float64) / weights.sum()
    log_q = np.log(np.maximum(q, np.finfo(np.float32).tiny))
    theta = to_device(np.tile(log_q, (centres.shape[0], 1)), train.vectors.dtype)
    mu = to_device(centres, train.vectors.dtype)
    report = FitReport(
        "class_prior",
        "converged",
        "closed form: the weighted class frequencies",
        prior=tuple(float(p) for p in q),
    )
    return FittedModel("class_prior", mu, None, theta, np.zeros(0), report)
