r"""The softmax classifier (eq. 16) and the log-likelihood of DPP: eqs. (5), (6) and (17).

The objective maximised by every solver is

.. math::

    \mathcal{L}(\Theta, \mu, \beta) = \sum_n w_n \sum_j \tilde P_{nj}
        \log \sigma^j(z_n; \Theta) - \lambda\, \mathrm{tr}(\Theta^T \Theta)
        + \log p(\log \beta)

with ``w_n = 1`` by default (eqs. 5, 6 and 17 with the ridge of section 3.2). Solvers minimise
the equivalent ``-L / sum(w)`` so that tolerances do not depend on the number of sets.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from dpp.encoding import encode_soft, packed_log_likelihood
from dpp.pooling import MEAN, Pooling
from dpp.pytrees import dataclass_pytree, is_concrete
from dpp.sets import RaggedSets, real_sets
from dpp.sharding import ShardedSets, sharded_log_likelihood


class Params(NamedTuple):
    """DPP parameters (a pytree).

    Attributes:
        mu: ``[K, D]`` float prototypes (centres), in the units of the feature vectors.
        log_beta: ``[]`` (shared) or ``[K]`` (per prototype) float log inverse temperature;
            ``beta`` has units of 1 / squared distance.
        theta: ``[K, C]`` float softmax classifier weights.
        pooling: how a set's codes become ``z`` (:mod:`dpp.pooling`): eq. (2)'s mean by
            default; its kind is static, its parameters (the generalised mean's ``rho``) are
            leaves that the (mu, beta)-step learns with the prototypes.
    """

    mu: Float[Array, "K D"]
    log_beta: Float[Array, "*B"]
    theta: Float[Array, "K C"]
    pooling: Pooling = MEAN


@dataclass_pytree("kind")
@dataclasses.dataclass(frozen=True)
class BetaPrior:
    """Optional log-prior on the inverse temperature (section 3.2, "a similar prior for beta").

    A pytree: ``kind`` is static, ``loc`` and ``scale`` are traced (a new value does not
    recompile).

    Attributes:
        kind: ``"none"``; ``"lognormal"``: a Gaussian on ``log beta`` with ``loc``/``scale``;
            ``"gamma"``: a Gamma(shape=``loc``, rate=``scale``) prior on ``beta``, written as
            the density of ``log beta`` (including the Jacobian ``beta``).
        loc: mean of ``log beta`` (lognormal) or Gamma shape.
        scale: standard deviation of ``log beta`` (lognormal) or Gamma rate (1 / squared
            distance units).
    """

    kind: str = "none"
    loc: float = 0.0
    scale: float = 1.0

    def __post_init__(self):
        if self.kind not in ("none", "lognormal", "gamma"):
            raise ValueError(f"unknown beta prior {self.kind!r}; use none, lognormal or gamma")
        if self.kind != "none" and is_concrete(self.scale) and not self.scale > 0:
            raise ValueError("beta prior scale must be positive")
        if self.kind == "gamma" and is_concrete(self.loc) and not self.loc > 0:
            raise ValueError("gamma prior shape (loc) must be positive")

    def in_internal_units(self, log_offset: float) -> BetaPrior:
        """The same prior on ``beta_internal = beta * exp(log_offset)`` (see :mod:`dpp.units`).

        A lognormal prior shifts its ``loc`` by ``log_offset``; a Gamma prior divides its rate by
        ``exp(log_offset)``. ``log_offset = 0`` returns the prior unchanged.
        """
        if self.kind == "none" or log_offset == 0.0:
            return self
        if self.kind == "lognormal":
            return dataclasses.replace(self, loc=self.loc + log_offset)
        return dataclasses.replace(self, scale=self.scale * float(np.exp(-log_offset)))

    def log_density(self, log_beta: Float[Array, "*B"]) -> Float[Array, ""]:
        """Unnormalised log-prior summed over the entries of ``log_beta`` (0 for ``none``)."""
        if self.kind == "none":
            return jnp.zeros((), dtype=log_beta.dtype)
        if self.kind == "lognormal":
            return -0.5 * jnp.sum(((log_beta - self.loc) / self.scale) ** 2)
        return jnp.sum(self.loc * log_beta - self.scale * jnp.exp(log_beta))


#: The default: no prior on beta.
NO_PRIOR = BetaPrior()


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


def set_log_likelihood(
    z: Float[Array, "N K"], theta: Float[Array, "K C"], labels: Float[Array, "N C"]
) -> Float[Array, " N"]:
    r"""Local log-likelihood terms with soft labels, eq. (17).

    .. math:: \mathcal{L}^n = \sum_j \tilde P(y^n = j) \log \sigma^j(z^n; \Theta)

    Args:
        z: ``[N, K]`` set representations.
        theta: ``[K, C]`` classifier weights.
        labels: ``[N, C]`` soft labels.

    Returns:
        ``[N]`` log-likelihood of each set (nats, <= 0).
    """
    return jnp.sum(labels * log_predictive(z, theta), axis=1)


def classifier_objective(
    theta: Float[Array, "K C"],
    z: Float[Array, "N K"],
    labels: Float[Array, "N C"],
    weights: Float[Array, " N"],
    l2: float,
) -> Float[Array, ""]:
    """Objective of the Theta-step, eq. (5) with the ridge: ``L`` for fixed codes ``z``.

    Args:
        theta: ``[K, C]`` weights.
        z: ``[N, K]`` fixed set representations.
        labels: ``[N, C]`` soft labels.
        weights: ``[N]`` per-set weights.
        l2: ridge ``lambda`` >= 0 on ``tr(Theta^T Theta)``.

    Returns:
        Scalar ``sum_n w_n L^n - lambda ||Theta||_F^2``.
    """
    return jnp.sum(weights * set_log_likelihood(z, theta, labels)) - l2 * jnp.sum(theta * theta)


def objective(
    params: Params, sets: RaggedSets, l2: float, prior: BetaPrior = NO_PRIOR
) -> Float[Array, ""]:
    """The penalised log-likelihood ``L`` of eqs. (5), (6), (17) that learning maximises.

    Args:
        params: prototypes, log inverse temperature and classifier weights.
        sets: ``N`` training sets with soft labels and weights, or the same sets split across
            devices (:class:`dpp.sharding.ShardedSets`).
        l2: ridge ``lambda`` >= 0.
        prior: optional prior on ``log beta``.

    Returns:
        Scalar ``L`` (nats).
    """
    penalty = l2 * jnp.sum(params.theta * params.theta) - prior.log_density(params.log_beta)
    if isinstance(sets, ShardedSets):  # each device's sets, then a cross-device sum
        return sharded_log_likelihood(params, sets) - penalty
    if sets.packing is not None:  # one pass for value and gradient
        return packed_log_likelihood(sets, *params) - penalty
    z = encode_soft(sets, params.mu, params.log_beta, params.pooling)
    return jnp.sum(sets.weights * set_log_likelihood(z, params.theta, sets.labels)) - penalty


def mean_log_likelihood(
    params: Params, sets: RaggedSets, weighted: bool = False
) -> Float[Array, ""]:
    """Unpenalised mean log-likelihood per set (the "test log-likelihood").

    Padding sets (:meth:`~dpp.sets.RaggedSets.padded`) are left out of the mean.

    Args:
        params: fitted parameters.
        sets: evaluation sets.
        weighted: weight each set by ``sets.weights`` (the held-out score of a model selection
            or early stopping, as :func:`dpp.metrics.weighted_score`); the default is the
            plain mean over the real sets.

    Returns:
        Scalar mean over the real sets of eq. (17), in nats (weighted by ``sets.weights`` if
        ``weighted``; unit weights give the plain mean).
    """
    z = encode_soft(sets, params.mu, params.log_beta, params.pooling)
    real = real_sets(sets)
    weights = jnp.where(real, sets.weights if weighted else 1.0, 0.0)
    per_set = jnp.where(real, set_log_likelihood(z, params.theta, sets.labels), 0.0)
    return jnp.sum(weights * per_set) / jnp.sum(weights)
