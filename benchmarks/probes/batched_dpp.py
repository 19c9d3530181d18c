"""Probe: DPP's coordinate ascent under ``vmap`` against the same fits one after another.

Issue 18 asks for many DPP fits as one compiled program. This probe fits the members of a
cross-validation (``F`` folds x ``L`` lambdas of ``bench.py --cv``'s problem: 200 two-class sets
of 2-13 vectors in 230-D, K = 10, round selection's held-out monitoring) twice: one compiled
``coordinate_ascent`` per member, and ``vmap`` of the same traced loop over all members (shared
vectors in one set of internal units; the fold is a weight mask, the held-out part the
validation weights). It prints both wall times (first call, then compiled) and how far the
batched results are from the sequential ones.

    python benchmarks/bench.py --probe batched_dpp [F L]        # default: 1 fold x 6 lambdas

``--kernel``: the value and gradient of ``L`` for ``B`` members at once on shared vectors, the
kernel such a program needs (written here, not in the library): every member's squared
distances come from one ``[T, D] x [D, B K]`` contraction about one shared centre, instead of
``vmap`` over the library's objective, which centres the vectors on each member's prototypes
and so gives each member its own copy of them. It prints the largest relative difference from
the library's ``objective`` member by member, and milliseconds per member for several ``B``
against one value and gradient of the library on the packed layout the fits use.

    python benchmarks/bench.py --probe batched_dpp --kernel
"""

from __future__ import annotations

import dataclasses
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
from sklearn.cluster import KMeans

from dpp.datasets.generated import make_generated
from dpp.encoding import LOG_BETA_MAX
from dpp.init import init_log_beta
from dpp.likelihood import Params, objective
from dpp.selection import cv_splits
from dpp.solvers.coordinate_ascent import FitSettings, _ascend, coordinate_ascent
from dpp.units import Normalizer


def main() -> None:
    folds_used = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    lambdas = int(sys.argv[2]) if len(sys.argv) > 2 else 6
    k = 10
    data = make_generated(num_sets=200, dim=230, min_size=2, max_size=13, seed=0)
    normalizer = Normalizer.fit(np.asarray(data.sets.vectors))
    sets = normalizer.sets(data.sets).bucketed()
    vectors, ids, n = np.asarray(sets.vectors), np.asarray(sets.set_ids), data.sets.num_sets
    folds = cv_splits(10, np.asarray(data.sets.labels), 0)[:folds_used]
    l2s = [1e-4, 1e-3, 1e-2, 1e-1, 1.0, 10.0][:lambdas]
    base = FitSettings()
    base = dataclasses.replace(base, prototype_solver=base.prototype_solver.prepare(sets))
    members = []
    for fit_idx, val_idx in folds:
        fit_w, val_w = np.zeros(sets.num_sets, np.float32), np.zeros(sets.num_sets, np.float32)
        fit_w[fit_idx], val_w[val_idx] = 1.0, 1.0
        rows = np.flatnonzero(np.isin(ids, fit_idx))
        centres = KMeans(k, n_init=1, random_state=0).fit(vectors[rows]).cluster_centers_
        log_beta = init_log_beta(vectors[rows], centres, 1.0, False, dtype=np.float32)
        params = Params(jnp.asarray(centres, jnp.float32), log_beta, jnp.zeros((k, 2)))
        for l2 in l2s:
            members.append((params, fit_w, val_w, l2 * len(fit_idx) / n))
    key = jax.random.PRNGKey(0)

    def settings(l2):
        return dataclasses.replace(base, l2=jnp.float32(l2))

    def sequential():
        out = []
        for params, fit_w, val_w, l2 in members:
            train = dataclasses.replace(sets, weights=jnp.asarray(fit_w))
            held = dataclasses.replace(sets, weights=jnp.asarray(val_w))
            out.append(
                jax.block_until_ready(coordinate_ascent(params, train, settings(l2), key, held))
            )
        return out

    stacked = (
        jax.tree.map(lambda *a: jnp.stack(a), *[m[0] for m in members]),
        jnp.stack([jnp.asarray(m[1]) for m in members]),
        jnp.stack([jnp.asarray(m[2]) for m in members]),
        jax.tree.map(lambda *a: jnp.stack(a), *[settings(m[3]) for m in members]),
    )

    @jax.jit
    def batched(params, fit_w, val_w, member_settings):
        def one(p, w, v, s):
            train, held = dataclasses.replace(sets, weights=w), dataclasses.replace(sets, weights=v)
            return _ascend(p, train, s, key, held, None, joint=False)

        return jax.vmap(one)(params, fit_w, val_w, member_settings)

    times = {}
    for name, fun in (("sequential", sequential), ("batched", lambda: batched(*stacked))):
        walls = []
        for _ in range(2):
            start = time.perf_counter()
            result = jax.block_until_ready(fun())
            walls.append(time.perf_counter() - start)
        times[name] = (walls, result)
    seq, bat = times["sequential"][1], times["batched"][1]
    rounds = np.array([int(r.num_rounds) for r in seq])
    final = np.array([np.asarray(r.history)[r.num_rounds] for r in seq])
    b_rounds = np.asarray(bat.num_rounds)
    b_final = np.asarray(bat.history)[np.arange(len(members)), b_rounds]
    print(f"{folds_used} fold(s) x {lambdas} lambdas = {len(members)} fits, K = {k}")
    for name, (walls, _) in times.items():
        print(f"{name:10s}: first call {walls[0]:.2f} s, compiled {walls[1]:.2f} s")
    print(f"rounds sequential {rounds.tolist()}, batched {b_rounds.tolist()}")
    gap = np.max(np.abs(b_final - final) / np.abs(final))
    print(f"largest relative difference of the final L: {gap:.2e}")


