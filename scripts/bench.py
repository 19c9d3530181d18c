"""Times one full-batch evaluation of the DPP log-likelihood and its gradient.

Default problem: the MPEG-7 size (N = 700 sets of 100-300 vectors, D = 10, K = 200, C = 70).
Prints the compile time, the median wall time per evaluation after compilation, XLA's memory
analysis of the compiled program and the process's peak resident memory.

    python scripts/bench.py [--sets 700 --min-size 100 --max-size 300 --dim 10 --prototypes 200
                             --classes 70 --repeats 20 --per-prototype-beta]
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
    args = parser.parse_args()

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
    jax.block_until_ready(compiled(params, sets))  # warm-up run
    times = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        jax.block_until_ready(compiled(params, sets))
        times.append(time.perf_counter() - start)
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
