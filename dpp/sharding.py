"""Fits over several devices (``jax.sharding``) and processes (``jax.distributed``).

The sets are split across the devices of a one-axis :class:`~jax.sharding.Mesh` (axis
``"sets"``): whole sets per device, the flat layout cut at set boundaries into parts of nearly
equal vector counts, each part padded and packed (:meth:`dpp.sets.RaggedSets.bucketed`) to one
common shape and stacked along a leading device axis. The parameters are replicated. Inside
``shard_map`` each device computes the likelihood of its own sets (the blocked one-pass
gradient of :func:`dpp.encoding.packed_log_likelihood`), and the sums over sets of eqs. (5),
(6) and (17), and their gradients, become cross-device reductions (``psum``). The Theta-step
works on the ``[N, K]`` codes, sharded by set; XLA reduces its sums across devices.

With ``jax.distributed`` (:func:`initialize_distributed`) the mesh spans the devices of every
process; each process places only its own part of the sets on its devices
(:func:`shard_sets` builds the global arrays from process-local shards), and every process runs
the same fit program (SPMD).
"""

from __future__ import annotations

import dataclasses
import logging
import os

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from dpp.encoding import encode_soft, packed_log_likelihood
from dpp.pooling import MEAN
from dpp.pytrees import dataclass_pytree
from dpp.sets import BUCKET_ALIGN, RaggedSets, block_length, pack, sets_bucket

logger = logging.getLogger(__name__)

#: The mesh axis the sets are split along.
AXIS = "sets"


def device_mesh(devices: int | str = "all") -> Mesh:
    """A one-axis mesh (``"sets"``) over ``devices`` of the global device list.

    Args:
        devices: a positive number of devices, or ``"all"`` (every device of every process).

    Returns:
        The mesh.

    Raises:
        ValueError: for more devices than there are, or a value that is neither.
    """
    available = jax.devices()
    if devices == "all":
        count = len(available)
    elif isinstance(devices, int | np.integer) and not isinstance(devices, bool) and devices >= 1:
        count = int(devices)
    else:
        raise ValueError(f"devices must be a positive integer or 'all', got {devices!r}")
    if count > len(available):
        raise ValueError(
            f"devices={count} but JAX sees {len(available)} "
            f"({available[0].platform}); for CPU tests set "
            "XLA_FLAGS=--xla_force_host_platform_device_count=N before JAX starts"
        )
    return Mesh(np.asarray(available[:count]), (AXIS,))


@dataclass_pytree("mesh")
@dataclasses.dataclass(frozen=True)
class ShardedSets:
    """``N`` sets split across the devices of ``mesh`` (a pytree; ``mesh`` is static).

    Attributes:
        local: per-device :class:`~dpp.sets.RaggedSets`, every array with a leading device
            axis ``[P, ...]`` sharded along ``"sets"``; ``local.num_sets`` is the per-device
            padded ``N_p``.
        mesh: the device mesh (static: the same devices give the same compiled program, so
            fits of equally padded shapes share one program whatever their split).
    """

    local: RaggedSets
    mesh: Mesh

    @property
    def sets_per_device(self) -> tuple[int, ...]:
        """Real sets on each device, in order (read back from the devices; single process)."""
        n_p = self.local.num_sets
        ids = np.asarray(self.local.set_ids)  # [P, T_p]; padding memberships carry id N_p
        return tuple(int(np.unique(row[row < n_p]).size) for row in ids)

    @property
    def labels(self) -> jax.Array:
        """``[P * N_p, C]`` soft labels, device-major (padding rows 0)."""
        return self.local.labels.reshape(-1, self.local.labels.shape[-1])

    @property
    def weights(self) -> jax.Array:
        """``[P * N_p]`` set weights, device-major (padding rows 0)."""
        return self.local.weights.reshape(-1)


def split_points(sizes: np.ndarray, parts: int) -> np.ndarray:
    """``[parts + 1]`` set boundaries: ``parts`` runs of consecutive sets, nearly equal in vectors.

    Each boundary lies at the set where the cumulative vector count crosses ``p * T / parts``;
    every part holds at least one set.

    Raises:
        ValueError: if there are fewer sets than parts.
    """
    if len(sizes) < parts:
        raise ValueError(f"{len(sizes)} sets cannot be split across {parts} devices")
    ends = np.cumsum(sizes)
    targets = ends[-1] * np.arange(1, parts) / parts
    raw = np.searchsorted(ends, targets, side="left") + 1
    cuts, previous = [], 0
    for i, cut in enumerate(raw, start=1):  # a loop over devices: leave room for one set each
        previous = int(np.clip(cut, previous + 1, len(sizes) - (parts - i)))
        cuts.append(previous)
    return np.concatenate([[0], cuts, [len(sizes)]]).astype(int)


def _common_packing(parts: list[RaggedSets], block_size: int):
    """One padded shape for every part: ``(N_p, T_p, packings)``.

    ``N_p`` sets and ``T_p = blocks x B`` memberships per device: every part is packed with the
    same block length ``B`` and padded to the largest part's number of blocks and sets per block.
    """
    n_p = max(sets_bucket(p.num_sets) for p in parts)
    sizes = [p.set_sizes() for p in parts]
    largest = max(int(s.max()) for s in sizes)
    block = block_length(largest, max(int(s.sum()) for s in sizes), block_size)
    first = [pack(s, n_p, block) for s in sizes]
    blocks = max(k.start.shape[0] for k in first)
    slots = max(k.slots.shape[0] for k in first)
    packings = [pack(s, n_p, block, min_blocks=blocks, min_slots=slots) for s in sizes]
    return n_p, blocks * block, packings


