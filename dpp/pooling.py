r"""How a set's codes become its representation ``z``: mean (eq. 2), max, or a generalised mean.

The paper pools a set's soft assignments by their mean (eq. 2, :math:`\pi_k = 1/M_n`), which
measures *how much* of a set falls near each prototype. Where the label depends on whether a set
holds *one* vector near a prototype (the multiple-instance assumption), the largest code says it
more directly. The three poolings are small pytrees, so the kind is static under ``jit`` and a
learned parameter (the generalised mean's exponent) is a leaf that every solver optimises with
the prototypes:

* :class:`MeanPooling` (``"mean"``): :math:`z_k = \frac{1}{M} \sum_x f_k(x)`, eq. (2), the paper;
* :class:`MaxPooling` (``"max"``): :math:`z_k = \max_x f_k(x)`. At ties (several vectors with
  the same largest code, as when codes saturate) the gradient is split equally among them;
* :class:`GeMPooling` (``"gem"``): :math:`z_k = (\frac{1}{M} \sum_x f_k(x)^p)^{1/p}`, with
  mean (:math:`p = 1`) and max (:math:`p \to \infty`) as its limits (Radenović, Tolias & Chum,
  TPAMI 2018), computed in log space. ``p`` is learned through ``rho``:
  :math:`p = 1 + \min(\mathrm{softplus}(\rho), P_{max} - 1)`, so :math:`1 \le p \le P_{max}`
  (:data:`GEM_P_MAX`, beyond which the pooled codes equal the max to float32 precision);
  ``rho`` starts at :func:`gem_rho` of ``p = 3``, the paper's start.

Max and generalised-mean codes do not sum to one, and the classifier of eq. (16) has no
intercept (with mean pooling the codes' unit sum makes one redundant); a prototype that every
set holds plays its part.

Every function works on flat ragged layouts with segment ops (``segment_max``,
``segment_sum``) and is differentiable by autodiff with the tie rule above;
:mod:`dpp.encoding` adds the fused one-pass value and gradient over packed blocks.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import jax
import jax.numpy as jnp
import numpy as np

from dpp.pytrees import dataclass_pytree
from dpp.sets import to_device

#: Largest exponent of the generalised mean.
GEM_P_MAX = 64.0
#: The generalised mean's starting exponent (Radenović et al. 2018).
GEM_P_START = 3.0
#: Floor of ``log f`` before it is scaled by ``p`` (a code below ``e^-1e4`` is 0 anyway; the
#: floor keeps ``p log f`` finite in float32).
LOG_CODE_MIN = -1.0e4


# ``kind`` is each pytree's static node data: two poolings without leaves would otherwise have
# equal tree structures, and a compiled program of one could be reused for the other. Each class
# holds everything its pooling is: its value, its backward pass, each vector's share and its
# simplicity; the module's functions (:func:`segment_pool`, :func:`pooled_cotangent`,
# :func:`segment_shares`) call these methods, and :data:`REGISTRY` names them.
@dataclass_pytree("kind")
@dataclasses.dataclass(frozen=True)
class MeanPooling:
    """Eq. (2): the mean of a set's codes (the paper's pooling; no parameter)."""

    kind: str = dataclasses.field(default="mean", init=False)
    #: Simplicity rank among the poolings (larger: simpler; model selection's tie-break).
    rank: ClassVar[int] = 0
    #: Names of the learned parameters (each saved as ``pool_<name>`` in a model file).
    parameters: ClassVar[tuple[str, ...]] = ()
    #: Linear in the codes: the encoder fuses it into eq. (2)'s one-pass kernels (eqs. 11-15);
    #: the other poolings take :mod:`dpp.encoding`'s general path (their ``pool``,
    #: ``cotangent`` and, over a shared pool of vectors, ``shared_*``).
    linear: ClassVar[bool] = True

    def pool(self, f, log_f, ids, num_segments: int):
        """``[S, K]`` the mean of each segment's codes (see :func:`segment_pool`)."""
        del log_f
        totals = jax.ops.segment_sum(f, ids, num_segments, indices_are_sorted=True)
        return totals / jnp.maximum(_counts(f, ids, num_segments), 1.0)[:, None]

    def cotangent(self, f, log_f, ids, z, dz):
        """``dL/d log f = dL/dz f / M`` (see :func:`pooled_cotangent`); no parameter."""
        del log_f, z
        counts = _counts(f, ids, dz.shape[0])
        per_row = _gather(dz / jnp.maximum(counts, 1.0)[:, None], ids)
        return jnp.where((ids < dz.shape[0])[:, None], f * per_row, 0.0), jnp.zeros((), f.dtype)

    def dense(self, h, mask):
        """``[H]`` the mean of one padded set's real rows ``h [M, H]`` (a network's layer).

        The dense layout of the networks (autodiff's gradient); :meth:`pool` is the same mean
        over ragged segments, equal up to float32 summation order.
        """
        return jnp.sum(jnp.where(mask[:, None], h, 0.0), axis=0) / jnp.sum(mask)

    def shares(self, f, log_f, ids, num_segments: int):
        """``[R, K]`` each row's share ``f / M`` (see :func:`segment_shares`)."""
        del log_f
        valid = (ids < num_segments)[:, None]
        counts = _counts(f, ids, num_segments)
        return jnp.where(valid, f / _gather(jnp.maximum(counts, 1.0)[:, None], ids, 1.0), 0.0)


