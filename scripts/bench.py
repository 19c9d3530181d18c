"""Benchmarks of the encoder and the likelihood; every figure is printed.

Default: one full-batch evaluation of the DPP log-likelihood and its gradient at the MPEG-7 size
(N = 700 sets of 100-300 vectors, D = 10, K = 200, C = 70): compile time, median wall time per
evaluation after compilation, XLA's memory analysis and the process's peak resident memory.

    python scripts/bench.py [--sets 700 --min-size 100 --max-size 300 --dim 10 --prototypes 200
                             --classes 70 --repeats 20 --per-prototype-beta]

``--scene``: encode the whole Indian Pines scene, every one of its 21,025 pixels as the set of its
window's spectra (shared-pool layout, K = 50 by default), for several window sizes: the number
of memberships T grows with the window while the pool U stays 21,025; the compiled program's
temporary memory follows U * K, not T * K.

    python scripts/bench.py --scene [--prototypes 50 --windows 3 5 7 9]
"""

from __future__ import annotations

import argparse
import resource
import time

import jax
import jax.numpy as jnp
import numpy as np

from dpp.likelihood import Params, objective
from dpp.sets import RaggedSets, one_hot


def make_problem(args) -> tuple[Params, RaggedSets]:
    rng = np.random.default_rng(args.seed)
    sizes = rng.integers(args.min_size, args.max_size + 1, size=args.sets)
    set_ids = np.repeat(np.arange(args.sets, dtype=np.int32), sizes)
    vectors = rng.normal(size=(set_ids.size, args.dim)).astype(np.float32)
    labels = one_hot(rng.integers(0, args.classes, size=args.sets), args.classes)
    sets = RaggedSets.from_flat(vectors, set_ids, labels)
    log_beta = np.zeros(args.prototypes) if args.per_prototype_beta else np.float32(0.0)
    params = Params(
        mu=jnp.asarray(rng.normal(size=(args.prototypes, args.dim)), jnp.float32),
        log_beta=jnp.asarray(log_beta, jnp.float32),
        theta=jnp.asarray(rng.normal(size=(args.prototypes, args.classes)) * 0.1, jnp.float32),
    )
    return params, sets


def _time(compiled, args, repeats):
    jax.block_until_ready(compiled(*args))  # warm-up run
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(compiled(*args))
        times.append(time.perf_counter() - start)
    return np.array(times)


def scene(args) -> None:
    from dpp.datasets.indian_pines import load_indian_pines, window_members
    from dpp.encoding import encode_soft

    data = load_indian_pines(None)  # for the cube; every pixel becomes a set below
    pool = np.asarray(data.sets.vectors)
    pool = (pool - pool.mean(axis=0)) / pool.std(axis=0)
    rows, cols = np.divmod(np.arange(pool.shape[0]), 145)
    rng = np.random.default_rng(args.seed)
    mu = jnp.asarray(pool[rng.choice(pool.shape[0], args.prototypes, replace=False)])
    log_beta = jnp.float32(np.log(1.0 / 50.0))
    encode = jax.jit(encode_soft)
    print(
        f"device: {jax.devices()[0].device_kind} ({jax.default_backend()}), jax {jax.__version__}"
    )
    print(
        f"Indian Pines scene: U = {pool.shape[0]} distinct spectra, D = {pool.shape[1]}, "
        f"K = {args.prototypes}"
    )
    print(
        "window  N sets  T memberships  encode ms (median)  compile s  XLA temp MiB  "
        "U*K MiB  T*K MiB"
    )
    for window in args.windows:
        members = window_members((145, 145), np.stack([rows, cols], 1), window).ravel()
        set_ids = np.repeat(np.arange(pool.shape[0], dtype=np.int32), window * window)
        labels = np.zeros((pool.shape[0], 2), np.float32)
        labels[:, 0] = 1
        sets = RaggedSets.from_flat(pool, set_ids, labels, members=members)
        start = time.perf_counter()
        compiled = encode.lower(sets, mu, log_beta).compile()
        compile_s = time.perf_counter() - start
        times = _time(compiled, (sets, mu, log_beta), args.repeats)
        temp = compiled.memory_analysis().temp_size_in_bytes / 2**20
        uk = pool.shape[0] * args.prototypes * 4 / 2**20
        tk = members.size * args.prototypes * 4 / 2**20
        print(
            f"{window:6d}  {sets.num_sets:6d}  {members.size:13d}  {1e3 * np.median(times):17.1f}"
            f"  {compile_s:9.2f}  {temp:12.1f}  {uk:7.1f}  {tk:7.1f}"
        )
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10
    print(f"peak RSS of the process: {peak_mib:.0f} MiB")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sets", type=int, default=700)
    parser.add_argument("--min-size", type=int, default=100)
    parser.add_argument("--max-size", type=int, default=300)
    parser.add_argument("--dim", type=int, default=10)
    parser.add_argument("--prototypes", type=int, default=200)
    parser.add_argument("--classes", type=int, default=70)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--per-prototype-beta", action="store_true")
    parser.add_argument("--scene", action="store_true", help="encode the Indian Pines scene")
    parser.add_argument("--windows", type=int, nargs="+", default=[3, 5, 7, 9])
    args = parser.parse_args()
    if args.scene:
        if args.prototypes == 200:
            args.prototypes = 50
        scene(args)
        return

    params, sets = make_problem(args)
    value_and_grad = jax.jit(jax.value_and_grad(objective), static_argnames=("l2",))
    print(
        f"device: {jax.devices()[0].device_kind} ({jax.default_backend()}), jax {jax.__version__}"
    )
    print(
        f"problem: N = {sets.num_sets} sets, T = {sets.num_memberships} vectors, D = {sets.dim}, "
        f"K = {args.prototypes}, C = {args.classes}"
    )

    start = time.perf_counter()
    compiled = value_and_grad.lower(params, sets, l2=1e-2).compile()
    compile_s = time.perf_counter() - start
    times = _time(compiled, (params, sets), args.repeats)
    memory = compiled.memory_analysis()
    print(f"compile: {compile_s:.2f} s")
    print(
        f"value_and_grad: median {1e3 * np.median(times):.1f} ms per evaluation "
        f"(min {1e3 * np.min(times):.1f}, max {1e3 * np.max(times):.1f}, {args.repeats} repeats)"
    )
    if memory is not None:
        print(
            f"XLA temp buffers: {memory.temp_size_in_bytes / 2**20:.1f} MiB, "
            f"arguments {memory.argument_size_in_bytes / 2**20:.1f} MiB"
        )
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10
    print(f"peak RSS of the process: {peak_mib:.0f} MiB")


if __name__ == "__main__":
    main()
