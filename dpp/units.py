r"""Units: the two affine maps a vector goes through before it is encoded.

1. **Preprocessing** (:class:`Affine`): standardisation and/or PCA, fitted on training vectors
   (scikit-learn ``StandardScaler`` and ``PCA``) and folded into one map
   ``x' = (x - shift) @ matrix``. An estimator fits its own from ``standardize`` and
   ``pca_components``, or takes one prefit (``preprocess=``; the command line fits it once per
   trial and hands it to the methods that could not fit the same map themselves: see
   :func:`dpp.experiment.protocol._prepared`).
2. **Internal units** (:class:`Normalizer`): the preprocessed training vectors centred on their
   mean and scaled isotropically. DPP is exactly invariant under ``x -> (x - c) / s`` (one
   scalar ``s``) with ``mu -> (mu - c) / s`` and ``beta -> beta s^2``: every squared distance
   is divided by ``s^2`` and every logit ``-beta ||x - mu||^2`` is unchanged. dpp therefore
   fits every model in units where the training vectors have mean 0 and unit mean variance per
   component, and keeps ``(c, s)`` in the fitted model so that new sets are mapped the same way
   before they are encoded. Features offset by ``1e6`` or scaled by ``1e-20`` then give the
   same fit as centred unit-scale ones, instead of float32 cancellation in
   ``||x||^2 - 2 x.mu + ||mu||^2`` or squared distances that underflow to 0.

Both maps are computed on the host in float64 from the stored vectors, so no digit the user's
data carry is lost before the cast back to the sets' dtype.
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import threading

import numpy as np
from sklearn.decomposition import PCA
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

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
        return cls._centred(np.array(vectors, dtype=np.float64))

    @classmethod
    def fit_sets(cls, sets: RaggedSets) -> tuple[Normalizer, RaggedSets]:
        """``(normalizer, sets in its units)``: :meth:`fit` and :meth:`sets` in one float64 copy.

        The same values as ``Normalizer.fit(v)`` then ``.sets(sets)`` (the same operations in
        the same order, on one array mapped in place): what a fit of large sets needs once.

        Raises:
            ValueError: as :meth:`fit`.
        """
        x = np.array(sets.vectors, dtype=np.float64)
        normalizer = cls._centred(x)
        return normalizer, sets.with_vectors(np.divide(x, normalizer.scale, out=x))

    @classmethod
    def _centred(cls, x: np.ndarray) -> Normalizer:
        """The map fitted on a private float64 copy ``x``, which is left centred (``x - shift``)."""
        if x.ndim != 2 or x.shape[0] == 0:
            raise ValueError(f"Normalizer.fit needs a non-empty [T, D] array, got {x.shape}")
        shift = x.mean(axis=0)
        scale = float(np.sqrt(np.mean(np.square(np.subtract(x, shift, out=x)))))
        if not np.all(np.isfinite(shift)) or not np.isfinite(scale):
            raise ValueError("feature values too large to normalise (the spread overflows float64)")
        return cls(shift=shift, scale=scale if scale > 0 else 1.0)

    @property
    def is_identity(self) -> bool:
        """Whether the map is ``x' = x``."""
        return self.shift is None and self.scale == 1.0

    def vectors(self, x: np.ndarray) -> np.ndarray:
        """``[U, D]`` vectors (or centres) in internal units, float64."""
        x = np.array(x, dtype=np.float64)  # a private copy, mapped in place (the same values)
        if self.shift is None:
            return np.divide(x, self.scale, out=x)
        if x.shape[-1] != self.shift.shape[0]:
            raise ValueError(
                f"vectors have D = {x.shape[-1]} but the model was fitted on D = "
                f"{self.shift.shape[0]}"
            )
        return np.divide(np.subtract(x, self.shift, out=x), self.scale, out=x)

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


#: Pseudo-inverses computed lately, by the digest of their matrix (:func:`pseudo_inverse`).
_PSEUDO_INVERSES: collections.OrderedDict = collections.OrderedDict()
_PSEUDO_INVERSES_LOCK = threading.Lock()  # a selection's fits may run in threads
PSEUDO_INVERSES_KEPT = 8


def pseudo_inverse(matrix: np.ndarray) -> np.ndarray:
    """``[D', D]`` float64 ``np.linalg.pinv(matrix)`` of a ``[D, D']`` map, read-only.

    Each distinct matrix's is computed once among the last :data:`PSEUDO_INVERSES_KEPT`. An SVD
    costs ``O(D^3)``, minutes at thousands of features, and a selection's candidates on one
    fold fit the same map: with PCA after standardisation, each fit's shift (:meth:`Affine.fit`)
    needs it, as ``prototypes_`` does when read. Equal matrices (the same bytes) give the same
    array, so the values are those of the plain call. What is kept is bounded by the count:
    ``8 D^2`` float64 at most (2.2 GB at D = 5,863).

    Raises:
        numpy.linalg.LinAlgError: the SVD does not converge (a matrix that is not finite).
    """
    matrix = np.ascontiguousarray(matrix, np.float64)
    key = (matrix.shape, hashlib.blake2b(matrix.data, digest_size=16).digest())
    with _PSEUDO_INVERSES_LOCK:
        found = _PSEUDO_INVERSES.get(key)
        if found is not None:
            _PSEUDO_INVERSES.move_to_end(key)
            return found
    found = np.linalg.pinv(matrix)
    found.setflags(write=False)
    with _PSEUDO_INVERSES_LOCK:
        _PSEUDO_INVERSES[key] = found
        while len(_PSEUDO_INVERSES) > PSEUDO_INVERSES_KEPT:
            _PSEUDO_INVERSES.popitem(last=False)
    return found