@dataclass_pytree("kind")
@dataclasses.dataclass(frozen=True)
class MaxPooling:
    """The largest code of each prototype over a set (no parameter)."""

    kind: str = dataclasses.field(default="max", init=False)
    rank: ClassVar[int] = -1
    parameters: ClassVar[tuple[str, ...]] = ()
    linear: ClassVar[bool] = False

    # Over a shared pool of vectors (:func:`dpp.encoding.encode_soft`) the pooling runs in two
    # passes over blocks of memberships: each set's largest ``shared_scores``, then the sums of
    # ``shared_terms``, which ``shared_combine`` turns into ``z``.
    def shared_scores(self, f, log_f):
        """``[U, K]`` what each set's largest is taken of: the codes."""
        del log_f
        return f

    def shared_terms(self, f, scores, top, valid):
        """The two sums of a block's rows: each tie's code, and the ties."""
        ties = (scores == top) & valid
        return jnp.where(ties, f, 0.0), ties.astype(f.dtype)

    def shared_combine(self, top, total, count):
        """``[S, K]`` the largest exactly; its gradient split equally among the ties."""
        mean_of_ties = total / jnp.maximum(count, 1.0)
        return jnp.where(count > 0, top, 0.0) + mean_of_ties - jax.lax.stop_gradient(mean_of_ties)

    def pool(self, f, log_f, ids, num_segments: int):
        """``[S, K]`` the largest code; its gradient split equally among the ties."""
        del log_f
        ties, largest = _ties(jax.lax.stop_gradient(f), ids, num_segments)
        share = jax.ops.segment_sum(ties.astype(f.dtype), ids, num_segments, True)
        total = jax.ops.segment_sum(jnp.where(ties, f, 0.0), ids, num_segments, True)
        # the value is the largest code exactly; the gradient is split equally among the ties
        mean_of_ties = total / jnp.maximum(share, 1.0)
        value = jnp.where(share > 0, largest, 0.0)
        return value + mean_of_ties - jax.lax.stop_gradient(mean_of_ties)

    def cotangent(self, f, log_f, ids, z, dz):
        """``dL/d log f = dL/dz f [f = z] / #ties`` (see :func:`pooled_cotangent`)."""
        del log_f, z
        ties, _ = _ties(f, ids, dz.shape[0])
        share = jax.ops.segment_sum(ties.astype(f.dtype), ids, dz.shape[0], True)
        per_tie = dz / jnp.maximum(share, 1.0)
        return jnp.where(ties, f * _gather(per_tie, ids), 0.0), jnp.zeros((), f.dtype)

    def dense(self, h, mask):
        """``[H]`` the largest value of each unit over one padded set's real rows (a layer).

        The dense layout of the networks (autodiff's gradient, split among ties as
        :meth:`pool`'s); the same value as :meth:`pool`.
        """
        return jnp.max(jnp.where(mask[:, None], h, -jnp.inf), axis=0)

    def shares(self, f, log_f, ids, num_segments: int):
        """``[R, K]`` the largest code, split equally among the rows that hold it."""
        del log_f
        ties, largest = _ties(f, ids, num_segments)
        share = jax.ops.segment_sum(ties.astype(f.dtype), ids, num_segments, True)
        per_tie = jnp.where(share > 0, largest, 0.0) / jnp.maximum(share, 1.0)
        return jnp.where(ties, _gather(per_tie, ids), 0.0)


