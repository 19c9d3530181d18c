"""Probe: DPP's coordinate ascent under ``vmap`` against the same fits one after another.

Issue 18 asks for many DPP fits as one compiled program. This probe fits the members of a
cross-validation (``F`` folds x ``L`` lambdas of ``bench.py --cv``'s problem: 200 two-class sets
of 2-13 vectors in 230-D, K = 10, round selection's held-out monitoring) twice: one compiled
``coordinate_ascent`` per member, and ``vmap`` of the same traced loop over all members (shared
vectors in one set of internal units; the fold is a weight mask, the held-out part the
validation weights). It prints both wall times (first call, then compiled) and how far the
batched results are from the sequential ones.

    python scripts/batched_dpp_probe.py [F L]        # default: 1 fold x 6 lambdas
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
from dpp.init import init_log_beta
from dpp.likelihood import Params
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


if __name__ == "__main__":
    main()
