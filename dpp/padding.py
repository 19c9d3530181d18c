"""Padding rules: how ragged sets are bucketed, padded and packed into blocks for ``jit``.

Every new ``N``, ``T`` or ``U`` is a new shape, and a new shape compiles a new program. The jit
boundaries of dpp therefore see :meth:`dpp.sets.RaggedSets.bucketed` sets: padded to a power of
two of sets (:func:`sets_bucket`) and to the sizes of :func:`bucket_size` (steps of at most
1.25x) or whole packed blocks of vectors (:func:`pack`, :class:`Packing`), with *padding sets*
(no vectors, zero label, zero weight) and *padding memberships* (set id ``N``, which
``segment_sum`` drops). :class:`Layout` fixes the shapes that several fits share. Padding
changes no value or gradient: a padding set has weight 0 and an empty segment, and
:func:`real_sets` tells it apart from the real ones (every real set has a vector).

The one home of these rules: :mod:`dpp.sets` applies them, and :mod:`dpp.sharding` packs each
device's share with :func:`pack`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Int

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


def to_device(array, dtype=None) -> jax.Array:
    """A host array on the default device as it is (cast on the host to ``dtype`` if given).

    ``jax.device_put`` of a NumPy array compiles nothing, where ``jnp.asarray`` of one compiles
    a staging program per shape and dtype (``jit(stage)``, ``jit(convert_element_type)``,
    ``jit(iota)`` for ``jnp.arange``: JAX 0.10): sets of a new size would compile a handful of
    programs before the one that computes. NumPy casts float64 to float32 by the same
    round-to-nearest-even as XLA: the same bits.

    The array reaches the device as a private copy: on the CPU, ``jax.device_put`` of a
    writeable NumPy array shares its buffer (JAX 0.10, ``may_alias=False`` included: jax-ml/jax
    issue 37830), so a caller that later wrote into its array would change the device array
    under every program that reads it.
    """
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
