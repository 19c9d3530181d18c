"""Ragged batches of sets in the flat layout of the spec.

A dataset is ``N`` sets; set ``n`` holds ``M_n >= 1`` feature vectors in ``R^D`` and a soft label
in the simplex over ``C`` classes. The vectors of all sets are stored back to back (no padding):

* ``vectors``  ``[U, D]`` float: the feature vectors. In the disjoint layout ``U = T``.
* ``set_ids``  ``[T]`` int32, sorted ascending, values ``0..N-1``: the set of each membership.
* ``members``  ``[T]`` int32 or ``None``: index into ``vectors`` of each membership. ``None``
  means the disjoint layout (``members = arange(T)``). Overlapping sets, such as the 7 x 7
  windows of a hyperspectral image, store each distinct vector once in ``vectors`` (the pool)
  and point at it from every set that holds it, so that the soft assignment is computed once
  per distinct vector.
* ``labels``   ``[N, C]`` float: soft labels, rows on the simplex (a hard label is one-hot), or
  ``None`` for sets to predict on (encoding and prediction never read the labels).
* ``weights``  ``[N]`` float: per-set weights of the likelihood (ones by default).

``num_sets`` (``N``) is static pytree metadata, so that ``jax.ops.segment_sum`` gets a static
``num_segments`` under ``jit``.

Every new ``N``, ``T`` or ``U`` is a new shape, and a new shape compiles a new program. The jit
boundaries of dpp therefore see :meth:`RaggedSets.bucketed` sets: padded to a power of two of
sets (:func:`sets_bucket`) and to the sizes of :func:`bucket_size` (steps of at most 1.25x) or
whole packed blocks of vectors, with *padding sets* (no vectors, zero label, zero weight) and
*padding memberships* (set id ``N``, which ``segment_sum`` drops), so a
cross-validation or a multi-trial experiment compiles a handful of programs, not one per fit.
Padding changes no value or gradient: a padding set has weight 0 and an empty segment, and
:func:`real_sets` tells it apart from the real ones (every real set has a vector).

The module's first part is these padding rules (:func:`sets_bucket`, :func:`bucket_size`,
:func:`pack` and :class:`Packing` for whole packed blocks of vectors, :class:`Layout` for the
shapes that several fits share, :func:`to_device`); :mod:`dpp.sharding` packs each device's
share with :func:`pack`.

Validation happens in the constructors (:meth:`RaggedSets.from_list`, :meth:`RaggedSets.from_flat`,
:meth:`RaggedSets.from_lengths`, :meth:`RaggedSets.from_offsets`) on host arrays, never on traced
values.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

from dpp.pytrees import dataclass_pytree

# ---- Padding rules: how ragged sets are bucketed, padded and packed for jit ----------------------

#: Vectors (or memberships) processed together by the blocked encoders: large enough to keep
#: both cores busy, small enough for a block's ``BLOCK_SIZE x K`` codes to stay in cache
#: (2048 was fastest at the MPEG-7 size in ``benchmarks/bench.py``).
BLOCK_SIZE = 2048
#: Largest set (vectors) for which :meth:`RaggedSets.bucketed` packs whole sets into blocks for
#: the one-pass likelihood gradient; with a larger set the two-pass gradient is used.
MAX_PACKED_SET = 16 * BLOCK_SIZE
#: Smallest bucket of :func:`bucket_size`.
MIN_BUCKET = 8
#: Above this, bucket sizes of memberships and vectors are also multiples of it (the block of the
#: blocked encoders, :data:`BLOCK_SIZE`, which pads to it anyway).
BUCKET_ALIGN = BLOCK_SIZE


def bucket_size(n: int, align: int = 1) -> int:
    """The padded size for ``n`` items: the smallest ``m * 2**e >= n`` with ``m`` in 4..7.

    The sizes run 8, 10, 12, 14, 16, 20, 24, 28, 32, 40, ... (steps of at most 1.25x, so padding
    costs at most 25 % more work), at least :data:`MIN_BUCKET`. With ``align > 1`` a size above
    ``align`` is a whole number of ``align`` blocks, the number of blocks itself on the same grid
    (1, 2, ..., 8, 10, 12, 14, 16, 20, ...).

    Args:
        n: number of items (>= 0).
        align: block size for large ``n``.

    Returns:
        The bucket size (int >= n).
    """
    n = int(n)
    if align > 1 and n > align:
        return align * _geometric(-(-n // align))
    return _geometric(max(n, MIN_BUCKET))


def _geometric(n: int) -> int:
    """Smallest ``m * 2**e >= n`` with ``m`` in 4..7 (any ``n`` <= 8 is itself)."""
    exponent = max(n.bit_length() - 3, 0)  # n < 8 * 2**exponent
    return -(-n // 2**exponent) * 2**exponent


def power_of_two(n: int) -> int:
    """The least power of two at or above ``n`` (1 for ``n <= 1``)."""
    return 1 << max(int(n) - 1, 0).bit_length()


def sets_bucket(n: int) -> int:
    """The padded number of sets: the power of two at or above ``n`` (at least 8).

    Coarser than :func:`bucket_size`, because padding sets cost almost nothing: they hold no
    vector (the encoders never visit them), and only the ``N x K`` codes and the Theta-step's
    ``N x K x C`` products grow. A cross-validation's folds and its final refit on all sets then
    usually share one ``N``.
    """
    return power_of_two(max(int(n), MIN_BUCKET))


def block_length(largest: int, total: int, block_size: int) -> int:
    """Memberships per packed block ``B``: ``max(block_size, bucket of the largest set)``.

    When everything fits in one block, the power of two at or above ``total`` instead, so that
    folds of similar sizes share it.

    Args:
        largest: vectors of the largest set.
        total: vectors of all sets (``T``).
        block_size: the preferred block length.
    """
    block = max(block_size, bucket_size(int(largest)))
    return block if total > block else max(power_of_two(total), MIN_BUCKET)


class Layout(NamedTuple):
    """The least shapes :meth:`RaggedSets.bucketed` pads to (0: no floor).

    Fits on different sets share one compiled program only when their bucketed shapes agree:
    the folds of a selection and its refit, the early-stopping fit and its refit, the trials of
    an experiment. Padding blocks and memberships change no bit of any result (padding blocks
    are skipped, padding memberships dropped), so :meth:`covering` raises them to a bound that
    holds for any order of any subset. ``N``, ``B`` and the sets per block ``S`` set the length
    of sums, and so the rounding of their floats: they are raised only to what given orders of
    the sets need (:meth:`of_orders`), never beyond, so a fit gives the same bits with and
    without a floor whenever its own sets need as much (the refits of the paper's experiments
    do: ``python benchmarks/bench.py --table1`` gives the same table).

    Attributes:
        num_sets: padded ``N`` at least.
        block: memberships per packed block ``B`` at least.
        blocks: packed blocks at least.
        slots: sets per packed block ``S`` at least.
        memberships: padded ``T`` at least (sets that are not packed).
    """

    num_sets: int = 0
    block: int = 0
    blocks: int = 0
    slots: int = 0
    memberships: int = 0

    @classmethod
    def covering(
        cls, sizes: np.ndarray, num_sets: int | None = None, block_size: int = BUCKET_ALIGN
    ) -> Layout:
        """Blocks and memberships enough for any ``num_sets`` of the sets of ``sizes``.

        ``T`` is at most the sum of the ``num_sets`` largest sizes. The packing puts
        consecutive sets into a block while they fit (next fit), so two blocks in a row hold
        more than ``B`` memberships: at most ``2 ceil(T / B) + 1`` blocks in any order, rounded
        to a power of two as :func:`pack` rounds them. A generous bound costs memory
        (``blocks x B x D`` floats), not time. ``N`` is :func:`sets_bucket` of ``num_sets``;
        ``B`` and ``S`` are left to the sets (0).

        Args:
            sizes: ``[M]`` vectors of each set a fit may hold (e.g. every set of a dataset).
            num_sets: the most sets one fit holds (default ``M``).
            block_size: as :meth:`RaggedSets.bucketed`.

        Returns:
            The :class:`Layout`.
        """
        sizes = np.sort(np.asarray(sizes, np.int64))
        count = sizes.size if num_sets is None else min(int(num_sets), sizes.size)
        total = int(sizes[sizes.size - count :].sum())
        block = block_length(int(sizes[-1]), total, block_size)
        return cls(
            num_sets=sets_bucket(count),
            blocks=power_of_two(2 * -(-total // block) + 1),
            memberships=bucket_size(total, BUCKET_ALIGN),
        )

    @classmethod
    def of_orders(cls, orders: Sequence[np.ndarray], block_size: int = BUCKET_ALIGN) -> Layout:
        """The least layout that holds each given order of sets as it is bucketed alone.

        Args:
            orders: ``[N_i]`` sizes of the sets of each fit, in the order the fit holds them.
            block_size: as :meth:`RaggedSets.bucketed`.

        Returns:
            The :class:`Layout`: the largest ``N``, ``B``, blocks, ``S`` and ``T`` of the
            orders.
        """
        layout = cls()
        for sizes in orders:
            sizes = np.asarray(sizes, np.int64)
            num_sets = sets_bucket(sizes.size)
            memberships = bucket_size(int(sizes.sum()), BUCKET_ALIGN)
            if sizes.max() > MAX_PACKED_SET:
                layout = layout.union(cls(num_sets=num_sets, memberships=memberships))
                continue
            block = block_length(int(sizes.max()), int(sizes.sum()), block_size)
            packing = pack(sizes, num_sets, block)
            own = cls(num_sets, block, packing.start.shape[0], packing.slots.shape[0], memberships)
            layout = layout.union(own)
        return layout

    def union(self, other: Layout | None) -> Layout:
        """The least layout that covers both (``None`` covers nothing)."""
        if other is None:
            return self
        return Layout(*(max(a, b) for a, b in zip(self, other, strict=True)))


def pack(
    sizes: np.ndarray, num_sets: int, block: int, min_blocks: int = 1, min_slots: int = 1
) -> Packing:
    """Greedy packing of consecutive sets into blocks of at most ``block`` memberships.

    ``block`` (see :func:`block_length`) must hold the largest set. The number of blocks and
    the sets per block are rounded up to powers of two, and at least to ``min_blocks`` and
    ``min_slots`` (the devices of a sharded fit share one shape). Padding blocks hold no set and
    are skipped at run time, so they cost nothing; the padded ``T`` is ``blocks x B``, and the
    compiled shapes change only when ``T`` doubles. A loop over blocks (not sets) on the host.
    """
    offsets = np.concatenate([[0], np.cumsum(sizes)])  # [N + 1]
    starts, firsts = [], []
    first = 0
    while first < sizes.size:
        starts.append(offsets[first])
        firsts.append(first)
        # the sets whose end lies within B rows of the block's start
        first = int(np.searchsorted(offsets, offsets[first] + block, side="right")) - 1
    counts = np.diff(np.asarray(firsts + [sizes.size]))
    pad = max(power_of_two(len(starts)), min_blocks) - len(starts)
    start = np.concatenate([starts, np.full(pad, offsets[-1])]).astype(np.int32)
    first_set = np.concatenate([firsts, np.full(pad, num_sets)]).astype(np.int32)
    set_count = np.concatenate([counts, np.zeros(pad)]).astype(np.int32)
    slots = max(power_of_two(max(int(counts.max()), MIN_BUCKET)), min_slots)
    return Packing(
        to_device(start),
        to_device(first_set),
        to_device(set_count),
        to_device(np.arange(block, dtype=np.int32)),
        to_device(np.arange(slots, dtype=np.int32)),
    )


def to_device(array, dtype=None, *, fresh: bool = False) -> jax.Array:
    """A host array on the default device as it is (cast on the host to ``dtype`` if given).

    ``jax.device_put`` of a NumPy array compiles nothing, where ``jnp.asarray`` of one compiles
    a staging program per shape and dtype (``jit(stage)``, ``jit(convert_element_type)``,
    ``jit(iota)`` for ``jnp.arange``: JAX 0.10): sets of a new size would compile a handful of
    programs before the one that computes. NumPy casts float64 to float32 by the same
    round-to-nearest-even as XLA: the same bits.

    The array reaches the device as a private copy: on the CPU, ``jax.device_put`` of a
    writeable NumPy array shares its buffer (JAX 0.10, ``may_alias=False`` included: jax-ml/jax
    issue 37830), so a caller that later wrote into its array would change the device array
    under every program that reads it. A ``fresh`` array (one the caller has just made and
    holds no other reference to: a concatenation, a gather) needs no such copy and is put as
    it is: on the CPU that saves a pass over the vectors per layout.
    """
    if fresh and isinstance(array, np.ndarray) and (dtype is None or array.dtype == dtype):
        return jax.device_put(array)
    return jax.device_put(np.array(array, dtype=dtype, copy=True))


def real_sets(sets) -> jax.Array:
    """``[N]`` bool: the sets that hold at least one vector (all but the padding sets).

    Traceable: a ``segment_sum`` of the memberships (padding memberships carry id ``N`` and are
    dropped).
    """
    ones = jnp.ones(sets.set_ids.shape, jnp.int32)
    return jax.ops.segment_sum(ones, sets.set_ids, sets.num_sets, indices_are_sorted=True) > 0


class Packing(NamedTuple):
    """Blocks of whole sets over the disjoint layout, for the one-pass likelihood gradient.

    Block ``b`` holds the sets ``first_set[b] .. first_set[b] + set_count[b] - 1``, whose
    memberships lie in rows ``start[b] .. start[b] + B - 1`` of the (padded) flat layout. The
    static sizes are carried by shapes: ``rows`` is ``arange(B)`` (memberships per block) and
    ``slots`` is ``arange(S)`` (sets per block at most). Padding blocks hold no set.

    Attributes:
        start: ``[nb]`` int32 first membership row of each block.
        first_set: ``[nb]`` int32 first set of each block.
        set_count: ``[nb]`` int32 number of sets in each block.
        rows: ``[B]`` int32 ``arange(B)``.
        slots: ``[S]`` int32 ``arange(S)``.
    """

    start: Int[Array, " nb"]
    first_set: Int[Array, " nb"]
    set_count: Int[Array, " nb"]
    rows: Int[Array, " B"]
    slots: Int[Array, " S"]


# ---- Ragged sets --------------------------------------------------------------------------------

#: Absolute tolerance on the row sums of the labels (float32 rounding of proportions).
LABEL_SUM_ATOL = 1e-4


@dataclass_pytree("num_sets")
@dataclasses.dataclass(frozen=True)
class RaggedSets:
    """A batch of ``N`` sets of feature vectors with soft labels (flat layout).

    Attributes:
        vectors: ``[U, D]`` float; ``U = T`` in the disjoint layout, else the pool of distinct
            vectors.
        set_ids: ``[T]`` int32, sorted ascending: which set each membership belongs to.
        labels: ``[N, C]`` float, rows in the simplex, or ``None`` (unlabelled sets, for
            prediction).
        weights: ``[N]`` float, non-negative per-set weights of the likelihood.
        members: ``[T]`` int32 indices into ``vectors``, or ``None`` for the disjoint layout.
        num_sets: ``N``, static.
        packing: :class:`Packing` of whole sets into blocks (set by :meth:`bucketed` in the
            disjoint layout), used by the one-pass likelihood gradient; ``None`` otherwise.
    """

    vectors: Float[Array, "U D"]
    set_ids: Int[Array, " T"]
    labels: Float[Array, "N C"] | None
    weights: Float[Array, " N"]
    members: Int[Array, " T"] | None
    num_sets: int
    packing: Packing | None = None

    @property
    def num_classes(self) -> int:
        """Number of classes ``C``.

        Raises:
            ValueError: for unlabelled sets.
        """
        if self.labels is None:
            raise ValueError("these sets have no labels (they were built for prediction)")
        return self.labels.shape[1]

    @property
    def dim(self) -> int:
        """Dimension ``D`` of the feature vectors."""
        return self.vectors.shape[1]

    @property
    def num_memberships(self) -> int:
        """Total number of (vector, set) memberships ``T``."""
        return self.set_ids.shape[0]

    # ------------------------------------------------------------------ constructors
    @classmethod
    def from_list(
        cls,
        vectors: Sequence[np.ndarray],
        labels: np.ndarray | None = None,
        weights: np.ndarray | None = None,
        dtype=jnp.float32,
    ) -> RaggedSets:
        """Builds the flat layout from one ``[M_n, D]`` array per set.

        Args:
            vectors: ``N`` arrays, the ``n``-th of shape ``[M_n, D]`` with ``M_n >= 1``.
            labels: ``[N, C]`` soft labels, each row in ``[0, 1]`` and summing to 1 within
                :data:`LABEL_SUM_ATOL`, or ``None`` (sets to predict on). Use :func:`one_hot`
                for integer class labels.
            weights: optional ``[N]`` non-negative per-set weights (default ones).
            dtype: floating dtype of vectors, labels and weights (default float32).

        Returns:
            A validated :class:`RaggedSets` in the disjoint layout.

        Raises:
            ValueError: no sets, a set that is empty or not 2-D, a set whose values are not
                numbers (strings, objects), sets of different dimensions, NaN/inf in the
                vectors, and every error of :meth:`from_flat`.
        """
        if len(vectors) == 0:
            raise ValueError("no sets given: an empty list of sets")
        arrays = [np.asarray(v) for v in vectors]
        for n, v in enumerate(arrays):
            if v.ndim != 2:
                raise ValueError(f"set {n} has shape {v.shape}; each set must be a [M_n, D] array")
            if v.shape[0] == 0:
                raise ValueError(
                    f"set {n} is empty (0 vectors); every set needs at least one vector"
                )
            if not _numeric(v.dtype):
                raise ValueError(
                    f"set {n} holds {v.dtype} values ({v.flat[0]!r}, ...); {_NOT_NUMBERS}"
                )
        dims = np.array([v.shape[1] for v in arrays])
        if np.any(dims != dims[0]):
            bad = int(np.flatnonzero(dims != dims[0])[0])
            raise ValueError(
                f"mismatched dimensions: set 0 has D = {dims[0]} but set {bad} has D = {dims[bad]}"
            )
        sizes = np.array([v.shape[0] for v in arrays])
        return cls.from_lengths(np.concatenate(arrays, axis=0), sizes, labels, weights, dtype)

    @classmethod
    def from_lengths(
        cls,
        vectors: np.ndarray,
        lengths: np.ndarray,
        labels: np.ndarray | None = None,
        weights: np.ndarray | None = None,
        dtype=jnp.float32,
    ) -> RaggedSets:
        """Builds the flat layout from ``[T, D]`` vectors stored set after set and set sizes.

        Args:
            vectors: ``[T, D]`` vectors, those of set 0 first, then set 1, ...
            lengths: ``[N]`` integer sizes ``M_n >= 1``, summing to ``T``.
            labels: optional ``[N, C]`` soft labels (see :meth:`from_list`).
            weights: optional ``[N]`` non-negative per-set weights.
            dtype: floating dtype.

        Returns:
            A validated :class:`RaggedSets` in the disjoint layout.

        Raises:
            ValueError: lengths that are not 1-D integers, a length below 1, lengths not
                summing to ``T``, and every error of :meth:`from_flat`.
        """
        lengths = np.asarray(lengths)
        vectors = np.asarray(vectors)
        if lengths.ndim != 1 or lengths.size == 0 or not np.issubdtype(lengths.dtype, np.integer):
            raise ValueError(f"lengths must be a non-empty [N] integer array, got {lengths!r}")
        if np.any(lengths < 1):
            n = int(np.flatnonzero(lengths < 1)[0])
            raise ValueError(f"set {n} has length {lengths[n]}; every set needs a vector")
        if vectors.ndim != 2 or int(lengths.sum()) != vectors.shape[0]:
            raise ValueError(
                f"the lengths sum to {int(lengths.sum())} but there are vectors of shape "
                f"{vectors.shape} (expected [{int(lengths.sum())}, D])"
            )
        set_ids = np.repeat(np.arange(lengths.size, dtype=np.int32), lengths)
        return cls.from_flat(
            vectors, set_ids, labels, weights=weights, num_sets=lengths.size, dtype=dtype
        )

    @classmethod
    def from_offsets(
        cls,
        vectors: np.ndarray,
        offsets: np.ndarray,
        labels: np.ndarray | None = None,
        weights: np.ndarray | None = None,
        dtype=jnp.float32,
    ) -> RaggedSets:
        """Builds the flat layout from ``[T, D]`` vectors and ``[N + 1]`` set offsets (CSR).

        Set ``n`` holds ``vectors[offsets[n]:offsets[n + 1]]``.

        Raises:
            ValueError: offsets that do not start at 0, end at ``T`` and strictly increase, and
                every error of :meth:`from_lengths`.
        """
        offsets = np.asarray(offsets)
        vectors = np.asarray(vectors)
        if offsets.ndim != 1 or offsets.size < 2 or not np.issubdtype(offsets.dtype, np.integer):
            raise ValueError(f"offsets must be a [N + 1] integer array (N >= 1), got {offsets!r}")
        if offsets[0] != 0 or (vectors.ndim == 2 and offsets[-1] != vectors.shape[0]):
            raise ValueError(
                f"offsets must start at 0 and end at T = {vectors.shape[0]}; got "
                f"{offsets[0]} ... {offsets[-1]}"
            )
        return cls.from_lengths(vectors, np.diff(offsets), labels, weights, dtype)

    @classmethod
    def from_flat(
        cls,
        vectors: np.ndarray,
        set_ids: np.ndarray,
        labels: np.ndarray | None,
        weights: np.ndarray | None = None,
        members: np.ndarray | None = None,
        num_sets: int | None = None,
        dtype=jnp.float32,
    ) -> RaggedSets:
        """Validates flat arrays and wraps them as :class:`RaggedSets`.

        Args:
            vectors: ``[U, D]`` feature vectors (the pool when ``members`` is given).
            set_ids: ``[T]`` integer set index of each membership, sorted ascending.
            labels: ``[N, C]`` soft labels; rows in ``[0, 1]`` summing to 1 (tolerance
                :data:`LABEL_SUM_ATOL`), or ``None`` for unlabelled sets.
            weights: optional ``[N]`` non-negative per-set weights (default ones).
            members: optional ``[T]`` indices into ``vectors`` (shared-pool layout).
            num_sets: ``N``; defaults to ``labels.shape[0]`` (required without labels).
            dtype: floating dtype of vectors, labels and weights.

        Returns:
            The validated batch.

        Raises:
            ValueError: with a message naming the problem: wrong ranks, mismatched lengths,
                unsorted or out-of-range set ids, an empty set, NaN/inf in vectors, labels
                outside ``[0, 1]`` or rows not summing to 1, negative or non-finite weights,
                member indices outside the pool.
        """
        vectors = np.asarray(vectors)
        set_ids = np.asarray(set_ids)
        if labels is None and num_sets is None:
            raise ValueError("unlabelled sets need num_sets")
        labels = None if labels is None else np.asarray(labels)
        if vectors.ndim != 2:
            raise ValueError(f"vectors must be a [T, D] array, got shape {vectors.shape}")
        if not _numeric(vectors.dtype):
            raise ValueError(f"vectors hold {vectors.dtype} values; {_NOT_NUMBERS}")
        if set_ids.ndim != 1:
            raise ValueError(f"set_ids must be a [T] array, got shape {set_ids.shape}")
        if labels is not None and labels.ndim != 2:
            raise ValueError(
                f"labels must be a [N, C] array of (soft) labels, got shape {labels.shape}; "
                "use dpp.sets.one_hot for integer class labels"
            )
        if not np.issubdtype(set_ids.dtype, np.integer):
            raise ValueError(f"set_ids must be integers, got dtype {set_ids.dtype}")
        n = labels.shape[0] if num_sets is None else int(num_sets)
        if labels is not None and labels.shape[0] != n:
            raise ValueError(f"labels has {labels.shape[0]} rows but there are {n} sets")
        if members is None:
            if set_ids.shape[0] != vectors.shape[0]:
                raise ValueError(
                    f"mismatched lengths: {vectors.shape[0]} vectors but {set_ids.shape[0]} set ids"
                )
        else:
            members = np.asarray(members)
            if members.shape != set_ids.shape:
                raise ValueError(
                    f"mismatched lengths: {members.shape[0]} members but {set_ids.shape[0]} set ids"
                )
            if members.size and (members.min() < 0 or members.max() >= vectors.shape[0]):
                raise ValueError(
                    f"members must index the pool of {vectors.shape[0]} vectors; "
                    f"found values in [{members.min()}, {members.max()}]"
                )
        _check_set_ids(set_ids, n)
        if not np.all(np.isfinite(vectors)):
            row = int(np.flatnonzero(~np.all(np.isfinite(vectors), axis=1))[0])
            where = f"vector row {row}"
            if members is None:  # the row within its set: what a user with a list of sets has
                own = int(set_ids[row])
                where += f" (row {int(np.sum(set_ids[:row] == own))} of set {own})"
            raise ValueError(f"vectors contain NaN or inf, first at {where}")
        _check_range(vectors, dtype)
        if labels is not None:
            _check_labels(labels)
        if weights is None:
            weights = np.ones(n)
        weights = np.asarray(weights)
        if weights.shape != (n,):
            raise ValueError(f"weights must have shape [{n}], got {weights.shape}")
        if not np.all(np.isfinite(weights)) or np.any(weights < 0):
            raise ValueError("weights must be finite and non-negative")
        return cls(
            vectors=to_device(vectors, dtype),
            set_ids=to_device(set_ids, np.int32),
            labels=None if labels is None else to_device(labels, dtype),
            weights=to_device(weights, dtype),
            members=None if members is None else to_device(members, np.int32),
            num_sets=n,
        )

    # ------------------------------------------------------------------ host-side helpers
    def set_sizes(self) -> np.ndarray:
        """``[N]`` int64 number of vectors ``M_n`` of each set (host array)."""
        return np.bincount(np.asarray(self.set_ids), minlength=self.num_sets)

    def member_vectors(self) -> np.ndarray:
        """``[T, D]`` host array of every membership's vector (the pool expanded)."""
        vectors = np.asarray(self.vectors)
        return vectors if self.members is None else vectors[np.asarray(self.members)]

    def subset(self, indices: np.ndarray) -> RaggedSets:
        """Selects sets by index, in the given order, renumbering their ids ``0..len-1``.

        In the shared-pool layout the pool is compacted to the vectors the selected sets use.

        Args:
            indices: ``[N']`` distinct integer indices of sets to keep.

        Returns:
            A new :class:`RaggedSets` with ``N'`` sets (no re-validation is needed).

        Raises:
            ValueError: indices out of range, repeated, or empty.
        """
        indices = np.asarray(indices, dtype=np.int64)
        if indices.ndim != 1 or indices.size == 0:
            raise ValueError("subset needs a non-empty 1-D array of set indices")
        if indices.min() < 0 or indices.max() >= self.num_sets:
            raise ValueError(f"set indices must lie in [0, {self.num_sets})")
        if np.unique(indices).size != indices.size:
            raise ValueError("subset indices must be distinct")
        new_id = np.full(self.num_sets, -1, dtype=np.int64)
        new_id[indices] = np.arange(indices.size)
        old_ids = np.asarray(self.set_ids)
        mapped = new_id[old_ids]
        keep = np.flatnonzero(mapped >= 0)
        order = keep[np.argsort(mapped[keep], kind="stable")]
        set_ids = mapped[order].astype(np.int32)
        vectors = np.asarray(self.vectors)
        if self.members is None:
            new_vectors, members = vectors[order], None
        else:
            used, members = np.unique(np.asarray(self.members)[order], return_inverse=True)
            new_vectors, members = vectors[used], members.astype(np.int32)
        return RaggedSets(  # every array here is a new one (a gather): no private copy needed
            vectors=to_device(new_vectors, fresh=True),
            set_ids=to_device(set_ids, fresh=True),
            labels=None
            if self.labels is None
            else to_device(np.asarray(self.labels)[indices], fresh=True),
            weights=to_device(np.asarray(self.weights)[indices], fresh=True),
            members=None if members is None else to_device(members, fresh=True),
            num_sets=int(indices.size),
        )

    def padded(
        self, num_sets: int, num_memberships: int, pool_size: int | None = None
    ) -> RaggedSets:
        """The same sets padded to static sizes, with nothing added to any sum.

        Padding sets (indices ``N..num_sets-1``) have no vectors, a zero label row and zero
        weight; padding memberships have set id ``num_sets`` (``segment_sum`` drops them) and
        point at a zero vector. Padding changes no value or gradient of the likelihood.

        Args:
            num_sets: padded ``N`` (>= ``N``).
            num_memberships: padded ``T`` (>= ``T``).
            pool_size: padded ``U`` in the shared-pool layout (>= ``U``; default ``U``).

        Returns:
            The padded sets (the originals are the first ``N`` sets).

        Raises:
            ValueError: if a size is smaller than the current one.
        """
        n, t, u = self.num_sets, self.num_memberships, self.vectors.shape[0]
        if self.members is None:  # the disjoint layout: one vector per membership
            pool_size = num_memberships
        elif pool_size is None:
            pool_size = u
        if num_sets < n or num_memberships < t or pool_size < u:
            raise ValueError(
                f"cannot pad N = {n}, T = {t}, U = {u} to N = {num_sets}, T = {num_memberships}, "
                f"U = {pool_size}"
            )
        if (num_sets, num_memberships, pool_size) == (n, t, u):
            return self
        # on the host: eager jnp.concatenate would compile a program per pair of shapes
        vectors = np.asarray(self.vectors)
        vectors = np.concatenate([vectors, np.zeros((pool_size - u, self.dim), vectors.dtype)])
        set_ids = np.concatenate(
            [np.asarray(self.set_ids), np.full((num_memberships - t,), num_sets, np.int32)]
        )
        members = self.members
        if members is not None:
            members = np.concatenate(
                [np.asarray(members), np.zeros((num_memberships - t,), np.int32)]
            )
        labels = self.labels
        if labels is not None:
            labels = np.asarray(labels)
            labels = np.concatenate(
                [labels, np.zeros((num_sets - n, labels.shape[1]), labels.dtype)]
            )
        weights = np.asarray(self.weights)
        weights = np.concatenate([weights, np.zeros((num_sets - n,), weights.dtype)])
        vectors, set_ids, labels, weights, members = (  # new arrays (concatenations)
            None if a is None else to_device(a, fresh=True)
            for a in (vectors, set_ids, labels, weights, members)
        )
        return RaggedSets(vectors, set_ids, labels, weights, members, num_sets)

    def bucketed(self, block_size: int = BUCKET_ALIGN, floor: Layout | None = None) -> RaggedSets:
        """The sets padded (:meth:`padded`) to bucketed sizes, with a :class:`Packing` if possible.

        Sets of similar sizes (the folds of a cross-validation, the trials of an experiment)
        then share one shape, so ``jit`` compiles their programs once. ``N`` goes to
        :func:`sets_bucket`. In the disjoint layout, when no set has more than
        :data:`MAX_PACKED_SET` vectors, the sets are packed into blocks of whole sets and ``T``
        is padded to the packing's ``blocks x B`` (a power of two times ``B``); otherwise
        ``T`` and the pool ``U`` go to their :func:`bucket_size`. With a ``floor``
        (:meth:`Layout.covering` of every set that any of several fits holds) no shape is
        smaller than it, so those fits share one shape for certain.

        Args:
            block_size: memberships per block of the packing (raised to the largest set's
                bucket, lowered to the padded ``T``).
            floor: the least shapes (default: none).
        """
        if self.packing is not None:
            return self
        floor = Layout() if floor is None else floor
        num_sets = max(sets_bucket(self.num_sets), floor.num_sets)
        sizes = self.set_sizes()
        if self.members is None and sizes.max() <= MAX_PACKED_SET:
            block = max(block_length(sizes.max(), sizes.sum(), block_size), floor.block)
            packing = pack(sizes, num_sets, block, floor.blocks, floor.slots)
            rows = packing.start.shape[0] * packing.rows.shape[0]
            return dataclasses.replace(self.padded(num_sets, rows), packing=packing)
        pool = None if self.members is None else bucket_size(self.vectors.shape[0], BUCKET_ALIGN)
        memberships = max(bucket_size(self.num_memberships, BUCKET_ALIGN), floor.memberships)
        return self.padded(num_sets, memberships, pool)

    def with_weights(self, weights) -> RaggedSets:
        """A copy with the ``[N]`` per-set weights replaced (same layout, same shapes).

        Raises:
            ValueError: weights of another shape, negative or not finite.
        """
        weights = np.asarray(weights, dtype=np.asarray(self.weights).dtype)
        if weights.shape != (self.num_sets,):
            raise ValueError(f"weights must be [{self.num_sets}], got {weights.shape}")
        if not np.all(np.isfinite(weights)) or np.any(weights < 0):
            raise ValueError("weights must be finite and >= 0")
        return dataclasses.replace(self, weights=to_device(weights))

    def weighted_twice(
        self, fit_weights, validation_weights, floor: Layout | None = None
    ) -> tuple[RaggedSets, RaggedSets]:
        """The sets bucketed once (to ``floor`` at least), weighted two ways: fit, validation.

        Early stopping's held-out sets are weights on the training layout: the fit's weights
        are 0 on them, the validation weights 0 elsewhere, and blocks of sets weighted 0 are
        skipped, so the two share one layout (one compiled program) and neither pass pays for
        the other's sets.

        Args:
            fit_weights: ``[N]`` weights of the fit (0 on the held-out sets).
            validation_weights: ``[N]`` weights of the held-out score (0 on the others).
            floor: a layout the bucketed one must hold (:meth:`bucketed`).

        Returns:
            ``(fit, validation)``: the bucketed sets with each weighting (padding sets 0).

        Raises:
            ValueError: weights of another shape, negative or not finite (:meth:`with_weights`).
        """
        padded = self.bucketed(floor=floor)
        pad = np.zeros(padded.num_sets - self.num_sets)
        return (
            padded.with_weights(np.concatenate([fit_weights, pad])),
            padded.with_weights(np.concatenate([validation_weights, pad])),
        )

    @staticmethod
    def concatenate(first: RaggedSets, second: RaggedSets) -> RaggedSets:
        """The sets of ``first`` followed by those of ``second`` (disjoint layout, unpadded).

        Raises:
            ValueError: for the shared-pool layout, padded or packed sets, or sets of other
                dimensions or label widths.
        """
        for sets in (first, second):
            if sets.members is not None or sets.packing is not None:
                raise ValueError("concatenate takes unpadded sets of the disjoint layout")
        if first.dim != second.dim or (first.labels is None) != (second.labels is None):
            raise ValueError("concatenate: the sets differ in dimension or labels")
        if first.labels is not None and first.num_classes != second.num_classes:
            raise ValueError("concatenate: the sets differ in their number of classes")
        labels = None
        if first.labels is not None:
            labels = np.concatenate([np.asarray(first.labels), np.asarray(second.labels)])
            labels = to_device(labels)
        return dataclasses.replace(
            first,
            vectors=to_device(
                np.concatenate([np.asarray(first.vectors), np.asarray(second.vectors)])
            ),
            set_ids=to_device(
                np.concatenate(
                    [np.asarray(first.set_ids), np.asarray(second.set_ids) + first.num_sets]
                ).astype(np.int32)
            ),
            labels=labels,
            weights=to_device(
                np.concatenate([np.asarray(first.weights), np.asarray(second.weights)])
            ),
            num_sets=first.num_sets + second.num_sets,
        )

    def with_vectors(self, vectors: np.ndarray) -> RaggedSets:
        """Returns a copy with the ``[U, D']`` vectors replaced (e.g. standardised or projected).

        Raises:
            ValueError: if the number of rows changes or the new vectors are not finite.
        """
        vectors = np.asarray(vectors)
        if vectors.ndim != 2 or vectors.shape[0] != self.vectors.shape[0]:
            raise ValueError(
                f"replacement vectors must have {self.vectors.shape[0]} rows, got {vectors.shape}"
            )
        if not np.all(np.isfinite(vectors)):
            raise ValueError("replacement vectors contain NaN or inf")
        return dataclasses.replace(self, vectors=to_device(vectors, self.vectors.dtype))

    def astype(self, dtype) -> RaggedSets:
        """Casts vectors, labels and weights to ``dtype``."""
        return dataclasses.replace(
            self,
            vectors=self.vectors.astype(dtype),
            labels=None if self.labels is None else self.labels.astype(dtype),
            weights=self.weights.astype(dtype),
        )


