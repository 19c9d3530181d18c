"""The standard prototype baseline of section 4.2.

K-means centres, eq. (1) hard codes, eq. (2) pooling and the same softmax classifier (eq. 16) and
Theta-step as DPP: the only difference from DPP is how the prototypes are learned.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from dpp.likelihood import classifier_objective
from dpp.model import FitReport, FittedModel
from dpp.sets import RaggedSets
from dpp.solvers.coordinate_ascent import fit_classifier
from dpp.solvers.lbfgs import LBFGSSettings
from dpp.units import Normalizer

_objective = jax.jit(classifier_objective)  # one compiled program, not dozens of eager ops


def theta_step_status(iterations: int, max_iter: int) -> dict:
    """``{status, reason}`` of a fit whose one iterative part is a Theta-step (convex).

    ``converged`` when the solver met its gradient tolerance, ``max_rounds`` when it stopped at
    its ``max_iter`` first (the statuses of :data:`dpp.model.STATUSES`).
    """
    if iterations >= max_iter:
        return {"status": "max_rounds", "reason": (
            f"the Theta-step stopped at max_iter = {max_iter} iterations before its gradient "
            "tolerance (optimizer_options theta_max_iter)"
        )}  # fmt: skip
    return {"status": "converged", "reason": (
        f"the Theta-step (convex) met its gradient tolerance in {iterations} iterations"
    )}  # fmt: skip


def hard_code_model(train: RaggedSets, centres: np.ndarray, method: str) -> FittedModel:
    """The untrained model that codes sets by eq. (1) nearest centres pooled by eq. (2).

    The nearest centres are found in the internal units of :mod:`dpp.units` (the same
    nearest centres, without float32 cancellation for offset features); ``Theta = 0``.

    Args:
        train: the training sets (their vectors fit the internal units; ``C`` from labels).
        centres: ``[K, D]`` centres in the units of ``train``.
        method: name recorded in the model.

    Returns:
        A :class:`~dpp.model.FittedModel` with the hard encoder (``log_beta = None``);
        ``encode`` gives ``[N, K]`` histograms of nearest centres.

    Raises:
        ValueError: for centres of the wrong dimension.
    """
    if centres.ndim != 2 or centres.shape[1] != train.dim:
        raise ValueError(f"centres must be [K, {train.dim}], got {centres.shape}")
    normalizer = Normalizer.fit(np.asarray(train.vectors))
    mu = jnp.asarray(normalizer.vectors(centres), dtype=train.vectors.dtype)
    theta0 = jnp.zeros((mu.shape[0], train.num_classes), dtype=mu.dtype)
    return FittedModel(method, mu, None, theta0, np.zeros(0), FitReport(method), normalizer)


def fit_standard(
    train: RaggedSets,
    centres: np.ndarray,
    l2: float,
    solver: LBFGSSettings,
    method: str = "standard",
) -> FittedModel:
    """Fits the softmax classifier on bag-of-words histograms of fixed centres.

    Args:
        train: ``N`` training sets.
        centres: ``[K, D]`` centres (k-means for the standard prototype, InfoLoss's learned ones).
        l2: ridge ``lambda`` of the Theta-step (the same as DPP's).
        solver: full-batch solver of the Theta-step.
        method: name recorded in the returned model.

    The nearest centres are found in the internal units of :mod:`dpp.units` (the same
    nearest centres, without float32 cancellation for offset features).

    Returns:
        A :class:`~dpp.model.FittedModel` with the hard encoder (``log_beta = None``);
        ``history`` holds ``L`` before (``Theta = 0``) and after the Theta-step.

    Raises:
        ValueError: for centres of the wrong dimension.
    """
    untrained = hard_code_model(train, centres, method)
    theta0 = untrained.theta
    z = untrained.encode(train)
    theta, iterations = fit_classifier(
        z, train.labels, train.weights, theta0, l2, solver, with_iterations=True
    )
    history = np.array(
        [float(_objective(t, z, train.labels, train.weights, l2)) for t in (theta0, theta)]
    )
    report = dataclasses.replace(
        untrained.report,
        history=tuple(float(h) for h in history),
        rounds=1,
        **theta_step_status(iterations, solver.max_iter),
    )
    return dataclasses.replace(untrained, theta=theta, history=history, report=report)
