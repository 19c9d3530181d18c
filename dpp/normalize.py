r"""The model's internal units: training vectors centred on their mean and scaled isotropically.

DPP is exactly invariant under ``x -> (x - c) / s`` (one scalar ``s``) with ``mu -> (mu - c) / s``
and ``beta -> beta s^2``: every squared distance is divided by ``s^2`` and every logit
``-beta ||x - mu||^2`` is unchanged. dpp therefore fits every model in units where the training
vectors have mean 0 and unit mean variance per component, and keeps ``(c, s)`` in the fitted model
so that new sets are mapped the same way before they are encoded. Features offset by ``1e6`` or
scaled by ``1e-20`` then give the same fit as centred unit-scale ones, instead of float32
cancellation in ``||x||^2 - 2 x.mu + ||mu||^2`` or squared distances that underflow to 0.

The map is computed on the host in float64 from the stored vectors, so no digit the user's data
carry is lost before the cast back to the sets' dtype.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from dpp.sets import RaggedSets


@dataclasses.dataclass(frozen=True)
class Normalizer:
    """Isotropic affine map ``x' = (x - shift) / scale`` into the model's internal units.

    Attributes:
        shift: ``[D]`` float64 centre ``c`` (the training mean), or ``None`` for the identity.
        scale: ``s > 0``, the root mean squared deviation per component (units of the features).
    """

    shift: np.ndarray | None = None
    scale: float = 1.0

    @classmethod
    def fit(cls, vectors: np.ndarray) -> Normalizer:
        """Mean and root mean squared deviation of ``[T, D]`` training vectors (float64).

        A constant feature set (zero spread) keeps ``scale = 1``; a spread that is not a finite
        positive float64 (features beyond ``1e154``) raises.

        Raises:
            ValueError: for an empty or non-finite input, or a spread that overflows.
        """
        x = np.asarray(vectors, dtype=np.float64)
        if x.ndim != 2 or x.shape[0] == 0:
            raise ValueError(f"Normalizer.fit needs a non-empty [T, D] array, got {x.shape}")
        shift = x.mean(axis=0)
        scale = float(np.sqrt(np.mean(np.square(x - shift))))
        if not np.all(np.isfinite(shift)) or not np.isfinite(scale):
            raise ValueError("feature values too large to normalise (the spread overflows float64)")
        return cls(shift=shift, scale=scale if scale > 0 else 1.0)

    @property
    def is_identity(self) -> bool:
        """Whether the map is ``x' = x``."""
        return self.shift is None and self.scale == 1.0

    def vectors(self, x: np.ndarray) -> np.ndarray:
        """``[U, D]`` vectors (or centres) in internal units, float64."""
        x = np.asarray(x, dtype=np.float64)
        if self.shift is None:
            return x / self.scale
        if x.shape[-1] != self.shift.shape[0]:
            raise ValueError(
                f"vectors have D = {x.shape[-1]} but the model was fitted on D = "
                f"{self.shift.shape[0]}"
            )
        return (x - self.shift) / self.scale

    def inverse_vectors(self, x: np.ndarray) -> np.ndarray:
        """``[K, D]`` internal-unit centres back in the units of the features, float64."""
        x = np.asarray(x, dtype=np.float64) * self.scale
        return x if self.shift is None else x + self.shift

    def sets(self, sets: RaggedSets) -> RaggedSets:
        """The sets with their vectors in internal units (same dtype, same layout)."""
        if self.is_identity:
            return sets
        return sets.with_vectors(self.vectors(np.asarray(sets.vectors)))

    def log_beta_offset(self) -> float:
        """``log beta_internal - log beta_features = 2 log s``."""
        return 2.0 * float(np.log(self.scale))


#: The identity map (models fitted on data used as given).
IDENTITY = Normalizer()