@dataclass_pytree("kind")
@dataclasses.dataclass(frozen=True)
class GeMPooling:
    """The generalised mean of a set's codes with a learned exponent ``p`` (see the module).

    Attributes:
        rho: ``[]`` float, the unconstrained parameter of ``p`` (:meth:`p`).
    """

    rho: jax.Array | float
    kind: str = dataclasses.field(default="gem", init=False)
    rank: ClassVar[int] = -2
    parameters: ClassVar[tuple[str, ...]] = ("rho",)
    linear: ClassVar[bool] = False

    def shared_scores(self, f, log_f):
        """``[U, K]`` what each set's largest is taken of: ``p log f`` (see :class:`MaxPooling`)."""
        return self.p().astype(f.dtype) * jnp.maximum(log_f, LOG_CODE_MIN)

    def shared_terms(self, f, scores, top, valid):
        """The two sums of a block's rows: ``exp(p log f - top)``, and the rows."""
        return jnp.where(valid, jnp.exp(scores - top), 0.0), valid.astype(f.dtype)

    def shared_combine(self, top, total, count):
        """``[S, K]`` ``(mean of f^p)^(1/p)`` from the sums, in log space."""
        p = self.p().astype(top.dtype)
        filled = total > 0
        log_mean = top + jnp.log(jnp.where(filled, total, 1.0)) - jnp.log(jnp.maximum(count, 1.0))
        return jnp.where(filled, jnp.exp(log_mean / p), 0.0)

    def p(self) -> jax.Array:
        """``p = 1 + min(softplus(rho), GEM_P_MAX - 1)``, in ``[1, GEM_P_MAX]``.

        Above 1 in exact arithmetic; in float32 a ``rho`` below about -16 gives ``p = 1``, the
        mean, as a fit that prefers the mean drives it there.
        """
        return 1.0 + jnp.minimum(jax.nn.softplus(self.rho), GEM_P_MAX - 1.0)

    def _weights(self, log_f, ids, num_segments: int, p, stop: bool):
        """The generalised mean's segment softmax parts: ``(shift, terms, sums)``.

        Each segment's largest ``p log f``, each row's ``exp(p log f - shift)`` and their segment
        sums (``stop``: no gradient through the shift).
        """
        valid = (ids < num_segments)[:, None]
        v = p * jnp.maximum(log_f, LOG_CODE_MIN)
        shift = jax.ops.segment_max(v, ids, num_segments, indices_are_sorted=True)
        shift = jnp.where(jnp.isfinite(shift), shift, 0.0)
        if stop:
            shift = jax.lax.stop_gradient(shift)
        terms = jnp.where(valid, jnp.exp(v - _gather(shift, ids)), 0.0)
        sums = jax.ops.segment_sum(terms, ids, num_segments, indices_are_sorted=True)
        return shift, terms, sums

    def pool(self, f, log_f, ids, num_segments: int):
        """``[S, K]`` ``(mean of f^p)^(1/p)``, in log space (see :func:`segment_pool`)."""
        p = self.p().astype(f.dtype)
        shift, _, sums = self._weights(log_f, ids, num_segments, p, stop=True)
        filled = sums > 0
        log_mean = (
            shift
            + jnp.log(jnp.where(filled, sums, 1.0))
            - jnp.log(jnp.maximum(_counts(f, ids, num_segments), 1.0))[:, None]
        )
        return jnp.where(filled, jnp.exp(log_mean / p), 0.0)

    def cotangent(self, f, log_f, ids, z, dz):
        """``dL/d log f = dL/dz z w`` and ``dL/drho`` (see :func:`pooled_cotangent`)."""
        num_segments = z.shape[0]
        p = self.p().astype(f.dtype)
        clipped = jnp.maximum(log_f, LOG_CODE_MIN)
        _, terms, sums = self._weights(log_f, ids, num_segments, p, stop=False)
        w = terms / _gather(jnp.where(sums > 0, sums, 1.0), ids, fill=1.0)
        h = _gather(dz * z, ids) * w * (log_f > LOG_CODE_MIN)
        mean_log = jax.ops.segment_sum(w * clipped, ids, num_segments, indices_are_sorted=True)
        log_z = jnp.log(jnp.where(z > 0, z, 1.0))
        dz_dp = jnp.where(z > 0, z * (mean_log - log_z) / p, 0.0)
        dp_drho = jax.nn.sigmoid(self.rho) * (jax.nn.softplus(self.rho) < GEM_P_MAX - 1.0)
        return h, jnp.sum(dz * dz_dp) * dp_drho.astype(f.dtype)

    def shares(self, f, log_f, ids, num_segments: int):
        """``[R, K]`` each row's share ``z w`` (see :func:`segment_shares`)."""
        valid = (ids < num_segments)[:, None]
        z = self.pool(f, log_f, ids, num_segments)
        p = self.p().astype(f.dtype)
        _, terms, sums = self._weights(log_f, ids, num_segments, p, stop=False)
        w = terms / _gather(jnp.where(sums > 0, sums, 1.0), ids, fill=1.0)
        return jnp.where(valid, _gather(z, ids) * w, 0.0)