def _check_range(vectors: np.ndarray, dtype) -> None:
    """Finite vectors that ``dtype`` holds: a value beyond its range would become inf there.

    Raises:
        ValueError: naming the largest magnitude, the dtype's limit and a remedy.
    """
    target = np.dtype(dtype)
    if not np.issubdtype(target, np.floating) or vectors.size == 0:
        return
    if np.issubdtype(vectors.dtype, np.floating) and vectors.dtype.itemsize <= target.itemsize:
        return
    largest = max(abs(float(vectors.max())), abs(float(vectors.min())))
    limit = float(np.finfo(target).max)  # a Python float: no cast of the largest to target
    if largest > limit:
        raise ValueError(
            f"vectors hold values up to {largest:.3g} in magnitude, beyond {target}'s range "
            f"({limit:.3g}): they would become inf; rescale the features"
        )


def one_hot(classes: np.ndarray, num_classes: int) -> np.ndarray:
    """Hard labels as ``[N, C]`` float32 one-hot rows.

    Raises:
        ValueError: if a class index lies outside ``[0, num_classes)``.
    """
    classes = np.asarray(classes)
    if classes.size and (classes.min() < 0 or classes.max() >= num_classes):
        raise ValueError(f"class indices must lie in [0, {num_classes})")
    return np.eye(num_classes, dtype=np.float32)[classes]


