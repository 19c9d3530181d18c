"""Prototype functions and set pooling: eqs. (1), (2) and (3) of Bonilla & Robles-Kelly (2012).

Every set representation in dpp goes through :func:`pool`, so a faster or leaner encoder replaces
one function. Units: ``beta`` is an inverse squared distance in the units of the feature vectors;
it is parameterised as ``beta = exp(log_beta)``, either shared (``log_beta`` of shape ``[]``) or
one per prototype (shape ``[K]``).

Two modules: :mod:`dpp.encoding.codes` (eqs. 1-3, pooling, the encoders) and
:mod:`dpp.encoding.packed` (the fused likelihood over packed blocks of sets); their public names
are imported here.
"""

from dpp.encoding.codes import (
    LOG_BETA_MAX,
    encode_hard,
    encode_soft,
    hard_assignment,
    max_codes,
    membership_codes,
    membership_shares,
    pool,
    set_counts,
    soft_assignment,
    squared_distances,
)
from dpp.encoding.packed import packed_log_likelihood

__all__ = [
    "LOG_BETA_MAX",
    "encode_hard",
    "encode_soft",
    "hard_assignment",
    "max_codes",
    "membership_codes",
    "membership_shares",
    "pool",
    "set_counts",
    "soft_assignment",
    "squared_distances",
    "packed_log_likelihood",
]