@dataclass_pytree("kind")
@dataclasses.dataclass(frozen=True)
class PoolingChoice:
    """Any of :data:`POOLINGS`, its kind as data: fits of every pooling run one program.

    A fit whose pooling is a choice runs every pooling's solver in one compiled program that
    branches on ``index`` (``jax.lax.switch``, :func:`by_kind`); the branch taken is the
    program of that pooling alone, so the fit is the one it would be with the static pooling.
    :class:`dpp.DPPClassifierCV` fits its pooling candidates this way.

    Attributes:
        index: ``[]`` int32, the pooling's position in :data:`POOLINGS`.
        rho: ``[]`` float32, the generalised mean's parameter (carried unchanged by the others).
    """

    index: jax.Array
    rho: jax.Array
    kind: str = dataclasses.field(default="choice", init=False)

    def branch(self, index: int) -> Pooling:
        """The static pooling of ``POOLINGS[index]`` (the generalised mean with ``rho``)."""
        return make_pooling(POOLINGS[index], self.rho)

    def resolved(self) -> Pooling:
        """The static pooling this choice holds (outside ``jit``: ``index`` must be concrete)."""
        return self.branch(int(self.index))


Pooling = MeanPooling | MaxPooling | GeMPooling
#: Every pooling class by name: the one place a pooling's name is read.
REGISTRY: dict[str, type] = {cls.kind: cls for cls in (MeanPooling, MaxPooling, GeMPooling)}
#: Pooling kinds by name (``DPPClassifier(pooling=...)``), in :data:`REGISTRY`'s order (the
#: index of a :class:`PoolingChoice`).
POOLINGS = tuple(REGISTRY)
#: The paper's pooling.
MEAN = MeanPooling()


def as_choice(pooling: Pooling | PoolingChoice) -> PoolingChoice:
    """``pooling`` as a :class:`PoolingChoice`.

    Mean and max carry the generalised mean's starting ``rho``, which they never read.
    """
    if isinstance(pooling, PoolingChoice):
        return pooling
    rho = pooling.rho if isinstance(pooling, GeMPooling) else gem_rho(GEM_P_START)
    # on the host: jnp.int32(...) would compile a conversion program
    return PoolingChoice(
        jax.device_put(np.int32(POOLINGS.index(pooling.kind))), jax.device_put(np.float32(rho))
    )


def resolved(pooling: Pooling | PoolingChoice) -> Pooling:
    """The static pooling of ``pooling`` (itself unless it is a :class:`PoolingChoice`)."""
    return pooling.resolved() if isinstance(pooling, PoolingChoice) else pooling