def _check_set_ids(set_ids: np.ndarray, num_sets: int) -> None:
    if set_ids.size == 0:
        raise ValueError("no vectors: set_ids is empty")
    if set_ids.min() < 0 or set_ids.max() >= num_sets:
        raise ValueError(
            f"set_ids must lie in [0, {num_sets}); found [{set_ids.min()}, {set_ids.max()}]"
        )
    steps = np.diff(set_ids)
    if np.any(steps < 0):
        pos = int(np.flatnonzero(steps < 0)[0]) + 1
        raise ValueError(f"set_ids must be sorted ascending; first decrease at position {pos}")
    counts = np.bincount(set_ids, minlength=num_sets)
    if np.any(counts == 0):
        n = int(np.flatnonzero(counts == 0)[0])
        raise ValueError(f"set {n} is empty (0 vectors); every set needs at least one vector")


def _check_labels(labels: np.ndarray) -> None:
    if not np.all(np.isfinite(labels)):
        raise ValueError("labels contain NaN or inf")
    if np.any(labels < 0) or np.any(labels > 1):
        n = int(np.flatnonzero(np.any((labels < 0) | (labels > 1), axis=1))[0])
        raise ValueError(f"labels of set {n} lie outside [0, 1]: {labels[n]}")
    sums = labels.sum(axis=1)
    bad = np.abs(sums - 1.0) > LABEL_SUM_ATOL
    if np.any(bad):
        n = int(np.flatnonzero(bad)[0])
        raise ValueError(
            f"labels of set {n} sum to {sums[n]:.6g}, not 1 (tolerance {LABEL_SUM_ATOL:g})"
        )


_NOT_NUMBERS = "features must be numbers: encode strings and categories as numbers first"


def _numeric(dtype) -> bool:
    """Whether vectors of ``dtype`` are numbers (booleans count): not strings or objects."""
    return bool(np.issubdtype(dtype, np.number) or dtype == np.bool_)
