"""Mini-batch first-order training over batches of sets (optax Adam).

:func:`minibatch_steps` is the one loop of optimizer steps over mini-batches: DPP's mini-batch
Adam (:func:`minimize_minibatch`) and the networks' epochs
(:func:`dpp.networks.training.run_epoch`) both run it.

DPP's mini-batch Adam is for data that outgrow full-batch L-BFGS.
Each epoch draws a permutation of the ``N`` sets and walks through ``ceil(N / B)`` batches of
``B`` sets. A batch is itself a :class:`~dpp.sets.RaggedSets` of static shape: ``capacity``
memberships (the sum of the ``B`` largest set sizes, so any batch fits) and ``B + 1`` segments,
the last one collecting padding with a zero label and zero weight, which therefore adds nothing to
the likelihood. The whole epoch loop runs in ``lax.scan`` under ``jit``; nothing is recompiled
between epochs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, ClassVar, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from dpp import params as check
from dpp.hyper import check_concrete
from dpp.pytrees import dataclass_pytree
from dpp.sets import RaggedSets
from dpp.solvers.lbfgs import MinimizeResult


@dataclass_pytree("batch_size", "epochs", "capacity")
@dataclasses.dataclass(frozen=True)
class AdamSettings:
    """Settings of mini-batch Adam (a pytree: ``learning_rate`` is traced, the rest static).

    Attributes:
        learning_rate: Adam step size (units of the parameters).
        batch_size: sets per batch ``B``.
        epochs: passes over the data per call.
        capacity: memberships per batch (static); fill with :func:`batch_capacity`.
    """

    learning_rate: float = 1e-2
    batch_size: int = 64
    epochs: int = 5
    capacity: int = 0

    #: The rules of the fields (also the optimizer options' rules, :mod:`dpp.solvers.options`).
    RULES: ClassVar[dict[str, check.Rule]] = {
        "learning_rate": check.Real(low=0, low_open=True),
        "batch_size": check.Int(1),
        "epochs": check.Int(1),
    }

    def __post_init__(self):
        check_concrete(self, self.RULES)

    #: Steps see mini-batches of sets as they are (padding or sharding would change them).
    full_batch: ClassVar[bool] = False

    def prepare(self, sets: RaggedSets) -> AdamSettings:
        """The settings for a fit on ``sets``: ``capacity`` from :func:`batch_capacity`."""
        return dataclasses.replace(self, capacity=batch_capacity(sets, self.batch_size))

    def minimize_loss(self, loss, batch_loss, x0, sets, key) -> MinimizeResult:
        """Minimises ``batch_loss`` over mini-batches of ``sets`` (``loss`` unused).

        Args:
            loss: ``x -> scalar`` on all sets (for a full-batch solver).
            batch_loss: ``(x, batch, scale) -> scalar`` on a mini-batch.
            x0: starting point (a pytree).
            sets: the training sets.
            key: PRNG key of the batch order.
        """
        del loss
        return minimize_minibatch(batch_loss, x0, sets, self, key)


def batch_capacity(sets: RaggedSets, batch_size: int) -> int:
    """Memberships a batch of ``batch_size`` sets may hold: the sum of the largest set sizes.

    Args:
        sets: the training sets (concrete, host-side).
        batch_size: sets per batch.

    Returns:
        Static ``capacity`` for :class:`AdamSettings`.
    """
    sizes = np.sort(sets.set_sizes())[::-1]
    return int(sizes[:batch_size].sum())


class EpochOrder(NamedTuple):
    """Where each batch of one epoch lies in the memberships (all int32 arrays).

    Attributes:
        perm: ``[N]`` the sets in epoch order.
        membership_rank: ``[T]`` position in ``perm`` of each membership's set.
        order: ``[T + capacity]`` memberships sorted by that position (zero-padded).
        starts: ``[num_batches + 1]`` offsets of the batches in ``order``.
    """

    perm: jax.Array
    membership_rank: jax.Array
    order: jax.Array
    starts: jax.Array


def epoch_order(sets: RaggedSets, perm: jax.Array, batch_size: int, capacity: int) -> EpochOrder:
    """Sorts the memberships by the epoch position of their set (one argsort per epoch).

    Args:
        sets: the ``N`` training sets.
        perm: ``[N]`` permutation of the sets.
        batch_size: sets per batch ``B``.
        capacity: static memberships per batch.

    Returns:
        :class:`EpochOrder` for :func:`make_batch`.
    """
    n = sets.num_sets
    num_batches = -(-n // batch_size)
    rank = jnp.zeros(n, jnp.int32).at[perm].set(jnp.arange(n, dtype=jnp.int32))
    membership_rank = rank[sets.set_ids]
    order = jnp.argsort(membership_rank, stable=True)
    starts = jnp.searchsorted(membership_rank[order], jnp.arange(num_batches + 1) * batch_size)
    order = jnp.concatenate([order, jnp.zeros(capacity, order.dtype)])
    return EpochOrder(perm, membership_rank, order, starts)


def make_batch(
    sets: RaggedSets, epoch: EpochOrder, b: jax.Array, batch_size: int, capacity: int
) -> tuple[RaggedSets, jax.Array]:
    """Batch ``b`` of an epoch as a static-shape :class:`RaggedSets`.

    Args:
        sets: the ``N`` training sets.
        epoch: output of :func:`epoch_order`.
        b: int32 scalar batch index.
        batch_size: sets per batch ``B``.
        capacity: memberships per batch (>= the memberships of any ``B`` sets).

    Returns:
        ``(batch, scale)``: ``B + 1`` segments, the last collecting padding (zero label, zero
        weight); ``scale = N / n_b`` with ``n_b`` the real sets in the batch.
    """
    n = sets.num_sets
    idx = jax.lax.dynamic_slice(epoch.order, (epoch.starts[b],), (capacity,))
    valid = jnp.arange(capacity) < epoch.starts[b + 1] - epoch.starts[b]
    local_ids = jnp.where(valid, epoch.membership_rank[idx] - b * batch_size, batch_size)
    vec_idx = idx if sets.members is None else sets.members[idx]
    position = b * batch_size + jnp.arange(batch_size)
    real = position < n
    set_idx = epoch.perm[jnp.minimum(position, n - 1)]
    labels = jnp.where(real[:, None], sets.labels[set_idx], 0.0)
    weights = jnp.where(real, sets.weights[set_idx], 0.0)
    batch = RaggedSets(
        vectors=sets.vectors[vec_idx],
        set_ids=local_ids.astype(jnp.int32),
        labels=jnp.concatenate([labels, jnp.zeros((1, sets.num_classes), labels.dtype)]),
        weights=jnp.concatenate([weights, jnp.zeros((1,), weights.dtype)]),
        members=None,
        num_sets=batch_size + 1,
    )
    scale = n / jnp.minimum(batch_size, n - b * batch_size).astype(sets.vectors.dtype)
    return batch, scale


def minibatch_steps(
    loss: Callable[..., jax.Array],
    optimizer: optax.GradientTransformation,
    params: Any,
    opt_state: Any,
    steps: Any,
    batch_of: Callable[[Any, Any], tuple[tuple, Any]],
    carried: Any = None,
    skip_empty: bool = False,
) -> tuple[Any, Any, Any]:
    """Optimizer steps on ``loss``, one per mini-batch, in a ``lax.scan`` over ``steps``.

    Step ``s`` builds its batch, ``args, carried = batch_of(steps[s], carried)``, and moves
    ``params`` by ``optimizer`` on ``jax.grad(loss)(params, *args)``.

    Args:
        loss: ``loss(params, *args) -> scalar`` on one batch.
        optimizer: an optax transformation (Adam, or decay then Adam).
        params: the parameters (a pytree).
        opt_state: the optimizer's state for them (``optimizer.init(params)``, or carried
            over from earlier steps).
        steps: what the scan runs over (e.g. batch indices or rows), leading axis the steps.
        batch_of: ``(step, carried) -> (args, carried)``: the batch (``loss``'s arguments after
            ``params``) and what the next step gets (e.g. a PRNG key; ``None``: nothing).
        carried: what the first step's ``batch_of`` gets.
        skip_empty: leave everything as it is on a batch whose first argument's ``weights``
            sum to 0 (a batch of padding sets).

    Returns:
        ``(params, opt_state, carried)`` after the last step.
    """

    def update(state, args):
        params, opt_state = state
        grads = jax.grad(loss)(params, *args)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state

    def step(carry, s):
        params, opt_state, carried = carry
        args, carried = batch_of(s, carried)
        if skip_empty:  # a batch of padding sets only (weight 0) leaves everything as it is
            params, opt_state = jax.lax.cond(
                jnp.sum(args[0].weights) > 0,
                lambda state: update(state, args),
                lambda state: state,
                (params, opt_state),
            )
        else:
            params, opt_state = update((params, opt_state), args)
        return (params, opt_state, carried), None

    out, _ = jax.lax.scan(step, (params, opt_state, carried), steps)
    return out


def minimize_minibatch(
    fun: Callable[[Any, RaggedSets, jax.Array], jax.Array],
    x0: Any,
    sets: RaggedSets,
    settings: AdamSettings,
    key: jax.Array,
) -> MinimizeResult:
    """Minimises a sum over sets by mini-batch Adam.

    Args:
        fun: ``fun(x, batch, scale)``: the loss on one batch, where ``scale = N / n_b`` (``n_b``
            real sets in the batch) turns the batch's data term into an unbiased estimate of the
            full-data one.
        x0: initial pytree of parameters.
        sets: the ``N`` training sets.
        settings: step size, batch size, epochs and static ``capacity``.
        key: PRNG key for the permutations.

    Returns:
        :class:`MinimizeResult` with ``value`` NaN (the caller evaluates the full objective) and
        ``num_iter`` the number of Adam steps.

    Raises:
        ValueError: if ``settings.capacity`` is smaller than the batch size (not filled in).
    """
    n, size = sets.num_sets, min(settings.batch_size, sets.num_sets)
    cap = settings.capacity
    if cap < size:
        raise ValueError("AdamSettings.capacity is not set: use batch_capacity(sets, batch_size)")
    num_batches = -(-n // size)
    opt = optax.adam(settings.learning_rate)

    def epoch(carry, epoch_key):
        order = epoch_order(sets, jax.random.permutation(epoch_key, n), size, cap)

        def batch_of(b, carried):
            return make_batch(sets, order, b, size, cap), carried

        x, opt_state, _ = minibatch_steps(fun, opt, *carry, jnp.arange(num_batches), batch_of)
        return (x, opt_state), None

    (x, _), _ = jax.lax.scan(epoch, (x0, opt.init(x0)), jax.random.split(key, settings.epochs))
    nan = jnp.array(jnp.nan, dtype=sets.vectors.dtype)
    steps = jnp.array(settings.epochs * num_batches, jnp.int32)
    return MinimizeResult(x, nan, steps, nan, jnp.int32(0))
