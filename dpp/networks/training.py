"""How the networks train: sets in padded size buckets, Adam epochs in one compiled program.

Sets are laid out in padded size buckets (:func:`bucketize`): every set of a bucket is padded to
the bucket's size with masked rows (real rows first), so a mini-batch is a dense
``[B, M, D]`` array and an epoch is one compiled program: a ``lax.scan`` over each bucket's
mini-batches (buckets in a fixed order, sets shuffled within each; never a Python loop over
sets). Training (:func:`train`) runs Adam with PyTorch's coupled weight decay (the papers'
``Adam(weight_decay=...)``) on the weighted soft-label log-likelihood of eq. (17), epochs in a
``lax.while_loop`` whose carry keeps the best epoch on the validation sets (early stopping with
``patience``). :func:`train_batch` runs many such fits (a selection's folds x candidates x
seeds) as one program, each member ending where it would alone.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jaxtyping import Array, Bool, Float

from dpp.sets import RaggedSets, bucket_size, to_device
from dpp.solvers.minibatch import minibatch_steps


class Bucket(NamedTuple):
    """Sets of one size bucket, padded (real rows first) to ``M`` vectors.

    Attributes:
        x: ``[N, M, D]`` float32 vectors (0 in padding rows).
        mask: ``[N, M]`` bool, the real rows (a padding set has one, a zero vector, so that
            every set's pooling is finite).
        labels: ``[N, C]`` soft labels (0 for padding sets).
        weights: ``[N]`` set weights (0 for padding sets, which every step skips).
    """

    x: Float[Array, "N M D"]
    mask: Bool[Array, "N M"]
    labels: Float[Array, "N C"]
    weights: Float[Array, " N"]


#: Size buckets of a layout at most (each adds a traced copy of the training step: about
#: 1.5 s of compilation on 2 CPU cores).
MAX_BUCKETS = 3
#: Several buckets are used only where they pad less than this share of one bucket's rows
#: (sizes that are heavy-tailed); otherwise one bucket compiles faster than it costs.
SPLIT_GAIN = 0.6


def _pow2_rows(count: int, batch_size: int) -> int:
    """The power of two at or above ``count`` sets, in whole batches (at least one)."""
    return batch_size * (1 << max(int(-(-count // batch_size)) - 1, 0).bit_length())


def layout(
    sizes: np.ndarray, batch_size: int, held_out: int | None = None
) -> tuple[tuple[int, int], ...]:
    """``((M, rows), ...)``: padded set sizes and sets per bucket for sets of these sizes.

    One bucket, or, where that saves at least ``1 - SPLIT_GAIN`` of the padded rows (sizes
    that are heavy-tailed), at most :data:`MAX_BUCKETS`, their sizes the thirds of the sizes
    (quantiles 1/3, 2/3 and the largest); sizes are rounded up to
    :func:`dpp.sets.bucket_size` (steps of at most 1.25x, at least 8). A bucket's rows are the
    power of two at or above its sets (a multiple of ``batch_size``), so a held-out part and
    all the training sets, or the folds of a selection, usually share one layout, and so one
    compiled program.

    Args:
        sizes: ``[N]`` set sizes (>= 1).
        batch_size: sets per mini-batch.
        held_out: the layout of any ``held_out`` of these sets instead (rows for at most that
            many per bucket): the early-stopping part of every seed gets the same shapes.

    Returns:
        The layout, by increasing ``M``.
    """
    sizes = np.asarray(sizes)
    largest = bucket_size(int(sizes.max()))
    edges = np.quantile(sizes, [1 / 3, 2 / 3, 1.0], method="higher")[-MAX_BUCKETS:]
    ms = sorted({bucket_size(int(e)) for e in edges} | {largest})
    counts = np.bincount(np.searchsorted(ms, sizes), minlength=len(ms))
    if np.dot(counts, ms) > SPLIT_GAIN * largest * sizes.size:
        ms, counts = [largest], np.array([sizes.size])  # one bucket: one traced step
    if held_out is not None:
        counts = np.minimum(counts, held_out)
    rows = [_pow2_rows(c, batch_size) for c in counts]
    return tuple((m, r) for m, r in zip(ms, rows, strict=True))


def bucketize(
    sets: RaggedSets, batch_size: int, num_classes: int, shape=None
) -> tuple[tuple[Bucket, ...], list[np.ndarray]]:
    """The sets in padded size buckets, and each bucket's set indices (for predictions).

    Args:
        sets: the sets (either layout; labels and weights used when present).
        batch_size: sets per mini-batch.
        num_classes: ``C`` (for unlabelled sets, zero label rows).
        shape: a :func:`layout` that fits these sets (a held-out part takes the layout of all
            the training sets, so both fits share one program); default: the sets' own.

    Returns:
        ``(buckets, index)``: the buckets by increasing size, and the ``[N_b]`` indices of the
        real sets of each (its first ``N_b`` rows); padding sets have weight 0.

    Raises:
        ValueError: sets that do not fit ``shape``.
    """
    sizes = sets.set_sizes()
    shape = layout(sizes, batch_size) if shape is None else shape
    ms = [m for m, _ in shape]
    where = np.searchsorted(ms, sizes)
    if sizes.max() > ms[-1]:
        raise ValueError(f"a set of {sizes.max()} vectors does not fit the layout {shape}")
    vectors = np.asarray(sets.member_vectors(), np.float32)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    labels = (
        np.zeros((sets.num_sets, num_classes), np.float32)
        if sets.labels is None
        else np.asarray(sets.labels, np.float32)
    )
    weights = np.asarray(sets.weights, np.float32)
    buckets, index = [], []
    for b, (m, rows) in enumerate(shape):  # a loop over buckets (a handful), not over sets
        members = np.flatnonzero(where == b)
        if members.size > rows:
            raise ValueError(f"{members.size} sets do not fit the {rows} rows of bucket {m}")
        counts = sizes[members]
        row = np.repeat(np.arange(members.size), counts)
        col = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
        source = np.repeat(starts[members], counts) + col
        x = np.zeros((rows, m, vectors.shape[1]), np.float32)
        x[row, col] = vectors[source]
        mask = np.zeros((rows, m), bool)
        mask[row, col] = True
        mask[members.size :, 0] = True  # a padding set holds one zero vector: finite, weight 0
        lab = np.zeros((rows, num_classes), np.float32)
        lab[: members.size] = labels[members]
        w = np.zeros(rows, np.float32)
        w[: members.size] = weights[members]
        buckets.append(Bucket(*(to_device(a) for a in (x, mask, lab, w))))  # compiles nothing
        index.append(members)
    return tuple(buckets), index


# ---------------------------------------------------------------------- training
@dataclasses.dataclass(frozen=True)
class TrainSettings:
    """Adam and early stopping of the neural models (hashable: static under ``jit``).

    Under ``jit`` only :meth:`structure` is static: the learning rate and the weight decay
    enter the compiled program as traced values (:meth:`rates`), so fits that differ only in
    them (a selection's grid of decays, the networks' grid of rates and decays) share one
    program.

    Attributes:
        learning_rate: Adam's step size.
        weight_decay: coupled L2 weight decay (added to the gradient, as PyTorch's
            ``Adam(weight_decay=...)`` that the papers used).
        batch_size: sets per mini-batch.
        max_epochs: epochs at most.
        patience: stop after this many epochs without a better validation log-likelihood.
        weight_average: decay ``a`` of an exponential moving average of the parameters taken
            after every epoch (Polyak averaging; Izmailov et al. 2018 average uniformly),
            debiased as Adam's moments are, so that after ``t`` epochs the model is
            ``sum_s a^(t-s) (1 - a) p_s / (1 - a^t)`` of the epochs' parameters ``p_s``: the
            average is what is scored, kept and returned (``optax.ema`` with ``debias``, fed
            the parameters once an epoch). 0 (the default): the last epoch's parameters, and no
            average in the program.
    """

    learning_rate: float = 5e-4
    weight_decay: float = 5e-3
    batch_size: int = 1
    max_epochs: int = 100
    patience: int = 20
    weight_average: float = 0.0

    def optimizer(self, mask=None, rates=None) -> optax.GradientTransformation:
        """``add_decayed_weights`` then ``adam``: PyTorch's Adam with ``weight_decay``.

        Args:
            mask: pytree of bools (or a function of the parameters giving one): the leaves
                weight decay applies to (default: all).
            rates: ``[2]`` float32 ``(learning_rate, weight_decay)``, traced (:meth:`rates`);
                default: this object's.
        """
        lr, decay = (self.learning_rate, self.weight_decay) if rates is None else rates
        return optax.chain(optax.add_decayed_weights(decay, mask=mask), optax.adam(lr))

    def structure(self) -> TrainSettings:
        """These settings but the rates (zeroed): what a compiled program is keyed on."""
        return dataclasses.replace(self, learning_rate=0.0, weight_decay=0.0)

    def rates(self) -> np.ndarray:
        """``[2]`` float32 ``(learning_rate, weight_decay)``, the traced part of the settings.

        A NumPy array: traced under ``jit`` without a program of its own to build it.
        """
        return np.asarray((self.learning_rate, self.weight_decay), np.float32)


class TrainResult(NamedTuple):
    """What :func:`train` returns.

    Attributes:
        model: the model after ``epochs`` epochs, or the best epoch's with validation sets.
        epochs: int, epochs run.
        best_epoch: int, the epoch of the returned model (``epochs`` without validation).
        history: ``[max_epochs + 1]`` validation log-likelihood per set after each epoch (row 0:
            before training; NaN after the last, or everywhere without validation).
    """

    model: eqx.Module
    epochs: jax.Array
    best_epoch: jax.Array
    history: jax.Array


def _set_log_likelihoods(model, bucket: Bucket, key, inference: bool):
    """``[N]`` ``sum_j P~_nj log p_nj`` of every set of a bucket (eq. 17), dropout keyed."""
    keys = jax.random.split(key, bucket.x.shape[0])
    logits = jax.vmap(lambda x, m, k: model(x, m, key=k, inference=inference))(
        bucket.x, bucket.mask, keys
    )
    return jnp.sum(bucket.labels * jax.nn.log_softmax(logits, axis=1), axis=1)


def mean_log_likelihood(model, buckets: tuple[Bucket, ...]) -> jax.Array:
    """Weighted mean log-likelihood per set (nats) over buckets, inference mode (no dropout)."""
    key = jax.random.key(0)  # unused in inference
    total = sum(jnp.sum(b.weights * _set_log_likelihoods(model, b, key, True)) for b in buckets)
    return total / sum(jnp.sum(b.weights) for b in buckets)


def batch_order(key, weights: jax.Array, batch_size: int) -> jax.Array:
    """``[B, batch_size]`` the rows of a bucket's mini-batches in one epoch, shuffled.

    One set a step (``batch_size=1``): a random permutation of the rows (a padding row's step
    is skipped). Larger batches: the real sets (weight > 0) shuffled, then the padding rows, so
    a batch holds real sets only, but for the last partial one. A step's loss is its batch's
    weighted mean, so a real set shuffled in among padding rows would weigh more than one in a
    full batch, and the layout's padding would change the fit.

    Args:
        key: PRNG key.
        weights: ``[N]`` the bucket's set weights (0: padding).
        batch_size: sets per mini-batch (``N`` is a multiple of it).
    """
    if batch_size == 1:
        return jax.random.permutation(key, weights.shape[0]).reshape(-1, 1)
    u = jax.random.uniform(key, weights.shape)
    return jnp.argsort(jnp.where(weights > 0, u, 2.0)).reshape(-1, batch_size)


def run_epoch(params, static, opt_state, key, buckets, settings: TrainSettings, optimizer):
    """One epoch: every bucket's mini-batches in a ``lax.scan``, sets shuffled within buckets.

    Args:
        params: the model's trained arrays (``eqx.partition(model, eqx.is_inexact_array)``).
        static: the rest of the model.
        opt_state: ``optimizer``'s state.
        key: PRNG key (the order of the sets and dropout).
        buckets: the training sets (:func:`bucketize`).
        settings: Adam and early stopping (its ``batch_size``).
        optimizer: ``settings.optimizer(...)`` with the model's weight-decay mask.

    Returns:
        ``(params, opt_state, key)`` after the epoch (what :func:`train` loops over, and what
        ``benchmarks/lab/diagnosis.py`` steps one epoch at a time).
    """

    def loss(params, batch: Bucket, key):
        model = eqx.combine(params, static)
        ll = _set_log_likelihoods(model, batch, key, inference=False)
        return -jnp.sum(batch.weights * ll) / jnp.sum(batch.weights) + model.penalty()

    def batch_of(rows, key, bucket: Bucket):
        key, step_key = jax.random.split(key)
        return (jax.tree.map(lambda a: a[rows], bucket), step_key), key

    for bucket in buckets:  # a handful of shapes, traced once each
        key, order_key = jax.random.split(key)
        batches = batch_order(order_key, bucket.weights, settings.batch_size)
        params, opt_state, key = minibatch_steps(
            loss,
            optimizer,
            params,
            opt_state,
            batches,
            lambda rows, key, b=bucket: batch_of(rows, key, b),
            key,
            skip_empty=True,
        )
    return params, opt_state, key


def _train(
    model: eqx.Module,
    buckets: tuple[Bucket, ...],
    validation: tuple[Bucket, ...],
    key: jax.Array,
    settings: TrainSettings,
    epoch_cap: jax.Array,
    monitor: jax.Array,
    rates: jax.Array | None = None,
) -> TrainResult:
    """Trains ``model`` by Adam, with early stopping on the ``validation`` sets if ``monitor``.

    The weighted mean log-likelihood per set of the validation sets is recorded before training
    and after every epoch. With ``monitor``, training stops once ``settings.patience`` epochs
    in a row have not raised it (or at ``epoch_cap``), and the best epoch's model is returned;
    without, exactly ``epoch_cap`` epochs run (a refit for the number of epochs early stopping
    chose) and the last model is returned. ``monitor`` and ``epoch_cap`` are traced, so the
    monitored fit and the refit on buckets of the same layout are one compiled program.

    Args:
        model: the initial model.
        buckets: the training sets (:func:`bucketize`).
        validation: held-out sets (in a refit, the monitored fit's, only recorded).
        key: PRNG key (shuffling and dropout).
        settings: Adam and early stopping (static; under :func:`train`, its
            :meth:`~TrainSettings.structure`).
        epoch_cap: traced int, epochs at most (``<= settings.max_epochs``).
        monitor: traced bool, stop early and keep the best epoch.
        rates: traced ``[2]`` float32 learning rate and weight decay
            (:meth:`TrainSettings.rates`); default: ``settings``'.

    Returns:
        :class:`TrainResult`.
    """
    params, static = eqx.partition(model, eqx.is_inexact_array)
    trained = jax.tree.map(eqx.is_inexact_array, model)  # the leaves params holds
    optimizer = settings.optimizer(eqx.filter(model.decay_mask(), trained), rates)
    opt_state = optimizer.init(params)
    rows = settings.max_epochs + 1
    cap = jnp.minimum(jnp.asarray(epoch_cap, jnp.int32), settings.max_epochs)
    monitor = jnp.asarray(monitor, bool)

    def score(params):
        return mean_log_likelihood(eqx.combine(params, static), validation).astype(jnp.float32)

    first = score(params)
    history = jnp.full(rows, jnp.nan, jnp.float32).at[0].set(first)
    # static: without it, no average is carried (optax's debiased EMA, over epochs)
    average = optax.ema(settings.weight_average) if settings.weight_average else None

    def averaged(moment, params):
        """The moving average's state and the debiased average after one more epoch."""
        if average is None:
            return None, params
        model, moment = average.update(params, moment)
        return moment, model

    def keep_going(carry):
        _, _, _, epoch, _, _, best_epoch, _, _ = carry
        return (epoch < cap) & (~monitor | (epoch - best_epoch < settings.patience))

    def one_epoch(carry):
        params, opt_state, key, epoch, best, best_value, best_epoch, history, moment = carry
        params, opt_state, key = run_epoch(
            params, static, opt_state, key, buckets, settings, optimizer
        )
        epoch = epoch + 1
        moment, model = averaged(moment, params)
        value = score(model)
        history = history.at[epoch].set(value)
        take = ~monitor | (value > best_value)  # a refit keeps its last epoch
        best = jax.tree.map(lambda new, old: jnp.where(take, new, old), model, best)
        best_value = jnp.where(take, value, best_value)
        best_epoch = jnp.where(take, epoch, best_epoch)
        return params, opt_state, key, epoch, best, best_value, best_epoch, history, moment

    moment = None if average is None else average.init(params)
    start = (params, opt_state, key, jnp.int32(0), params, first, jnp.int32(0), history, moment)
    end = jax.lax.while_loop(keep_going, one_epoch, start)
    return TrainResult(eqx.combine(end[4], static), end[3], end[6], end[7])


_train_jit = eqx.filter_jit(_train)


def train(model, buckets, validation, key, settings, epoch_cap, monitor) -> TrainResult:
    """:func:`_train` compiled: one program per shape and :meth:`TrainSettings.structure`.

    The arguments (typed there) and the result are :func:`_train`'s; the learning rate and the
    weight decay are traced, so fits that differ only in them run one program.
    """
    return _train_jit(
        model, buckets, validation, key, settings.structure(), epoch_cap, monitor,
        settings.rates(),
    )  # fmt: skip


def train_batch(
    model: eqx.Module,
    buckets: tuple[Bucket, ...],
    validation: tuple[Bucket, ...],
    key: jax.Array,
    settings: TrainSettings,
    epoch_cap: jax.Array,
    monitor: jax.Array,
    chunk: int = 1,
    rates: jax.Array | None = None,
) -> TrainResult:
    """:func:`train` of a batch of members as one compiled program.

    Every array argument (the model's arrays, the buckets, the validation sets, the key,
    ``epoch_cap``, ``monitor`` and ``rates``) has a leading member axis; ``settings``'
    :meth:`~TrainSettings.structure` is shared, and each member has its own learning rate and
    weight decay. The members run ``chunk`` at a time (``jax.lax.map``), the chunks one after
    another.

    * ``chunk=1``: a ``lax.scan`` over the members whose body is :func:`train`'s program, so
      every member ends bit for bit where :func:`train` on it alone ends, and stops at its
      own epoch (``tests/test_neural.py``).
    * ``chunk > 1``: each chunk ``vmap``-ped, what pays on an accelerator. A chunk runs until
      its last member stops early (the others' carries are kept as they were when each
      stopped). Batched matrix products round in another order than a single member's: over
      8 epochs the members stay within 3e-7 of their fits alone, but Adam on mini-batches of
      one set amplifies the difference over tens of epochs (probabilities up to 0.83 apart
      after 21-100 epochs, 13 of 20 members at other epochs: ``python benchmarks/bench.py
      --together``).

    Args:
        model: the members' initial models, stacked (``[B, ...]`` arrays).
        buckets: their training buckets, stacked.
        validation: their validation buckets, stacked.
        key: ``[B]`` PRNG keys.
        settings: Adam and early stopping, shared but for the rates (static).
        epoch_cap: ``[B]`` int32, each member's epochs at most.
        monitor: ``[B]`` bool, whether each member stops early.
        chunk: members vectorised at a time (static).
        rates: ``[B, 2]`` float32, each member's learning rate and weight decay
            (:meth:`TrainSettings.rates`); default: ``settings``' for every member.

    Returns:
        :class:`TrainResult` with a leading member axis on every array.
    """
    if rates is None:
        rates = np.broadcast_to(settings.rates(), (key.shape[0], 2))
    return _train_batch(
        model, buckets, validation, key, settings.structure(), epoch_cap, monitor, chunk, rates
    )


@eqx.filter_jit
def _train_batch(model, buckets, validation, key, settings, epoch_cap, monitor, chunk, rates):
    params, static = eqx.partition(model, eqx.is_array)

    def one(args):
        p, b, v, k, cap, mon, r = args
        result = _train(eqx.combine(p, static), b, v, k, settings, cap, mon, r)
        return result._replace(model=eqx.filter(result.model, eqx.is_array))

    args = (params, buckets, validation, key, epoch_cap, monitor, rates)
    # batch_size=1 would still vmap each member over an axis of one: a plain scan instead
    out = jax.lax.map(one, args, batch_size=None if chunk == 1 else chunk)
    return out._replace(model=eqx.combine(out.model, static))
