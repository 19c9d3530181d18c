"""Evaluation metrics on predictive distributions (host-side NumPy)."""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.metrics import balanced_accuracy_score

from dpp.errors import NonFiniteResultError


def accuracy(log_probs: np.ndarray, labels: np.ndarray) -> float:
    """Fraction of sets whose predicted argmax equals the argmax of their (soft) label.

    Args:
        log_probs: ``[N, C]`` predictive log-probabilities.
        labels: ``[N, C]`` soft or one-hot labels.

    Returns:
        Accuracy in ``[0, 1]``.
    """
    return float(np.mean(np.argmax(log_probs, axis=1) == np.argmax(labels, axis=1)))


def balanced_accuracy(log_probs: np.ndarray, labels: np.ndarray) -> float:
    """Mean per-class recall over the classes present in ``labels``.

    scikit-learn's ``balanced_accuracy_score`` on the argmaxes: large classes do not dominate.

    Args:
        log_probs: ``[N, C]`` predictive log-probabilities.
        labels: ``[N, C]`` soft or one-hot labels.

    Returns:
        Balanced accuracy in ``[0, 1]``.
    """
    truth = np.argmax(labels, axis=1)
    with warnings.catch_warnings():  # predicted classes absent from the truth are not an error
        warnings.simplefilter("ignore", UserWarning)
        return float(balanced_accuracy_score(truth, np.argmax(log_probs, axis=1)))


def mean_log_likelihood(log_probs: np.ndarray, labels: np.ndarray) -> float:
    """Mean over sets of ``sum_j P~_nj log p_nj`` (eq. 17 without weights), in nats.

    Args:
        log_probs: ``[N, C]`` predictive log-probabilities.
        labels: ``[N, C]`` soft or one-hot labels.

    Returns:
        The mean test log-likelihood per set (<= 0).
    """
    return float(np.mean(np.sum(labels * log_probs, axis=1)))


def weighted_score(log_probs, labels, weights, scoring: str = "log_likelihood") -> float:
    """Weighted mean over sets of the log-likelihood per set (nats) or of the accuracy.

    What model selection compares (:class:`dpp.DPPClassifierCV`, the pooled baselines).

    Args:
        log_probs: ``[N, C]`` predictive log-probabilities.
        labels: ``[N, C]`` soft or one-hot labels.
        weights: ``[N]`` non-negative set weights (not all 0).
        scoring: ``log_likelihood`` (``sum_j P~_nj log p_nj``; ``-inf`` where a class with
            label mass has probability 0) or ``accuracy`` (argmax against the label's argmax).

    Returns:
        The weighted mean.
    """
    log_probs = np.asarray(log_probs, np.float64)
    labels = np.asarray(labels, np.float64)
    if scoring == "accuracy":
        per_set = (np.argmax(log_probs, axis=1) == np.argmax(labels, axis=1)).astype(np.float64)
    else:
        per_set = np.sum(labels * np.where(labels > 0, log_probs, 0.0), axis=1)
    return float(np.average(per_set, weights=np.asarray(weights, np.float64)))


def kl_bits(log_probs: np.ndarray, labels: np.ndarray) -> float:
    """Mean ``KL(P~_n || p_n)`` in bits, with ``0 log 0 = 0``.

    Args:
        log_probs: ``[N, C]`` predictive log-probabilities (natural log).
        labels: ``[N, C]`` empirical distributions.

    Returns:
        Mean Kullback-Leibler divergence of the empirical from the predictive distribution.
    """
    labels = np.asarray(labels, dtype=np.float64)
    present = labels > 0
    safe = np.where(present, labels, 1.0)
    kl = np.sum(
        np.where(present, labels * (np.log(safe) - np.where(present, log_probs, 0.0)), 0.0), axis=1
    )
    return float(np.mean(kl) / np.log(2.0))


def is_soft(labels: np.ndarray) -> bool:
    """Whether any label row is not one-hot."""
    labels = np.asarray(labels)
    return bool(np.any((labels > 0) & (labels < 1)))


def evaluate(log_probs: np.ndarray, labels: np.ndarray) -> dict[str, float]:
    """All metrics of a run: accuracy and test log-likelihood, plus KL in bits for soft labels.

    Args:
        log_probs: ``[N, C]`` predictive log-probabilities.
        labels: ``[N, C]`` labels of the same sets.

    Returns:
        ``{"accuracy", "balanced_accuracy", "test_log_likelihood"[, "kl_bits"]}``.

    Raises:
        NonFiniteResultError: if any row of ``log_probs`` holds NaN or inf (an accuracy counted
            on NaN rows would silently call them class 0).
    """
    log_probs = np.asarray(log_probs, dtype=np.float64)
    labels = np.asarray(labels, dtype=np.float64)
    bad = ~np.all(np.isfinite(log_probs), axis=1)
    if bad.any():
        raise NonFiniteResultError(
            f"non-finite predicted log-probabilities for {int(bad.sum())} of {bad.size} sets "
            f"(first: set {int(np.flatnonzero(bad)[0])})"
        )
    metrics = {
        "accuracy": accuracy(log_probs, labels),
        "balanced_accuracy": balanced_accuracy(log_probs, labels),
        "test_log_likelihood": mean_log_likelihood(log_probs, labels),
    }
    if is_soft(labels):
        metrics["kl_bits"] = kl_bits(log_probs, labels)
    return metrics