def by_kind(run, params):
    """``run(params)``, branching on the pooling's kind when it is a :class:`PoolingChoice`.

    ``params`` is a ``NamedTuple`` with a ``pooling`` field (:class:`dpp.likelihood.Params`),
    and ``run`` returns a ``NamedTuple`` whose ``params`` field is one (the solvers'
    ``FitResult``). With a static pooling this is ``run(params)``. With a choice, one
    ``jax.lax.switch`` holds ``run`` for every pooling of :data:`POOLINGS`, each with its
    static pooling, so a program is compiled once for all of them and the branch taken computes
    exactly what the static pooling's program computes; the result's pooling is a choice again
    (``rho`` as learned by the generalised mean, as given for the others).
    """
    choice = params.pooling
    if not isinstance(choice, PoolingChoice):
        return run(params)

    def branch(index: int):
        def one(p):
            result = run(p._replace(pooling=p.pooling.branch(index)))
            fitted = result.params.pooling
            rho = fitted.rho if isinstance(fitted, GeMPooling) else p.pooling.rho
            pooling = PoolingChoice(p.pooling.index, jnp.asarray(rho, p.pooling.rho.dtype))
            return result._replace(params=result.params._replace(pooling=pooling))

        return one

    return jax.lax.switch(choice.index, [branch(i) for i in range(len(POOLINGS))], params)


def gem_rho(p: float) -> float:
    """The ``rho`` of exponent ``p`` (``1 < p <= GEM_P_MAX``): the inverse of :meth:`GeMPooling.p`.

    Raises:
        ValueError: ``p`` outside ``(1, GEM_P_MAX]``.
    """
    if not 1.0 < p <= GEM_P_MAX:
        raise ValueError(f"a generalised mean needs 1 < p <= {GEM_P_MAX}, got {p}")
    return float(np.log(np.expm1(p - 1.0)))


def make_pooling(kind: str, rho: float | None = None) -> Pooling:
    """The pooling of a name, with ``rho`` for ``gem`` (default: :data:`GEM_P_START`).

    Raises:
        ValueError: an unknown kind, naming the choices.
    """
    if kind not in REGISTRY:
        raise ValueError(f"pooling must be one of {', '.join(POOLINGS)}, got {kind!r}")
    if kind == MEAN.kind:
        return MEAN
    cls = REGISTRY[kind]
    if not cls.parameters:
        return cls()
    rho = gem_rho(GEM_P_START) if rho is None else rho
    if isinstance(rho, jax.Array):
        return cls(rho.astype(jnp.float32))
    return cls(to_device(np.asarray(rho), np.float32))  # eager jnp.float32: a program


def exponent(pooling: Pooling) -> float | None:
    """The generalised mean's ``p`` as a float, ``None`` for the other poolings."""
    return float(_p(pooling)) if isinstance(pooling, GeMPooling) else None


_p = jax.jit(lambda pooling: pooling.p())  # one program where eager ops compiled three


def simplicity(kind: str | None) -> int:
    """The simplicity rank of a pooling by name (larger: simpler; ``None``: the mean's).

    Raises:
        ValueError: an unknown kind, naming the choices.
    """
    if kind is None:
        return MeanPooling.rank
    if kind not in REGISTRY:
        raise ValueError(f"pooling must be one of {', '.join(POOLINGS)}, got {kind!r}")
    return REGISTRY[kind].rank


def _counts(f, ids, num_segments: int):
    """``[S]`` rows per segment (padding rows, id ``S``, not counted), in ``f``'s dtype."""
    valid = (ids < num_segments)[:, None]
    return jax.ops.segment_sum(
        valid.astype(f.dtype)[:, 0], ids, num_segments, indices_are_sorted=True
    )


def _gather(per_segment, ids, fill: float = 0.0):
    """Rows ``per_segment[ids]``; ``ids`` may hold ``num_segments`` (padding): a ``fill`` row."""
    pad = jnp.full((1, per_segment.shape[1]), fill, per_segment.dtype)
    return jnp.concatenate([per_segment, pad])[ids]


def _ties(f, ids, num_segments):
    """``[R, K]`` bool: the rows whose code is their set's largest (padding rows: never)."""
    largest = jax.ops.segment_max(f, ids, num_segments, indices_are_sorted=True)
    return (f == _gather(largest, ids)) & (ids < num_segments)[:, None], largest


def segment_pool(
    pooling: Pooling, f: jax.Array, log_f: jax.Array, ids: jax.Array, num_segments: int
) -> jax.Array:
    """``[S, K]`` pooled codes of segments of rows, by autodiff-ready segment ops.

    Args:
        pooling: the pooling.
        f: ``[R, K]`` codes (rows of any set; ``ids`` sorted).
        log_f: ``[R, K]`` their logarithms (finite; used by ``gem`` only).
        ids: ``[R]`` segment of each row, ``0..S-1``; a row with id ``S`` is padding (dropped).
        num_segments: ``S`` (static).

    Returns:
        ``[S, K]`` codes; 0 for a segment without rows.
    """
    return pooling.pool(f, log_f, ids, num_segments)


