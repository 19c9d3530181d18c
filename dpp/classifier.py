"""Softmax classifier on set representations, eq. (16) of Bonilla & Robles-Kelly (2012)."""

from __future__ import annotations

import jax
from jaxtyping import Array, Float


def log_predictive(z: Float[Array, "N K"], theta: Float[Array, "K C"]) -> Float[Array, "N C"]:
    r"""Log class probabilities of the softmax classifier, eq. (16).

    .. math:: \log \sigma^i(z; \Theta) = \theta_i^T z - \log \sum_j \exp(\theta_j^T z)

    There is no separate bias: ``z`` sums to 1, so a bias is already a row added to ``Theta``.

    Args:
        z: ``[N, K]`` set representations.
        theta: ``[K, C]`` weights; column ``i`` is ``theta_i``.

    Returns:
        ``[N, C]`` log-probabilities (log-softmax, stable for large logits).
    """
    return jax.nn.log_softmax(z @ theta, axis=1)


def predict_proba(z: Float[Array, "N K"], theta: Float[Array, "K C"]) -> Float[Array, "N C"]:
    """Class probabilities ``sigma(z; Theta)`` of eq. (16); rows sum to 1.

    Args:
        z: ``[N, K]`` set representations.
        theta: ``[K, C]`` weights.

    Returns:
        ``[N, C]`` predictive distribution of each set.
    """
    return jax.nn.softmax(z @ theta, axis=1)