def shared_objective(mu, log_beta, theta, x, set_ids, labels, weights, l2):
    """``[B]`` penalised log-likelihoods of ``B`` members on the same ``[T, D]`` vectors.

    ``mu [B, K, D]``, ``log_beta [B]``, ``theta [B, K, C]``, ``weights [B, N]`` (a fold is a
    weight mask), ``l2 [B]``; one shared ``beta`` per member, the logits as eq. (3) in
    :func:`dpp.encoding.soft_assignment` (nearest prototype's logit 0).
    """
    b, k, d = mu.shape
    n = labels.shape[0]
    c = jax.lax.stop_gradient(jnp.mean(mu, axis=(0, 1)))  # one centre for every member
    xc, mc = x - c, mu - c
    cross = (xc @ mc.reshape(b * k, d).T).reshape(-1, b, k)  # the one wide contraction
    d2 = jnp.sum(xc * xc, axis=1)[:, None, None] - 2.0 * cross + jnp.sum(mc * mc, axis=2)
    d2 = jnp.maximum(d2, 0.0)
    beta = jnp.exp(jnp.minimum(log_beta, LOG_BETA_MAX))[None, :, None]
    e = jnp.exp(-beta * (d2 - jnp.min(d2, axis=2, keepdims=True)))
    s = (e / jnp.sum(e, axis=2, keepdims=True)).reshape(-1, b * k)
    counts = jax.ops.segment_sum(jnp.ones_like(set_ids, x.dtype), set_ids, num_segments=n)
    z = jax.ops.segment_sum(s, set_ids, num_segments=n) / jnp.maximum(counts, 1.0)[:, None]
    logits = jnp.einsum("nbk,bkc->bnc", z.reshape(n, b, k), theta)
    per_set = jnp.sum(labels * jax.nn.log_softmax(logits, axis=2), axis=2)  # [B, N]
    return jnp.sum(weights * per_set, axis=1) - l2 * jnp.sum(theta * theta, axis=(1, 2))


def kernel() -> None:
    """``--kernel``: the shared-vector batched value and gradient against the library's."""
    k = 10
    data = make_generated(num_sets=200, dim=230, min_size=2, max_size=13, seed=0)
    normalizer = Normalizer.fit(np.asarray(data.sets.vectors))
    sets = normalizer.sets(data.sets)
    x, ids, labels = sets.vectors, sets.set_ids, sets.labels
    rng = np.random.default_rng(0)
    folds = cv_splits(10, np.asarray(labels), 0)

    def members(count):
        fold_w = np.zeros((count, sets.num_sets), np.float32)
        for i in range(count):
            fold_w[i, folds[i % len(folds)][0]] = 1.0
        rows = rng.choice(x.shape[0], (count, k))
        mu = jnp.asarray(np.asarray(x)[rows] + 0.1 * rng.normal(size=(count, k, x.shape[1])))
        return (
            mu.astype(x.dtype),
            jnp.asarray(rng.normal(size=count) - 3.0, x.dtype),
            jnp.asarray(0.1 * rng.normal(size=(count, k, labels.shape[1])), x.dtype),
            jnp.asarray(fold_w),
            jnp.asarray(np.geomspace(1e-4, 10.0, count), x.dtype),
        )

    def batched_value_and_grad(mu, log_beta, theta, w, l2):
        def total(mu, log_beta, theta):
            values = shared_objective(mu, log_beta, theta, x, ids, labels, w, l2)
            return jnp.sum(values), values

        (_, values), grads = jax.value_and_grad(total, argnums=(0, 1, 2), has_aux=True)(
            mu, log_beta, theta
        )
        return values, grads

    batched = jax.jit(batched_value_and_grad)
    packed = sets.bucketed()
    single = jax.jit(
        jax.value_and_grad(
            lambda p, w, l2: objective(p, dataclasses.replace(packed, weights=w), l2)
        )
    )
    pad = packed.num_sets - sets.num_sets

    def padded(w):
        return jnp.concatenate([w, jnp.zeros(pad, w.dtype)])

    mu, log_beta, theta, w, l2 = members(6)  # agreement, member by member
    values, grads = batched(mu, log_beta, theta, w, l2)
    gaps = []
    for i in range(6):
        value, grad = single(Params(mu[i], log_beta[i], theta[i]), padded(w[i]), l2[i])
        for got, want in zip((values[i], *(g[i] for g in grads)), (value, *grad), strict=True):
            gaps.append(float(jnp.max(jnp.abs(got - want)) / (jnp.max(jnp.abs(want)) + 1e-30)))
    print(
        f"{x.shape[0]} vectors (T), D = {x.shape[1]}, K = {k}, {sets.num_sets} sets; largest "
        f"relative difference from the library's objective (value, d/dmu, d/dlog beta, "
        f"d/dTheta, 6 members): {max(gaps):.1e}"
    )
    params = Params(mu[0], log_beta[0], theta[0])
    one = _median_ms(single, params, padded(w[0]), l2[0])
    rows = packed.vectors.shape[0]
    print(f"library value+grad, one member, packed layout ({rows} rows): {one:.3f} ms")
    for count in (1, 6, 60, 240):
        args = members(count)
        ms = _median_ms(batched, *args) / count
        print(f"shared-vector kernel, B = {count:3d}: {ms:.3f} ms a member ({one / ms:.1f}x)")


def _median_ms(fun, *args, repeats: int = 30) -> float:
    jax.block_until_ready(fun(*args))
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fun(*args))
        times.append(time.perf_counter() - start)
    return 1e3 * float(np.median(times))


if __name__ == "__main__":
    if "--kernel" in sys.argv:
        kernel()
    else:
        main()