@dataclasses.dataclass(frozen=True)
class Affine:
    """Fitted preprocessing as one affine map ``x' = (x - shift) @ matrix``.

    Attributes:
        shift: ``[D]`` float64.
        matrix: ``[D, D']`` float64 (diagonal scaling for standardisation, times the principal
            axes for PCA).
    """

    shift: np.ndarray
    matrix: np.ndarray

    @classmethod
    def fit(cls, vectors: np.ndarray, standardize: bool, pca_components: int | None):
        """StandardScaler and/or PCA (scikit-learn) fitted on ``[T, D]`` vectors, or ``None``.

        Raises:
            ValueError: if ``pca_components`` exceeds ``D``.
        """
        x = np.asarray(vectors, np.float64)
        if not standardize and not pca_components:
            return None
        # alone, the scaler is only fitted: it reads the vectors and never writes them, so it
        # needs no copy of [T, D] (before a PCA the pipeline transforms them: a copy then)
        steps = [StandardScaler(copy=bool(pca_components))] if standardize else []
        if pca_components:
            if pca_components > x.shape[1]:
                raise ValueError(f"pca_components = {pca_components} exceeds D = {x.shape[1]}")
            steps.append(PCA(n_components=pca_components, random_state=0))
        shift, matrix = None, None
        for step in make_pipeline(*steps).fit(x).named_steps.values():
            if isinstance(step, StandardScaler):
                step_shift, step_matrix = step.mean_, np.diag(1.0 / step.scale_)
            else:
                step_shift, step_matrix = step.mean_, step.components_.T
            if shift is None:
                shift, matrix = step_shift, step_matrix
            else:  # ((x - a) A - b) B = (x - (a + b A^+)) A B
                shift = shift + step_shift @ pseudo_inverse(matrix)
                matrix = matrix @ step_matrix
        return cls(np.asarray(shift, np.float64), np.asarray(matrix, np.float64))

    @staticmethod
    def prefit(preprocess, dim: int, standardize=None, pca_components=None) -> Affine:
        """Checks a prefit map handed to an estimator (its ``preprocess`` parameter).

        Args:
            preprocess: the map (an :class:`Affine`).
            dim: ``D`` of the vectors it will be applied to.
            standardize: the estimator's own setting, which with ``pca_components`` must
                describe the map (it stands for them in a saved model file): one of them set;
                ``None`` for an estimator without them.
            pca_components: the estimator's own setting; if set, the map's output dimension.

        Returns:
            ``preprocess``.

        Raises:
            ValueError: not an :class:`Affine`, an input dimension other than ``dim``, or
                settings that do not describe it.
        """
        if not isinstance(preprocess, Affine):
            raise ValueError(
                "preprocess must be a prefit dpp.units.Affine (Affine.fit(vectors, standardize, "
                f"pca_components)) or None, got {type(preprocess).__name__}"
            )
        if preprocess.matrix.ndim != 2 or preprocess.matrix.shape[0] != dim:
            raise ValueError(
                f"preprocess maps D = {preprocess.matrix.shape[0]} features but the sets have "
                f"D = {dim}"
            )
        out = preprocess.matrix.shape[1]
        if standardize is not None and not standardize and pca_components is None:
            raise ValueError(
                "preprocess is given but standardize=False and pca_components=None; set the "
                "settings the map was fitted with"
            )
        if pca_components is not None and pca_components != out:
            raise ValueError(f"preprocess projects on {out} components, not {pca_components}")
        return preprocess

    def __call__(self, x: np.ndarray) -> np.ndarray:
        """``[U, D']`` preprocessed vectors, float64."""
        x = np.array(x, np.float64)  # a private copy, shifted and scaled in place
        np.subtract(x, self.shift, out=x)
        m = self.matrix
        # diagonal: every nonzero entry on the diagonal (counted in place: no [D, D] temporary)
        if m.shape[0] == m.shape[1] and np.count_nonzero(m) == np.count_nonzero(np.diagonal(m)):
            # standardisation: x @ diag(d) is x * d, each value exactly (the other terms are 0)
            return np.multiply(x, np.diag(m), out=x)
        return x @ m

    def inverse(self, x: np.ndarray) -> np.ndarray:
        """Back to the input units (the least-squares inverse; exact without PCA)."""
        return np.asarray(x, np.float64) @ pseudo_inverse(self.matrix) + self.shift

    def sets(self, sets: RaggedSets) -> RaggedSets:
        """The sets with their vectors mapped (same dtype, same layout)."""
        return sets.with_vectors(self(np.asarray(sets.vectors)))
