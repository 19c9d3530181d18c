"""Full-batch quasi-Newton minimisers behind one interface.

``minimize(fun, x0, settings)`` minimises a smooth scalar function of a pytree. Backends:

* ``lbfgs_optax`` (default): ``optax.lbfgs`` with its zoom line search, the loop in
  ``jax.lax.while_loop``, stopping when the gradient norm falls below ``tol``.
* ``lbfgs_jaxopt``: ``jaxopt.LBFGS`` (zoom line search).
* ``bfgs_jaxopt``: ``jaxopt.BFGS``; dense ``P x P`` inverse Hessian, so for small parameter
  counts only.

All are traceable: call them inside ``jit`` (the solvers in :mod:`dpp.solvers` do).
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable
from typing import Any, ClassVar, NamedTuple

import jax
import jax.numpy as jnp
import optax
import optax.tree_utils as otu

from dpp import params as check
from dpp.hyper import check_concrete
from dpp.pytrees import dataclass_pytree

BACKENDS = ("lbfgs_optax", "lbfgs_jaxopt", "bfgs_jaxopt")


@dataclass_pytree("backend", "max_iter", "memory_size", "max_linesearch_steps")
@dataclasses.dataclass(frozen=True)
class LBFGSSettings:
    """Settings of a full-batch minimiser (a pytree: ``tol`` is traced, the rest static).

    Attributes:
        backend: one of :data:`BACKENDS`.
        max_iter: maximum number of iterations.
        tol: stop when the l2 norm of the gradient is below this.
        memory_size: L-BFGS history length (ignored by BFGS).
        max_linesearch_steps: maximum zoom line-search evaluations per iteration.
    """

    backend: str = "lbfgs_optax"
    max_iter: int = 100
    tol: float = 1e-6
    memory_size: int = 10
    max_linesearch_steps: int = 20

    #: The rules of the fields (also the optimizer options' rules, :mod:`dpp.solvers.options`).
    RULES: ClassVar[dict[str, check.Rule]] = {
        "max_iter": check.Int(1),
        "tol": check.Real(low=0),
        "memory_size": check.Int(1),
        "max_linesearch_steps": check.Int(1),
    }

    def __post_init__(self):
        if self.backend not in BACKENDS:
            raise ValueError(f"unknown optimizer backend {self.backend!r}; choose from {BACKENDS}")
        check_concrete(self, self.RULES)

    #: Whether every step sees all sets (so the sets may be padded to buckets and sharded).
    full_batch: ClassVar[bool] = True

    def prepare(self, sets) -> LBFGSSettings:
        """The settings for a fit on ``sets`` (nothing depends on them here)."""
        del sets
        return self

    def minimize_loss(self, loss, batch_loss, x0, sets, key) -> MinimizeResult:
        """Minimises ``loss(x)`` over all sets (``batch_loss``, ``sets`` and ``key`` unused).

        Args:
            loss: ``x -> scalar`` on all sets.
            batch_loss: ``(x, batch, scale) -> scalar`` on a mini-batch (for :class:`AdamSettings`).
            x0: starting point (a pytree).
            sets: the training sets.
            key: PRNG key.
        """
        del batch_loss, sets, key
        return minimize(loss, x0, self)


class MinimizeResult(NamedTuple):
    """Output of :func:`minimize`.

    Attributes:
        params: the minimiser (same pytree structure as ``x0``).
        value: scalar ``fun(params)``.
        num_iter: int32 scalar, iterations taken.
        grad_norm: scalar l2 norm of the gradient at ``params`` (NaN where unknown).
        linesearch_failures: int32 scalar, iterations whose line search found no step meeting
            the sufficient-decrease condition (optax: counted per iteration; jaxopt: 0 or 1, the
            state of the last iteration; mini-batch: 0).
    """

    params: Any
    value: jax.Array
    num_iter: jax.Array
    grad_norm: jax.Array
    linesearch_failures: jax.Array


def minimize(fun: Callable[[Any], jax.Array], x0: Any, settings: LBFGSSettings) -> MinimizeResult:
    """Minimises ``fun`` from ``x0`` with the backend named in ``settings``.

    Args:
        fun: smooth scalar function of a pytree of float arrays (may close over traced data).
        x0: initial pytree.
        settings: backend and stopping rule.

    Returns:
        :class:`MinimizeResult`.

    Raises:
        ValueError: for an unknown backend (at construction of ``settings``).
    """
    if settings.backend == "lbfgs_optax":
        return _lbfgs_optax(fun, x0, settings)
    return _jaxopt(fun, x0, settings)


def _lbfgs_optax(fun, x0, s: LBFGSSettings) -> MinimizeResult:
    opt = optax.lbfgs(
        memory_size=s.memory_size,
        linesearch=optax.scale_by_zoom_linesearch(max_linesearch_steps=s.max_linesearch_steps),
    )
    value_and_grad = optax.value_and_grad_from_state(fun)

    def step(carry):
        x, state, failures = carry
        value, grad = value_and_grad(x, state=state)
        updates, state = opt.update(grad, state, x, value=value, grad=grad, value_fn=fun)
        failed = otu.tree_get(state, "decrease_error") > 0
        return optax.apply_updates(x, updates), state, failures + failed.astype(jnp.int32)

    def keep_going(carry):
        _, state, _ = carry
        count = otu.tree_get(state, "count")
        grad_norm = otu.tree_norm(otu.tree_get(state, "grad"))
        value = otu.tree_get(state, "value")
        running = (count < s.max_iter) & (grad_norm >= s.tol) & jnp.isfinite(value)
        return (count == 0) | running

    x, state, failures = jax.lax.while_loop(keep_going, step, (x0, opt.init(x0), jnp.int32(0)))
    return MinimizeResult(
        x,
        otu.tree_get(state, "value"),
        otu.tree_get(state, "count"),
        otu.tree_norm(otu.tree_get(state, "grad")),
        failures,
    )


def _jaxopt(fun, x0, s: LBFGSSettings) -> MinimizeResult:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # jaxopt is archived and warns on import
        import jaxopt
    common = dict(
        fun=fun, maxiter=s.max_iter, tol=s.tol, maxls=s.max_linesearch_steps, implicit_diff=False
    )
    if s.backend == "lbfgs_jaxopt":
        solver = jaxopt.LBFGS(history_size=s.memory_size, **common)
    else:
        solver = jaxopt.BFGS(**common)
    x, state = solver.run(x0)
    failed = getattr(state, "failed_linesearch", jnp.array(False))
    grad_norm = otu.tree_norm(state.grad) if hasattr(state, "grad") else jnp.array(jnp.nan)
    return MinimizeResult(x, state.value, state.iter_num, grad_norm, failed.astype(jnp.int32))