def padded_pool(pooling: Pooling, f: jax.Array, log_f: jax.Array, mask: jax.Array) -> jax.Array:
    """``[K]`` pooled codes of one padded set (the neural models' layout).

    Args:
        pooling: the pooling.
        f: ``[M, K]`` codes of the set's rows, padding rows included.
        log_f: ``[M, K]`` their logarithms.
        mask: ``[M]`` bool, the real rows: a prefix (real rows first, as the segment ops need
            sorted ids), at least one.

    Returns:
        ``[K]`` codes, by the rules of :func:`segment_pool`.
    """
    ids = jnp.where(mask, 0, 1).astype(jnp.int32)
    return segment_pool(pooling, f, log_f, ids, 1)[0]


def pooled_cotangent(
    pooling: Pooling,
    f: jax.Array,
    log_f: jax.Array,
    ids: jax.Array,
    z: jax.Array,
    dz: jax.Array,
) -> tuple[jax.Array, jax.Array]:
    r"""``dL/d log f`` of every row from ``dL/dz`` of its set, and ``dL/drho`` (``gem``).

    The hand-written backward pass of :func:`segment_pool` for max and the generalised mean,
    for the fused one-pass gradient of :mod:`dpp.encoding`:

    * max: :math:`\partial L / \partial \log f_{xk} = \frac{\partial L}{\partial z_{nk}}
      f_{xk} [f_{xk} = z_{nk}] / \#\mathrm{ties}_{nk}`;
    * gem: with :math:`w_{xk}` the segment softmax of :math:`p \log f_{xk}`,
      :math:`\partial z_{nk} / \partial \log f_{xk} = z_{nk} w_{xk}` and
      :math:`\partial z_{nk} / \partial p = z_{nk} (\sum_x w_{xk} \log f_{xk} - \log z_{nk}) / p`.

    Args:
        pooling: ``MaxPooling`` or ``GeMPooling``.
        f: ``[R, K]`` codes of the rows.
        log_f: ``[R, K]`` their logarithms.
        ids: ``[R]`` set of each row (``S`` for padding rows).
        z: ``[S, K]`` pooled codes (from :func:`segment_pool`).
        dz: ``[S, K]`` ``dL/dz``.

    Returns:
        ``([R, K] dL/dlog f, [] dL/drho)`` (``dL/drho`` is 0 for max).
    """
    return pooling.cotangent(f, log_f, ids, z, dz)


def segment_shares(
    pooling: Pooling, f: jax.Array, log_f: jax.Array, ids: jax.Array, num_segments: int
) -> jax.Array:
    r"""``[R, K]`` each row's share of its segment's pooled codes: they sum to :func:`segment_pool`.

    What instance-level evidence needs: with shares :math:`s_{xk}` whose sum over a set is its
    pooled code :math:`z_k`, a linear classifier's scores :math:`z \Theta` are the sum over the
    set's vectors of :math:`s_x \Theta` (exactly, up to rounding):

    * mean (eq. 2): :math:`s_{xk} = f_k(x) / M`;
    * max: the largest code, split equally among the rows that hold it (the tie rule of the
      gradient): :math:`s_{xk} = z_k [f_k(x) = z_k] / \#\mathrm{ties}_k`; every other row 0;
    * gem: :math:`s_{xk} = z_k w_{xk}` with :math:`w_{xk}` the segment softmax of
      :math:`p \log f_k(x)` (each row's weight in the generalised mean; :math:`p \to 1` gives
      the mean's shares, :math:`p \to \infty` the max's).

    Args:
        pooling: the pooling.
        f: ``[R, K]`` codes (rows of any set; ``ids`` sorted).
        log_f: ``[R, K]`` their logarithms (finite; used by ``gem`` only).
        ids: ``[R]`` segment of each row, ``0..S-1``; a row with id ``S`` is padding (share 0).
        num_segments: ``S`` (static).

    Returns:
        ``[R, K]`` shares in the dtype of ``f``, non-negative; padding rows 0.
    """
    return pooling.shares(f, log_f, ids, num_segments)