def shard_sets(sets: RaggedSets, mesh: Mesh, block_size: int = BUCKET_ALIGN) -> ShardedSets:
    """Splits ``sets`` across the devices of ``mesh``: whole sets per device, padded per device.

    In a multi-process run every process calls this with the same ``sets`` and places only the
    parts of its own devices (``jax.make_array_from_single_device_arrays``).

    Args:
        sets: ``N`` sets in the disjoint layout (each vector in one set), ``N >= devices``.
        mesh: a one-axis mesh from :func:`device_mesh`.
        block_size: memberships per packed block (as :meth:`RaggedSets.bucketed`).

    Returns:
        The sharded sets; padding adds nothing to any sum.

    Raises:
        ValueError: for the shared-pool layout (overlapping windows cannot be split by set
            without copying vectors), or fewer sets than devices.
    """
    if sets.members is not None:
        raise ValueError(
            "multi-device fits need the disjoint layout; shared-pool sets (overlapping windows) "
            "run on one device"
        )
    devices = list(mesh.devices.flat)
    bounds = split_points(sets.set_sizes(), len(devices))
    parts = [sets.subset(np.arange(a, b)) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
    n_p, t_p, packings = _common_packing(parts, block_size)
    # only this process's parts are padded and placed (the shapes come from every part's sizes)
    mine = [i for i, d in enumerate(devices) if d.process_index == jax.process_index()]
    local = [dataclasses.replace(parts[i].padded(n_p, t_p), packing=packings[i]) for i in mine]
    sharding = NamedSharding(mesh, P(AXIS))

    def stack(*leaves):
        shape = (len(devices), *np.shape(leaves[0]))
        arrays = [
            jax.device_put(np.asarray(leaf)[None], devices[i])
            for leaf, i in zip(leaves, mine, strict=True)
        ]
        return jax.make_array_from_single_device_arrays(shape, sharding, arrays)

    stacked = jax.tree.map(stack, *local)
    return ShardedSets(stacked, mesh)


#: ``shard_map``'s varying-axis check is off: the encoders skip padding blocks with
#: ``lax.cond``, whose skip branch returns constant zeros that the check rejects as unvarying.
#: The values and gradients are tested against one device (tests/test_sharding.py).
_CHECK_VMA = False


def _squeeze(tree):
    return jax.tree.map(lambda a: a[0], tree)


def sharded_log_likelihood(params, sets: ShardedSets) -> jax.Array:
    """``sum_n w_n L^n`` (eqs. 5, 6, 17) over all devices' sets, reduced by ``psum``.

    Each device adds its own sets by :func:`dpp.encoding.packed_log_likelihood`.
    Differentiable: the gradients of eqs. (11)-(15) of the replicated parameters are reduced
    across devices in the same way. Same value as on the unsharded sets, up to the order of
    the float additions.

    Args:
        params: :class:`dpp.likelihood.Params` (``mu [K, D]``, ``log_beta [] or [K]``,
            ``theta [K, C]``), replicated.
        sets: the sharded sets (:func:`shard_sets`).

    Returns:
        Scalar weighted log-likelihood (nats), without the ridge or the prior, replicated.
    """

    def local(params, part):
        return jax.lax.psum(packed_log_likelihood(_squeeze(part), *params), AXIS)

    spec = jax.tree.map(lambda _: P(AXIS), sets.local)
    return jax.shard_map(
        local, mesh=sets.mesh, in_specs=(P(), spec), out_specs=P(), check_vma=False
    )(tuple(params), sets.local)


def sharded_codes(sets: ShardedSets, mu, log_beta, pooling=MEAN) -> jax.Array:
    """``[P * N_p, K]`` set representations ``z`` (eq. 2 over eq. 3), each device its own sets.

    Args:
        sets: the sharded sets (:func:`shard_sets`).
        mu: ``[K, D]`` prototypes, replicated.
        log_beta: ``[]`` or ``[K]`` log inverse temperature, replicated.
        pooling: how a set's codes become ``z`` (:mod:`dpp.pooling`), replicated.

    Returns:
        ``[P * N_p, K]`` codes sharded by set, device-major; padding rows are 0 (rows of
        :attr:`ShardedSets.labels` and :attr:`ShardedSets.weights`).
    """

    def local(mu, log_beta, pooling, part):
        return encode_soft(_squeeze(part), mu, log_beta, pooling)[None]

    spec = jax.tree.map(lambda _: P(AXIS), sets.local)
    z = jax.shard_map(
        local, mesh=sets.mesh, in_specs=(P(), P(), P(), spec), out_specs=P(AXIS),
        check_vma=False,
    )(mu, log_beta, pooling, sets.local)  # fmt: skip
    return z.reshape(-1, z.shape[-1])


def initialize_distributed(
    coordinator_address: str | None = None,
    num_processes: int | None = None,
    process_id: int | None = None,
) -> bool:
    """Starts ``jax.distributed`` from arguments or the SLURM environment; idempotent.

    With all three arguments ``None`` and no SLURM job of more than one task, nothing is started
    (a single-process run). Under SLURM (``SLURM_NTASKS`` > 1, e.g. submitit's
    ``tasks_per_node``) JAX reads the coordinator, process count and id from the environment.
    CPU processes exchange their sums over gloo collectives.

    Returns:
        Whether this process is part of a multi-process run.
    """
    if jax.distributed.is_initialized():  # (jax.process_count() would start the backends)
        return True
    slurm = int(os.environ.get("SLURM_NTASKS", "1")) > 1
    if coordinator_address is None and num_processes is None and not slurm:
        return False
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(
        coordinator_address=coordinator_address,
        num_processes=num_processes,
        process_id=process_id,
    )
    logger.info(
        "jax.distributed: process %d of %d, %d local / %d global devices",
        jax.process_index(),
        jax.process_count(),
        jax.local_device_count(),
        jax.device_count(),
    )
    return True
