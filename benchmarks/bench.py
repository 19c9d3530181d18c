"""Benchmarks of the encoder and the likelihood; every figure is printed.

Default: one full-batch evaluation of the DPP log-likelihood and its gradient at the MPEG-7 size
(N = 700 sets of 100-300 vectors, D = 10, K = 200, C = 70): compile time, median wall time per
evaluation after compilation, XLA's memory analysis and the process's peak resident memory.

    python benchmarks/bench.py [--sets 700 --min-size 100 --max-size 300 --dim 10 --prototypes 200
                             --classes 70 --repeats 20 --per-prototype-beta]

Printed side by side: dpp's one-pass value and gradient (sets packed into blocks of whole sets),
its two-pass custom VJP, a straightforward ``jit(value_and_grad)`` with ``segment_sum``, and the
floor: the forward codes and their per-set sums alone; medians of ``--repeats`` and the ratios.

``--cv``: ``GridSearchCV(DPPClassifier(), 6 lambdas, cv=10)`` on 200 generated two-class sets of
2-13 vectors in 230 dimensions: wall time and the number of XLA compilations; where one compiled
fit's time goes; and the arithmetic floor of the 60 fold fits: their (mu, beta) iterations times
one value and gradient, and times an ideal batched pass (every member's two contractions as one
wide matmul, members in lockstep).

``--select``: ``DPPClassifierCV`` over K in {8, 16, 32, 64} x 6 lambdas (mean pooling), 5 folds,
on 100 generated bags of 2-40 instances in 166 dimensions (shaped like a multiple-instance
benchmark), for the standard prototype (its folds' Theta-steps batched) and for DPP; each beside
the same fold fits one by one in the same run, for the ratio.

``--table1``: ``python experiments/run.py experiment=table1_mpeg7`` (5 trials) in this process
with an empty compilation cache: wall time, accuracies and compilations.

``--peer``: ``DPPClassifierCV()`` on 150 generated two-class sets of 2-40 vectors in 30-D with
``n_jobs=1`` and ``n_jobs=-1`` (each cold, then both warm: the parallel efficiency), beside
``AttentionMILClassifier()`` trained once on them, in the same process: compile counts, time
per fit, the ratios.

``--jobs``: 12 independent ``DPPClassifier`` fits (3 poolings x 4 ``l2``) on the ``--peer``
problem, programs compiled first: one by one, in joblib threads and in joblib's process backend
(loky), with the speed-up and whether each fit is the same to the bit.

``--cache``: the ``--peer`` selection in two fresh processes that share a persistent
compilation cache (``DPP_COMPILATION_CACHE``, :func:`dpp.use_compilation_cache`), cold then warm:
wall time, programs compiled and loaded, coordinate ascent's among them.

``--together``: the fold x ``l2`` fits of a ``DPPClassifierCV`` over DPP on an embedding (5 folds
x 4 ``l2``, K = 16, 256-128-64, max pooling) on the ``--peer`` problem: one by one, batched one
member at a time (the CPU's default) and vectorised, each cold and warm in the same process,
with the largest difference of each batched member from its fit alone.

``--stopping``: rounds, fit seconds (compiled), held-out log-likelihood and accuracy of DPP
under several stopping rules, on generated problems.

``--latency`` (issue 54): what a user waits for on small data, each case cold and then warm in
two fresh processes that share nothing but the persistent compilation cache, on by default
(a temporary ``$XDG_CACHE_HOME``): the README example (``DPPClassifierCV(DPPClassifier(
n_prototypes=4))`` on 150 sets of 2-13 vectors in 5-D, predictions on 50 and then 5 new sets, a
second selection on 150 other sets of the same kind, ``AttentionMILClassifier()`` on the
first sets in the same process, then the selection on the raw vectors alone,
``DPPClassifierCV(**RAW_VECTORS)`` (the paper's model, no embedded member), and the
suite's ``attention_mil_cv``, its learning rate and weight decay chosen by 3-fold CV), the
raw-vector selection first in its own processes (then ``AttentionMILClassifier()``), and a
10-fold loop of ``DPPClassifierCV()`` over a generated multiple-instance problem (100 bags of
5-30 vectors in 10-D). Per step: programs compiled, their compile seconds, the step's seconds;
the selection's ratio to attention MIL's fit, and the warm process's to the cold one's.

``--scene``: encode the whole Indian Pines scene, every one of its 21,025 pixels as the set of its
window's spectra (shared-pool layout, K = 50 by default), for several window sizes: the number
of memberships T grows with the window while the pool U stays 21,025; the compiled program's
temporary memory follows U * K, not T * K.

    python benchmarks/bench.py --scene [--prototypes 50 --windows 3 5 7 9]

``--scale``: value and gradient of the full-batch likelihood for T = 1e5, 1e6 and 1e7 vectors
(D = 10, K = 200, C = 70, sets of 100-300 vectors), each size in a fresh process: compile
seconds, median seconds per evaluation, seconds per million vectors (flat: linear in T) and
the compiled program's temporary memory (XLA's memory analysis: the working set beyond its
inputs and outputs) and the process's peak resident memory (host copies of the generated data
included) against T*D, N*K and T*K floats (the memory a non-blocked encoder would need for its
codes); then one epoch of mini-batch Adam (the
(mu, beta)-step of ``optimizer=adam``, 64 sets a batch) on the largest problem.

    python benchmarks/bench.py --scale [--sizes 1e5 1e6 1e7 --repeats 3]

``--floor`` (issue 81): the arithmetic floor of one value-and-gradient pass (its flops and
bytes, at this machine's measured float32 matmul rate and memory bandwidth) beside dpp's
compiled pass, at the MPEG-7 size and the big-bag size (100 bags of 1,000-2,000 vectors in
256-D, K = 16): the ratio dpp / floor.

    python benchmarks/bench.py --floor [--repeats 20]

``--chain`` (issue 81): the sequential chain of a plain ``DPPClassifier()`` fit (its early
stopping and its refit), counted on the device as it runs: (mu, beta)-steps, their quasi-Newton
iterations and objective evaluations (value and gradient: one each per line-search step), the
Theta-steps' alike, the acceptance passes, the codes the Theta-steps start from and the
held-out scores, on the README's sets, the digit bags, a witness task and the MPEG-7 size.
Counted by a callback in each evaluation (:func:`jax.debug.callback`, once per member of a
batched fit, padded iterations included: the work done), so its programs are this script's own.

    python benchmarks/bench.py --chain

``--probe NAME [ARGS]``: one of the one-off probes kept in ``benchmarks/probes/`` (each with its
own arguments, ``--probe NAME --help``): ``candidates`` (which candidates ``DPPClassifierCV()``
considers, on the suite), ``defaults`` (which default keeps a plain ``DPPClassifier()`` out of
saturation), ``saturation`` (stopping rules and a prior on beta on the witness tasks),
``batched_dpp`` (coordinate ascent under ``vmap``, and the batched kernel, ``--kernel``),
``beside`` (whether the embedded member's thread in a selection pays) and
``witness_outside`` (issue 53's evidence targets on witness problems outside the suite).
"""

from __future__ import annotations

import argparse
import importlib.util
import resource
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from dpp.encoding import encode_soft
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

    data = load_indian_pines(None)  # for the cube; every pixel becomes a set below
    pool = np.asarray(data.sets.vectors)
    pool = (pool - pool.mean(axis=0)) / pool.std(axis=0)
    rows, cols = np.divmod(np.arange(pool.shape[0]), 145)
    rng = np.random.default_rng(args.seed)
    mu = jnp.asarray(pool[rng.choice(pool.shape[0], args.prototypes, replace=False)])
    log_beta = jnp.float32(np.log(1.0 / 50.0))
    encode = jax.jit(encode_soft)
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


def _all_codes(params: Params, sets: RaggedSets) -> jax.Array:
    """All ``T x K`` eq. (3) codes at once (no blocks)."""
    x, mu = sets.vectors, params.mu
    d2 = jnp.sum(x * x, 1)[:, None] - 2.0 * x @ mu.T + jnp.sum(mu * mu, 1)[None, :]
    return jax.nn.softmax(-jnp.exp(params.log_beta) * d2, axis=1)


def naive_objective(params: Params, sets: RaggedSets, l2) -> jax.Array:
    """The straightforward ``L``: all ``T x K`` codes at once, ``segment_sum``, autodiff."""
    x, f = sets.vectors, _all_codes(params, sets)
    counts = jax.ops.segment_sum(jnp.ones_like(sets.set_ids, x.dtype), sets.set_ids, sets.num_sets)
    z = jax.ops.segment_sum(f, sets.set_ids, sets.num_sets) / counts[:, None]
    log_p = jax.nn.log_softmax(z @ params.theta, axis=1)
    return jnp.sum(sets.weights * jnp.sum(sets.labels * log_p, 1)) - l2 * jnp.sum(params.theta**2)


def floor_pass(params: Params, sets: RaggedSets) -> jax.Array:
    """The floor: distances, exp, normalisation and the per-set column sums, forward only."""
    return jax.ops.segment_sum(_all_codes(params, sets), sets.set_ids, sets.num_sets)


def encoder(args) -> None:
    """Dpp's value and gradient against the straightforward one and the floor pass."""
    params, sets = make_problem(args)
    print(
        f"problem: N = {sets.num_sets} sets, T = {sets.num_memberships} vectors, D = {sets.dim}, "
        f"K = {args.prototypes}, C = {args.classes}"
    )
    l2 = jnp.float32(1e-2)
    packed = sets.bucketed()
    candidates = {
        "dpp (one pass, packed sets)": (
            jax.jit(jax.value_and_grad(objective)),
            (params, packed, l2),
        ),
        "dpp (two passes, custom VJP)": (
            jax.jit(jax.value_and_grad(objective)),
            (params, sets, l2),
        ),
        "straightforward jit(value_and_grad)": (
            jax.jit(jax.value_and_grad(naive_objective)),
            (params, sets, l2),
        ),
        "floor (forward codes + sums)": (jax.jit(floor_pass), (params, sets)),
        "floor, blocked (dpp's forward pass)": (
            jax.jit(encode_soft),
            (sets, params.mu, params.log_beta),
        ),
    }
    medians = {}
    print(f"{'':40s} {'median ms':>10s} {'min ms':>8s} {'compile s':>10s} {'XLA temp MiB':>13s}")
    for name, (fun, fun_args) in candidates.items():
        start = time.perf_counter()
        compiled = fun.lower(*fun_args).compile()
        compile_s = time.perf_counter() - start
        times = _time(compiled, fun_args, args.repeats)
        memory = compiled.memory_analysis()
        temp = memory.temp_size_in_bytes / 2**20 if memory is not None else float("nan")
        medians[name] = np.median(times)
        print(
            f"{name:40s} {1e3 * medians[name]:10.1f} {1e3 * np.min(times):8.1f} "
            f"{compile_s:10.2f} {temp:13.1f}"
        )
    names = list(candidates)
    dpp_ms, naive = medians[names[0]], medians[names[2]]
    floor = min(medians[names[3]], medians[names[4]])
    speedup, over_floor = naive / dpp_ms, dpp_ms / floor
    print(
        f"straightforward / dpp = {speedup:.2f}x (target >= 3): "
        f"{'met' if speedup >= 3 else 'NOT met'}"
    )
    print(
        f"dpp / floor = {over_floor:.2f}x (target <= 1.25): "
        f"{'met' if over_floor <= 1.25 else 'NOT met'}"
    )
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10
    print(f"peak RSS of the process: {peak_mib:.0f} MiB")


def cross_validation(args) -> None:
    """GridSearchCV(DPPClassifier(), 6 lambdas, cv=10) on 200 sets of 2-13 vectors in 230-D."""
    from sklearn.model_selection import GridSearchCV

    from dpp import DPPClassifier
    from dpp.datasets.generated import make_generated
    from dpp.experiment.compilation import CompileCounter

    data = make_generated(num_sets=200, dim=230, min_size=2, max_size=13, seed=args.seed)
    vectors, sizes = np.asarray(data.sets.vectors), data.sets.set_sizes()
    X = np.split(vectors, np.cumsum(sizes)[:-1])
    y = np.argmax(np.asarray(data.sets.labels), axis=1)
    grid = {"l2": [1e-4, 1e-3, 1e-2, 1e-1, 1.0, 10.0]}
    print(
        f"problem: {len(X)} two-class sets of {sizes.min()}-{sizes.max()} vectors "
        f"(T = {sizes.sum()}) in D = {vectors.shape[1]}; "
        f"GridSearchCV(DPPClassifier(random_state=0), l2 in {grid['l2']}, cv=10): "
        f"{6 * 10 + 1} fits, persistent compilation cache off"
    )
    iterations: dict[float, list[int]] = {}  # l2 -> (mu, beta) iterations of its fold fits

    def accuracy(est, X_val, y_val):  # GridSearchCV's default score; records the fit's work
        steps = est.fit_report_.prototypes.steps
        iterations.setdefault(est.l2, []).append(int(sum(steps["prototype_iters"])))
        return est.score(X_val, y_val)

    search = GridSearchCV(DPPClassifier(random_state=0), grid, cv=10, scoring=accuracy)
    start = time.perf_counter()
    with CompileCounter() as counter:
        search.fit(X, y)
    wall = time.perf_counter() - start
    print(f"best {search.best_params_}, CV accuracy {search.best_score_:.3f}")
    print(f"compilation: {counter.summary()}; slowest:")
    for name, seconds, times in counter.slowest():
        print(f"  {name}: {seconds:.1f} s in {times} compilation(s)")
    print(
        f"wall {wall:.1f} s ({wall / 61:.2f} s per fit) (target <= 15 s): "
        f"{'met' if wall <= 15 else 'NOT met'}"
    )
    eval_s = _fit_cost(data.sets, search.best_params_["l2"])
    _batched_floor(data.sets, iterations, eval_s)


def _batched_floor(sets: RaggedSets, iterations: dict[float, list[int]], eval_s: float) -> None:
    """The arithmetic of the fold fits' (mu, beta) iterations, one by one and ideally batched.

    The ideal batched program evaluates all members of a lockstep group in one pass whose cost
    is its two contractions at the width of the whole batch (``[T, D] x [D, B K]`` and back),
    nothing else; a group runs as many iterations as its slowest member.
    """
    from dpp.init import kmeans_centres

    per_l2 = [np.asarray(v) for v in iterations.values()]
    total, members = int(sum(v.sum() for v in per_l2)), sum(v.size for v in per_l2)
    layout = sets.bucketed()
    x = layout.vectors
    k = 10
    mu = jnp.asarray(kmeans_centres(np.asarray(sets.vectors), k, 0), x.dtype)
    wide = jnp.tile(mu, (members, 1))  # [B K, D]: every member's prototypes side by side
    forward = jax.jit(lambda x, w: x @ w.T)
    backward = jax.jit(lambda x, g: g.T @ x)
    g = jnp.ones((x.shape[0], wide.shape[0]), x.dtype)
    pass_s = np.median(_time(forward, (x, wide), 20)) + np.median(_time(backward, (x, g), 20))
    member_s = pass_s / members
    by_l2 = sum(int(v.max()) * v.size for v in per_l2)
    together = int(max(v.max() for v in per_l2)) * members
    print(
        f"the {members} fold fits: {total} (mu, beta) iterations, {total * eval_s:.1f} s of "
        f"value+grad one by one ({1e3 * eval_s:.2f} ms each, at least one per iteration)"
    )
    print(
        f"ideal batched pass ({members} members' contractions as one, {layout.vectors.shape[0]}"
        f" rows): {1e3 * member_s:.3f} ms a member; lockstep per l2: {by_l2} member "
        f"iterations, {by_l2 * member_s:.1f} s; all {members} in one lockstep: {together}, "
        f"{together * member_s:.1f} s (before line searches, Theta-steps, k-means, compiling)"
    )


def _sequential_cv(base, sets, l2s, ks, cv: int) -> float:
    """The grid of :func:`select` fitted one candidate and fold at a time, as GridSearchCV does."""
    from sklearn.base import clone

    from dpp.metrics import weighted_score
    from dpp.selection import cv_splits

    weights = np.asarray(sets.weights, np.float64)
    scores = []
    for k in ks:
        for fit_idx, val_idx in cv_splits(cv, np.asarray(sets.labels), 0):
            part, held = sets.subset(np.sort(fit_idx)), sets.subset(np.sort(val_idx))
            share = weights[fit_idx].sum() / weights.sum()
            for l2 in l2s:
                est = clone(base).set_params(n_prototypes=k, l2=l2 * share).fit(part)
                log_p = est.predict_log_proba(held)
                scores.append(weighted_score(log_p, held.labels, held.weights))
    return float(np.mean(scores))


def select(args) -> None:
    """DPPClassifierCV over K in {8, 16, 32, 64} x 6 lambdas, 5 folds, on MIL-shaped sets."""
    import warnings

    from dpp import DPPClassifier, DPPClassifierCV, StandardPrototypeClassifier
    from dpp.datasets.generated import make_generated
    from dpp.errors import FitWarning
    from dpp.experiment.compilation import CompileCounter

    sets = make_generated(num_sets=100, dim=166, min_size=2, max_size=40, seed=args.seed).sets
    sizes = sets.set_sizes()
    ks, l2s = [8, 16, 32, 64], [1e-4, 1e-3, 1e-2, 1e-1, 1.0, 10.0]
    print(
        f"problem: {sets.num_sets} two-class bags of {sizes.min()}-{sizes.max()} instances "
        f"(T = {sizes.sum()}) in D = {sets.dim}; K in {ks} x l2 in {l2s}, cv=5, "
        "no grid extension; persistent compilation cache off"
    )
    warnings.simplefilter("ignore", FitWarning)  # saturated candidates: counted, not listed
    for name, base, again in (
        ("standard prototype", StandardPrototypeClassifier(random_state=0), True),
        ("DPP", DPPClassifier(random_state=0), False),
    ):
        walls = []
        for attempt in range(2 if again else 1):
            search = DPPClassifierCV(  # the paper's mean pooling: the fits one by one use it
                base, l2s=l2s, n_prototypes=ks, pooling=("mean",), cv=5, max_extensions=0
            )
            start = time.perf_counter()
            with CompileCounter() as counter:
                search.fit(sets)
            walls.append(time.perf_counter() - start)
            print(
                f"{name}: DPPClassifierCV {'(compiled) ' if attempt else ''}{walls[-1]:.1f} s "
                f"({counter.summary()}); best {search.best_params_}, rounds "
                f"{search.best_rounds_}, CV log-likelihood {search.best_score_:.4f}, "
                f"{search.best_position_}"
            )
            if attempt == 0:
                start = time.perf_counter()
                mean = _sequential_cv(base, sets, l2s, ks, 5)
                sequential = time.perf_counter() - start
                print(
                    f"{name}: the same {len(ks) * len(l2s) * 5} fold fits one by one "
                    f"(GridSearchCV's way, no round selection): {sequential:.1f} s "
                    f"(mean fold score {mean:.4f}); ratio {sequential / walls[-1]:.2f}"
                )
    wall = walls[0]
    print(f"DPP selection wall {wall:.1f} s (target <= 30 s): {'met' if wall <= 30 else 'NOT met'}")


def peer(args) -> None:
    """``DPPClassifierCV()`` with ``n_jobs=1`` and ``-1`` beside ``AttentionMILClassifier()``.

    150 generated two-class sets of 2-40 vectors in 30-D (a multiple-instance problem), the
    estimators' defaults, in one process: the selection cold (nothing compiled before) with
    ``n_jobs=1``, then again with ``n_jobs=-1`` (its programs compiled by the first), then
    attention MIL trained once, cold. Prints each one's time and compile count, the
    selection's per-fit time (its wall over its fits) and the parallel efficiency (the speed-up
    over the cores used), and the ratios the issue set as targets.
    """
    import joblib

    from dpp import AttentionMILClassifier, DPPClassifierCV
    from dpp.datasets.generated import make_generated
    from dpp.experiment.compilation import CompileCounter

    sets = make_generated(num_sets=150, dim=30, min_size=2, max_size=40, seed=args.seed).sets
    sizes = sets.set_sizes()
    cores = joblib.cpu_count()
    print(
        f"problem: {sets.num_sets} two-class sets of {sizes.min()}-{sizes.max()} vectors "
        f"(T = {sizes.sum()}) in D = {sets.dim}; defaults, persistent compilation cache off, "
        f"{cores} cores"
    )
    walls, probas = {}, {}

    def run(name, est, cold):
        if cold:
            jax.clear_caches()  # nothing compiled before, as in a fresh process
        start = time.perf_counter()
        with CompileCounter() as counter:
            est.fit(sets)
        walls[name] = time.perf_counter() - start
        extra = ""
        if isinstance(est, DPPClassifierCV):
            probas[name] = est.predict_proba(sets)
            results = est.cv_results_
            folds = sum(k.startswith("split") and k.endswith("_test_score") for k in results)
            fits = len(results["params"]) * folds + 1
            extra = f"; {fits} fits, {1e3 * walls[name] / fits:.0f} ms per fit"
        print(
            f"{name}, {'cold' if cold else 'warm'}: {walls[name]:.1f} s ({counter.summary()}; "
            f"coordinate_ascent programs {counter.programs('coordinate_ascent')}{extra})"
        )

    run("DPPClassifierCV(n_jobs=1)", DPPClassifierCV(n_jobs=1), cold=True)
    run("DPPClassifierCV(n_jobs=-1)", DPPClassifierCV(n_jobs=-1), cold=True)
    run("warm n_jobs=1", DPPClassifierCV(n_jobs=1), cold=False)
    run("warm n_jobs=-1", DPPClassifierCV(n_jobs=-1), cold=False)
    run("AttentionMILClassifier()", AttentionMILClassifier(random_state=0), cold=True)
    same = all(np.array_equal(probas["DPPClassifierCV(n_jobs=1)"], v) for v in probas.values())
    speedup = walls["warm n_jobs=1"] / walls["warm n_jobs=-1"]
    print(
        f"warm, compiled programs only: n_jobs=-1 is {speedup:.2f}x n_jobs=1 on {cores} cores "
        f"(parallel efficiency {speedup / cores:.0%}); every run's probabilities the same to "
        f"the bit: {same}"
    )
    mil = walls["AttentionMILClassifier()"]
    for name, target in (("DPPClassifierCV(n_jobs=1)", 3.0), ("DPPClassifierCV(n_jobs=-1)", 2.0)):
        ratio = walls[name] / mil
        print(
            f"{name} / AttentionMILClassifier(), both cold = {ratio:.2f} (target <= {target:g}): "
            f"{'met' if ratio <= target else 'NOT met'}"
        )


def jobs(args) -> None:
    """12 independent DPP fits (3 poolings x 4 l2) one by one, in joblib threads and processes."""
    import joblib

    from dpp import DPPClassifier
    from dpp.datasets.generated import make_generated

    sets = make_generated(num_sets=150, dim=30, min_size=2, max_size=40, seed=args.seed).sets
    grid = [(p, l2) for p in ("mean", "max", "gem") for l2 in (1e-3, 1e-2, 1e-1, 1.0)]

    def fit(pooling, l2):
        est = DPPClassifier(pooling=pooling, l2=l2, validation_fraction=0.0, random_state=0)
        return est.fit(sets).predict_proba(sets)

    for pooling in ("mean", "max", "gem"):  # every program compiled in this process first
        fit(pooling, 1.0)
    start = time.perf_counter()
    alone = [fit(*unit) for unit in grid]
    one = time.perf_counter() - start
    print(f"{len(grid)} DPPClassifier fits on the --peer problem, programs compiled first")
    print(f"one by one: {one:.2f} s")
    for backend in ("threading", "loky"):
        start = time.perf_counter()
        out = joblib.Parallel(n_jobs=-1, backend=backend)(joblib.delayed(fit)(*u) for u in grid)
        wall = time.perf_counter() - start
        same = all(np.array_equal(a, b) for a, b in zip(alone, out, strict=True))
        print(
            f"joblib {backend}, n_jobs=-1 ({joblib.cpu_count()} cores): {wall:.2f} s "
            f"({one / wall:.2f}x); the same probabilities to the bit: {same}"
        )


def cache(args) -> None:
    """The ``--peer`` selection in two processes sharing a persistent cache: cold, then warm."""
    import json
    import os
    import subprocess
    import sys
    import tempfile

    with tempfile.TemporaryDirectory() as directory:
        env = {**os.environ, "DPP_COMPILATION_CACHE": directory}
        print(f"persistent compilation cache: {directory} (DPP_COMPILATION_CACHE), empty at first")
        for label in ("first process (cold)", "second process (warm)"):
            out = subprocess.run(
                [sys.executable, __file__, "--cache-child", "--seed", str(args.seed)],
                env=env, check=True, capture_output=True, text=True,
            ).stdout  # fmt: skip
            r = json.loads(out.strip().splitlines()[-1])
            print(
                f"{label}: DPPClassifierCV() {r['wall']:.1f} s; {r['compiled']} programs compiled "
                f"({r['compile_s']:.1f} s), {r['loaded']} loaded from the cache; coordinate_ascent "
                f"compiled {r['ca_compiled']}, loaded {r['ca_loaded']}"
            )


def cache_child(args) -> None:
    """One process of ``--cache``: the selection, its counts as one JSON line."""
    import json
    import warnings

    import dpp  # noqa: F401  (reads DPP_COMPILATION_CACHE)
    from dpp import DPPClassifierCV
    from dpp.datasets.generated import make_generated
    from dpp.experiment.compilation import CompileCounter

    warnings.simplefilter("ignore")
    sets = make_generated(num_sets=150, dim=30, min_size=2, max_size=40, seed=args.seed).sets
    start = time.perf_counter()
    with CompileCounter() as counter:
        DPPClassifierCV().fit(sets)
    wall = time.perf_counter() - start
    compile_s = sum(d for d, hit in zip(counter.durations, counter.loaded, strict=True) if not hit)
    print(
        json.dumps(
            {
                "wall": wall,
                "compiled": counter.loaded.count(False),
                "compile_s": compile_s,
                "loaded": counter.loaded.count(True),
                "ca_compiled": counter.programs("coordinate_ascent", loaded=False),
                "ca_loaded": counter.programs("coordinate_ascent", loaded=True),
            }
        )
    )


def latency(args) -> None:
    """``--latency``: the README example and a 10-fold loop, cold then warm, in fresh processes."""
    import json
    import os
    import subprocess
    import sys
    import tempfile

    drop = ("DPP_COMPILATION_CACHE", "DPP_CACHE_DIR")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    runs = {}
    for case in ("readme", "raw", "folds"):
        with tempfile.TemporaryDirectory() as home:  # each case's cache empty at first
            env["XDG_CACHE_HOME"] = home  # the default per-user cache
            for label in ("cold", "warm"):
                out = subprocess.run(
                    [sys.executable, __file__, "--latency-child", case],
                    env=env, check=True, capture_output=True, text=True,
                ).stdout  # fmt: skip
                runs[case, label] = json.loads(out.strip().splitlines()[-1])
    print("| case | step | cold: programs / compile s / s | warm: programs / compile s / s |")
    print("|---|---|---|---|")
    for case in ("readme", "raw", "folds"):
        for step in runs[case, "cold"]:
            cells = [
                "{programs} / {compile_s:.1f} / {seconds:.1f}".format(**runs[case, label][step])
                for label in ("cold", "warm")
            ]
            print(f"| {case} | {step} | {cells[0]} | {cells[1]} |")
    for label in ("cold", "warm"):
        r = runs["readme", label]
        for name in ("selection", "selection on the raw vectors"):
            ratio = r[name]["seconds"] / r["attention_mil_fit"]["seconds"]
            print(f"{label}: the README {name} takes {ratio:.2f}x one attention-MIL fit")
        raw = runs["raw", label]
        ratio = raw["selection on the raw vectors"]["seconds"] / raw["attention_mil_fit"]["seconds"]
        print(f"{label}: the raw-vector selection first takes {ratio:.2f}x one attention-MIL fit")
    raw_step = ("raw", "selection on the raw vectors")
    for case, step in (("readme", "selection"), raw_step, ("folds", "10 folds")):
        cold, warm = (runs[case, label][step]["seconds"] for label in ("cold", "warm"))
        print(f"{case} {step}: the second process takes {warm / cold:.2f}x the first's time")


def latency_child(case: str) -> None:
    """One process of ``--latency``: each step's programs compiled, compile and wall seconds."""
    import json
    import warnings

    import numpy as np

    import dpp
    from dpp.datasets.suite import make_witness
    from dpp.experiment.compilation import CompileCounter

    warnings.simplefilter("ignore")
    steps = {}

    def step(name, work):
        start = time.perf_counter()
        with CompileCounter() as counter:
            result = work()
        compiled = [d for d, hit in zip(counter.durations, counter.loaded, strict=True) if not hit]
        steps[name] = {
            "programs": len(compiled), "compile_s": sum(compiled),
            "seconds": time.perf_counter() - start,
        }  # fmt: skip
        return result

    if case == "raw":  # the paper's model alone first in its process, then attention MIL
        rng = np.random.default_rng(0)
        X = [rng.normal(size=(rng.integers(2, 14), 5)) + (i % 2) for i in range(200)]
        y = np.where(np.arange(200) % 2, "dog", "cat")
        raw = dpp.DPPClassifierCV(dpp.DPPClassifier(n_prototypes=4), **dpp.estimators.RAW_VECTORS)
        step("selection on the raw vectors", lambda: raw.fit(X[:150], y[:150]))
        step("attention_mil_fit", lambda: dpp.AttentionMILClassifier().fit(X[:150], y[:150]))
    elif case == "readme":
        rng = np.random.default_rng(0)
        X = [rng.normal(size=(rng.integers(2, 14), 5)) + (i % 2) for i in range(200)]
        y = np.where(np.arange(200) % 2, "dog", "cat")
        other = np.random.default_rng(1)
        X2 = [other.normal(size=(other.integers(2, 14), 5)) + (i % 2) for i in range(150)]
        make = lambda: dpp.DPPClassifierCV(dpp.DPPClassifier(n_prototypes=4))  # noqa: E731
        clf = step("selection", lambda: make().fit(X[:150], y[:150]))
        step("predict 50 sets", lambda: clf.predict(X[150:]))
        step("predict 5 sets", lambda: clf.predict(X[150:155]))
        step("second selection", lambda: make().fit(X2, y[:150]))
        step("attention_mil_fit", lambda: dpp.AttentionMILClassifier().fit(X[:150], y[:150]))
        raw = lambda: dpp.DPPClassifierCV(  # noqa: E731 (the default before issue 52's member)
            dpp.DPPClassifier(n_prototypes=4), **dpp.estimators.RAW_VECTORS
        )
        step("selection on the raw vectors", lambda: raw().fit(X[:150], y[:150]))
        from lab.methods import make_method

        from dpp.sets import RaggedSets, one_hot

        labelled = RaggedSets.from_list(X[:150], one_hot((y[:150] == "dog").astype(int), 2))
        selected = make_method("attention_mil_cv", 4, 0)  # rate x decay by 3-fold CV
        step("attention MIL, rate and decay selected", lambda: selected.fit(labelled))
    else:
        from sklearn.model_selection import StratifiedKFold

        sets = make_witness(num_sets=100, dim=10, min_size=5, max_size=30, seed=0).sets
        labels = np.asarray(sets.labels).argmax(1)
        folds = StratifiedKFold(10, shuffle=True, random_state=0).split(labels, labels)

        def loop():
            for train, test in folds:
                dpp.DPPClassifierCV().fit(sets.subset(train)).predict(sets.subset(test))

        step("10 folds", loop)
    print(json.dumps(steps))


def together(args) -> None:
    """A selection's Adam-trained fits one by one, batched in turn and vectorised (issue 34)."""
    import warnings

    from sklearn.base import clone

    from dpp import EmbeddedDPPClassifier
    from dpp.datasets.generated import make_generated
    from dpp.estimators.adam import fit_together
    from dpp.experiment.compilation import CompileCounter
    from dpp.selection import cv_splits

    warnings.simplefilter("ignore")  # the members' FitWarnings (stalled folds) are not timed
    sets = make_generated(num_sets=150, dim=30, min_size=2, max_size=40, seed=args.seed).sets
    base = EmbeddedDPPClassifier(
        n_prototypes=16, embedding=(256, 128, 64), pooling="max", random_state=0
    )
    folds = cv_splits(5, np.asarray(sets.labels), 0, None)
    training, estimators = [], []
    for fit_idx, _ in folds:
        part = sets.subset(np.sort(fit_idx))
        for l2 in (1e-3, 1e-2, 1e-1, 1.0):
            training.append(part)
            estimators.append(clone(base).set_params(l2=l2 * part.num_sets / sets.num_sets))
    print(
        f"{len(estimators)} fits (5 folds x 4 l2) of {base!r} on {sets.num_sets} sets "
        f"(D = {sets.dim}); each cold (nothing compiled before) and warm"
    )

    def one_by_one():
        return [clone(e).fit(part) for e, part in zip(estimators, training, strict=True)]

    runs = {
        "one by one": one_by_one,
        "batched, chunk=1": lambda: fit_together([clone(e) for e in estimators], training, 1),
        f"vectorised, chunk={len(estimators)}": lambda: fit_together(
            [clone(e) for e in estimators], training, len(estimators)
        ),
    }
    fitted, walls = {}, {}
    for name, run in runs.items():
        jax.clear_caches()
        for state in ("cold", "warm"):
            start = time.perf_counter()
            with CompileCounter() as counter:
                fitted[name] = run()
            walls[name, state] = time.perf_counter() - start
            print(f"{name:>22} {state}: {walls[name, state]:6.1f} s ({counter.summary()})")
    alone = fitted["one by one"]
    epochs = [e.fit_report_.early_stopping.monitored for e in alone]
    print(f"epochs monitored per fit: {min(epochs)}-{max(epochs)} (mean {np.mean(epochs):.1f})")
    for name in list(runs)[1:]:
        diff = max(
            float(np.max(np.abs(a.predict_proba(sets) - b.predict_proba(sets))))
            for a, b in zip(alone, fitted[name], strict=True)
        )
        same = sum(
            a.fit_report_.rounds == b.fit_report_.rounds
            for a, b in zip(alone, fitted[name], strict=True)
        )
        print(
            f"{name}: warm {walls['one by one', 'warm'] / walls[name, 'warm']:.2f}x the fits "
            f"one by one; largest probability difference from a fit alone {diff:.2e}; "
            f"{same}/{len(alone)} chose the same epochs"
        )


def _fit_cost(sets: RaggedSets, l2: float) -> float:
    """Where one compiled fit's time goes; returns the seconds of one value and gradient."""
    from dpp import DPPClassifier

    est = DPPClassifier(random_state=0, l2=l2).fit(sets)  # compiled by the search above
    start = time.perf_counter()
    est = DPPClassifier(random_state=0, l2=l2).fit(sets)
    fit_s = time.perf_counter() - start
    steps = est.fit_report_.prototypes.steps
    proto, theta = sum(steps["prototype_iters"]), sum(steps["theta_iters"])
    model = est.model_
    layout = model.normalizer.sets(sets).bucketed()
    value_and_grad = jax.jit(jax.value_and_grad(lambda p, s: objective(p, s, l2)))
    eval_s = float(np.median(_time(value_and_grad, (model.params, layout), 50)))
    rows, dim = layout.vectors.shape
    k = model.mu.shape[0]
    flops = 4 * rows * dim * k  # x.mu^T forward, sum_x s (x - c) backward: 2 T D K each
    print(
        f"one fit at l2 = {l2:g} (compiled): {fit_s:.2f} s, {est.fit_report_.rounds} rounds, "
        f"{proto} (mu, beta) + {theta} Theta iterations"
    )
    print(
        f"one value+grad of L on its layout ({rows} rows x D = {dim}, K = {k}): "
        f"{1e3 * eval_s:.2f} ms, {flops / eval_s / 1e9:.1f} GFLOP/s; "
        f"(mu, beta) iterations x one value+grad = {proto * eval_s:.2f} s of the fit"
    )
    return eval_s


def stopping(args) -> None:
    """Cost and benefit of the stopping rule: rounds, fit seconds and held-out results by tol."""
    from sklearn.model_selection import train_test_split

    from dpp import DPPClassifier
    from dpp.datasets.generated import make_generated

    problems = {
        "230-D, sets of 2-13": dict(num_sets=400, dim=230, min_size=2, max_size=13),
        "10-D, sets of 1-20": dict(num_sets=400, dim=10, min_size=1, max_size=20),
        "30-D, 4 classes, sets of 5-50": dict(
            num_sets=400, dim=30, min_size=5, max_size=50, num_classes=4
        ),
    }
    rules = {  # validation_fraction=0: rounds by tol (or the cap) alone
        "tol=1e-5": dict(tol=1e-5, validation_fraction=0.0),
        "tol=1e-4": dict(tol=1e-4, validation_fraction=0.0),
        "tol=1e-3": dict(tol=1e-3, validation_fraction=0.0),
        "tol=1e-2": dict(tol=1e-2, validation_fraction=0.0),
        "1 round": dict(max_rounds=1, validation_fraction=0.0),
        "early stopping (20 %)": dict(validation_fraction=0.2),
    }
    print(f"{'rule':25s} {'problem':32s} rounds  fit s  test LL  acc %")
    for problem, kwargs in problems.items():
        data = make_generated(seed=args.seed, **kwargs)
        vectors, sizes = np.asarray(data.sets.vectors), data.sets.set_sizes()
        X = np.split(vectors, np.cumsum(sizes)[:-1])
        y = np.argmax(np.asarray(data.sets.labels), axis=1)
        idx_train, idx_test = train_test_split(
            np.arange(len(X)), test_size=0.5, random_state=args.seed, stratify=y
        )
        X_train, X_test = [X[i] for i in idx_train], [X[i] for i in idx_test]
        for rule, options in rules.items():
            clf = DPPClassifier(random_state=args.seed, **options)
            clf.fit(X_train, y[idx_train])  # compiles
            start = time.perf_counter()
            clf.fit(X_train, y[idx_train])
            seconds = time.perf_counter() - start
            log_p = clf.predict_log_proba(X_test)
            test_ll = float(np.mean(log_p[np.arange(len(X_test)), y[idx_test]]))
            acc = 100 * clf.score(X_test, y[idx_test])
            rounds = clf.n_iter_
            print(f"{rule:25s} {problem:32s} {rounds:6d} {seconds:6.2f} {test_ll:8.4f} {acc:6.1f}")


def table1(args) -> None:
    """``python experiments/run.py experiment=table1_mpeg7`` with an empty compilation cache."""
    import tempfile
    from pathlib import Path

    from hydra import compose, initialize_config_dir

    from dpp.experiment.compilation import CompileCounter
    from dpp.experiment.runner import run

    root = Path(__file__).resolve().parents[1]
    with tempfile.TemporaryDirectory() as tmp:
        overrides = [
            "experiment=table1_mpeg7",
            "~baselines.attention_mil",  # the networks take 5-6 min a fit on a CPU: not timed here
            "~baselines.deep_sets",
            f"compilation_cache={tmp}/jax",
        ]
        with initialize_config_dir(config_dir=str(root / "configs"), version_base="1.3"):
            cfg = compose("config", overrides=overrides)
        print(f"Table 1: {' '.join(overrides[:3])}, compilation cache empty ({tmp}/jax)")
        start = time.perf_counter()
        with CompileCounter() as counter:
            results = run(cfg, output_dir=Path(tmp) / "run")
        wall = time.perf_counter() - start
    for method, row in results["summary"].items():
        acc, loglik = row["accuracy"], row["test_log_likelihood"]
        print(
            f"{method:10s} accuracy {100 * acc['mean']:.2f} +- {100 * acc['std']:.2f} %  "
            f"test log-lik {loglik['mean']:.4f}"
        )
    print("(paper: DPP 85.49 +- 1.43 %, standard 82.20 +- 0.98 %)")
    programs = counter.programs("coordinate_ascent")
    print(f"coordinate_ascent programs compiled: {programs} (target 1)")
    print(f"compilation: {counter.summary()}; slowest:")
    for name, seconds, times in counter.slowest():
        print(f"  {name}: {seconds:.1f} s in {times} compilation(s)")
    print(f"wall {wall:.1f} s (target <= 100 s): {'met' if wall <= 100 else 'NOT met'}")


def _scale_one(args) -> None:
    """One size of ``--scale`` (a child process, so its peak memory is its own)."""
    import json

    from dpp.solvers.coordinate_ascent import FitSettings, traced_prototype_step
    from dpp.solvers.minibatch import AdamSettings, batch_capacity

    total = int(float(args.scale_one))
    mean_size = (args.min_size + args.max_size) / 2
    args.sets = max(int(round(total / mean_size)), 1)
    t0 = time.perf_counter()
    params, sets = make_problem(args)
    packed = sets.bucketed()
    setup = time.perf_counter() - t0
    value_and_grad = jax.jit(jax.value_and_grad(lambda p, s: objective(p, s, 1e-2)))
    t0 = time.perf_counter()
    compiled = value_and_grad.lower(params, packed).compile()
    compile_s = time.perf_counter() - t0
    times = _time(compiled, (params, packed), args.repeats)
    row = {
        "T": int(sets.num_memberships),
        "N": int(sets.num_sets),
        "T_padded": int(packed.num_memberships),
        "setup_s": setup,
        "compile_s": compile_s,
        "median_s": float(np.median(times)),
        "xla_temp_mb": compiled.memory_analysis().temp_size_in_bytes / 2**20,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }
    if args.adam:
        batch = 64
        adam = AdamSettings(batch_size=batch, epochs=1, capacity=batch_capacity(sets, batch))
        settings = FitSettings(prototype_solver=adam)
        key = jax.random.key(0)
        step = jax.jit(traced_prototype_step).lower(params, sets, settings, key).compile()
        epoch = _time(lambda *a: step(*a)[0], (params, sets, settings, jax.random.key(0)), 1)
        row["adam_epoch_s"] = float(epoch[0])
        row["adam_batches"] = -(-sets.num_sets // batch)
        row["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print("SCALE " + json.dumps(row), flush=True)


def scale(args) -> None:
    import json
    import subprocess
    import sys

    rows = []
    for i, size in enumerate(args.sizes):
        command = [
            sys.executable, __file__, "--scale-one", str(size), "--repeats", str(args.repeats),
            "--dim", str(args.dim), "--prototypes", str(args.prototypes),
            "--classes", str(args.classes), "--min-size", str(args.min_size),
            "--max-size", str(args.max_size),
        ]  # fmt: skip
        if i == len(args.sizes) - 1:
            command.append("--adam")
        out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
        row = json.loads(next(line for line in out.splitlines() if line.startswith("SCALE "))[6:])
        rows.append(row)
        print(f"T = {row['T']:.0e} done: {row['median_s']:.3f} s per evaluation", flush=True)
    floats = 4 / 2**20  # MB per float32
    k, d = args.prototypes, args.dim
    print(
        f"\nvalue + gradient, D = {d}, K = {k}, C = {args.classes}, sets of "
        f"{args.min_size}-{args.max_size} vectors (median of {args.repeats}; fresh process each)\n"
    )
    print("| T | N | compile s | s / evaluation | s per 1e6 vectors | XLA temp MB | peak RSS MB "
          "| T*D MB | N*K MB | T*K MB (codes, never held) |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['T']:,} | {r['N']:,} | {r['compile_s']:.2f} | {r['median_s']:.3f} "
            f"| {1e6 * r['median_s'] / r['T']:.3f} | {r['xla_temp_mb']:,.1f} "
            f"| {r['peak_rss_mb']:,.0f} "
            f"| {r['T'] * d * floats:,.0f} | {r['N'] * k * floats:,.1f} "
            f"| {r['T'] * k * floats:,.0f} |"
        )
    last = rows[-1]
    if "adam_epoch_s" in last:
        print(
            f"\nmini-batch Adam (64 sets a batch, {last['adam_batches']:,} batches) on T = "
            f"{last['T']:,}: {last['adam_epoch_s']:.2f} s per epoch (compiled; one epoch)"
        )
    first = rows[0]
    growth = (last["median_s"] / first["median_s"]) / (last["T"] / first["T"])
    print(
        f"time grows {growth:.2f}x as fast as T between the smallest and largest size (1 = linear)"
    )


#: The one-off probes of ``--probe`` (``benchmarks/probes/<name>.py``, each with its ``main``).
PROBES = ("batched_dpp", "beside", "candidates", "defaults", "saturation", "witness_outside")


def probe(name: str, argv: list[str]) -> None:
    """Runs ``benchmarks/probes/<name>.py``'s ``main`` with ``argv`` as its own arguments."""
    if name not in PROBES:
        raise SystemExit(f"bench.py --probe: unknown probe {name!r}; choose from {list(PROBES)}")
    path = Path(__file__).resolve().parent / "probes" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"dpp_probe_{name}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses in a probe look their module up
    spec.loader.exec_module(module)
    sys.argv = [f"bench.py --probe {name}", *argv]
    module.main()


#: The sizes of ``--floor``: (name, sets, min size, max size, D, K, C).
FLOOR_SIZES = (
    ("MPEG-7 (Table 1)", 700, 100, 300, 10, 200, 70),
    ("big bags (100 of 1,000-2,000 in 256-D)", 100, 1000, 2000, 256, 16, 2),
)  # fmt: skip


def _throughput(args) -> tuple[float, float]:
    """This machine's measured float32 matmul FLOP/s and memory bytes/s (jitted, medians)."""
    n = 2048
    a = jnp.asarray(np.random.default_rng(0).normal(size=(n, n)), jnp.float32)
    matmul = jax.jit(lambda x, y: x @ y).lower(a, a).compile()
    flops = 2.0 * n**3 / np.median(_time(matmul, (a, a), args.repeats))
    big = jnp.ones((2**26,), jnp.float32)  # 256 MiB, read once (a new output would page-fault)
    total = jax.jit(jnp.sum).lower(big).compile()
    bandwidth = big.size * 4 / np.median(_time(total, (big,), args.repeats))
    return flops, bandwidth


def floor(args) -> None:
    """The arithmetic floor of one value-and-gradient pass beside dpp's, at two sizes.

    Flops: the pass's two ``T x K x D`` contractions (the distances ``x mu^T`` forward, the
    gradient ``codes^T x`` backward: ``4 T K D``), plus ``10 T K`` for the elementwise work on
    the codes (exp, normalisation, pooling, their backward) and ``4 N K C`` for the classifier,
    all at the measured matmul rate (a floor: elementwise work runs slower than a matmul).
    Bytes: the ``[T, D]`` float32 vectors read twice (forward and backward; codes kept nowhere),
    at the measured memory bandwidth. The floor is the larger of the two times; dpp's is the
    median of its compiled ``value_and_grad(objective)`` over packed sets.
    """
    flops_s, bytes_s = _throughput(args)
    print(f"measured: float32 matmul {flops_s / 1e9:.1f} GFLOP/s (2048 x 2048), memory "
          f"{bytes_s / 1e9:.1f} GB/s (a 256 MiB array summed)")  # fmt: skip
    print(f"{'size':40s} {'T':>9s} {'GFLOP':>7s} {'MB':>7s} {'floor ms':>9s} {'dpp ms':>8s} "
          f"{'dpp / floor':>11s}")  # fmt: skip
    value_and_grad = jax.jit(jax.value_and_grad(objective))
    for name, n, lo, hi, d, k, c in FLOOR_SIZES:
        problem = argparse.Namespace(
            sets=n, min_size=lo, max_size=hi, dim=d, prototypes=k, classes=c, seed=args.seed,
            per_prototype_beta=False,
        )  # fmt: skip
        params, sets = make_problem(problem)
        packed, l2 = sets.bucketed(), jnp.float32(1e-2)
        compiled = value_and_grad.lower(params, packed, l2).compile()
        dpp_s = float(np.median(_time(compiled, (params, packed, l2), args.repeats)))
        t = sets.num_memberships
        flops = 4.0 * t * k * d + 10.0 * t * k + 4.0 * n * k * c
        nbytes = 2.0 * t * d * 4
        floor_s = max(flops / flops_s, nbytes / bytes_s)
        print(f"{name:40s} {t:9d} {flops / 1e9:7.2f} {nbytes / 1e6:7.1f} {1e3 * floor_s:9.2f} "
              f"{1e3 * dpp_s:8.2f} {dpp_s / floor_s:10.1f}x")  # fmt: skip


#: What ``--chain`` counts: (tag, function of :mod:`dpp.solvers.coordinate_ascent` it wraps).
CHAIN_COUNTED = (
    ("L", "fit_objective"),  # (mu, beta)-evaluations, acceptances and each fit's start value
    ("accept", "accept_if_higher"),
    ("theta", "classifier_objective"),
    ("codes", "encode_soft"),
    ("validation", "packed_log_likelihood"),
    ("validation", "mean_log_likelihood"),
)


def _chain_problems(seed: int):
    """``--chain``'s problems: (name, sets, labels, estimator parameters)."""
    from dpp.datasets.suite import make_digit_bags, make_witness

    rng = np.random.default_rng(seed)
    readme = [rng.normal(size=(rng.integers(2, 14), 5)) + (i % 2) for i in range(150)]
    problems = [("README (150 sets, 5-D, K = 4)", readme, np.arange(150) % 2, {"n_prototypes": 4})]
    for name, data in (
        ("digit bags (100 bags of 8x8 digits)", make_digit_bags(seed=seed)),
        ("witness_d10_r10 (200 sets)", make_witness(seed=seed)),
    ):
        sizes = data.sets.set_sizes()
        X = np.split(np.asarray(data.sets.vectors), np.cumsum(sizes)[:-1])
        problems.append((name, X, np.argmax(np.asarray(data.sets.labels), 1), {}))
    params, sets = make_problem(
        argparse.Namespace(sets=700, min_size=100, max_size=300, dim=10, prototypes=200,
                           classes=70, seed=seed, per_prototype_beta=False)
    )  # fmt: skip
    sizes = sets.set_sizes()
    X = np.split(np.asarray(sets.vectors), np.cumsum(sizes)[:-1])
    y = np.argmax(np.asarray(sets.labels), 1)
    problems.append(("MPEG-7 size (700 sets, K = 200, C = 70)", X, y, {"n_prototypes": 200}))
    return problems


def chain(args) -> None:
    """The sequential chain of a plain fit, counted (module docstring, ``--chain``)."""
    from collections import Counter
    from functools import partial

    from dpp import DPPClassifier

    ca = importlib.import_module("dpp.solvers.coordinate_ascent")  # the module, not its function
    counts: Counter = Counter()

    def add(tag, amount=1):
        counts[tag] += int(amount)

    def counted(tag, fn):
        def wrapped(*a, **k):
            out = fn(*a, **k)
            value = out[1] if tag == "accept" else out  # accept: (params, value, accepted)
            jax.debug.callback(partial(add, tag), jnp.zeros_like(jnp.sum(value), jnp.int32) + 1)
            return out

        return wrapped

    for tag, name in CHAIN_COUNTED:
        setattr(ca, name, counted(tag, getattr(ca, name)))
    step, theta_step = ca.traced_prototype_step, ca.traced_theta_step

    def mu_step(*a, **k):  # one per round: its iterations
        out = step(*a, **k)
        jax.debug.callback(partial(add, "mu_iters"), out[1].num_iter)
        jax.debug.callback(partial(add, "mu_steps"), out[1].num_iter * 0 + 1)
        cap = getattr(a[2].prototype_solver, "max_iter", None)  # a[2]: the FitSettings
        if cap is not None:
            jax.debug.callback(partial(add, "mu_capped"), out[1].num_iter >= cap)
        return out

    def th_step(*a, **k):
        out = theta_step(*a, **k)
        jax.debug.callback(partial(add, "theta_iters"), out[1].num_iter)
        jax.debug.callback(partial(add, "theta_steps"), out[1].num_iter * 0 + 1)
        return out

    ca.traced_prototype_step, ca.traced_theta_step = mu_step, th_step
    print("per fit of DPPClassifier(random_state=0) (its early stopping and refit), all members:")
    print(f"{'problem':42s} {'mu st':>6s} {'it/st':>6s} {'ev/it':>6s} {'capped':>6s} "
          f"{'th st':>6s} {'it/st':>6s} {'ev/it':>6s} {'accept':>6s} {'codes':>6s} {'valid':>6s} "
          f"{'fwd+bwd':>7s} {'fwd':>5s} {'s':>6s}")  # fmt: skip
    for name, X, y, options in _chain_problems(args.seed):
        counts.clear()
        start = time.perf_counter()
        DPPClassifier(random_state=0, **options).fit(X, y)
        jax.effects_barrier()
        seconds = time.perf_counter() - start
        c = dict(counts)
        mu_s, th_s = max(c.get("mu_steps", 0), 1), max(c.get("theta_steps", 0), 1)
        mu_it, th_it = max(c.get("mu_iters", 0), 1), max(c.get("theta_iters", 0), 1)
        starts = c.get("theta_steps", 0) - c.get("mu_steps", 0)  # each ascent's first Theta-step
        mu_evals = c.get("L", 0) - c.get("accept", 0) - starts  # one start value an ascent
        forward = c.get("accept", 0) + c.get("codes", 0) + starts
        print(f"{name:42s} {mu_s:6d} {mu_it / mu_s:6.1f} {mu_evals / mu_it:6.2f} "
              f"{c.get('mu_capped', 0):6d} {th_s:6d} "
              f"{th_it / th_s:6.1f} {c.get('theta', 0) / th_it:6.2f} {c.get('accept', 0):6d} "
              f"{c.get('codes', 0):6d} {c.get('validation', 0):6d} {mu_evals:7d} {forward:5d} "
              f"{seconds:6.1f}")  # fmt: skip
    print(
        "mu st / th st: (mu, beta)- and Theta-steps (each fit's first Theta-step included); "
        "it/st: quasi-Newton iterations a step; ev/it: objective evaluations an iteration "
        "(the line search's); capped: (mu, beta)-steps that ran to their iteration cap "
        "(`optimizer_options['max_iter']`, 50); accept: passes that score a step (forward); "
        "codes: the codes a Theta-step starts from (forward); valid: held-out scores; "
        "fwd+bwd: value-and-gradient passes over the training vectors, fwd: forward-only "
        "ones (with each fit's start value); s: the fit's seconds, this script's programs "
        "compiled in it"
    )


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--probe":
        if len(sys.argv) < 3:
            raise SystemExit(f"bench.py --probe NAME [ARGS]: NAME one of {list(PROBES)}")
        probe(sys.argv[2], sys.argv[3:])
        return
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
    parser.add_argument("--cv", action="store_true", help="GridSearchCV over 6 lambdas, cv=10")
    parser.add_argument("--table1", action="store_true", help="Table 1 (5 trials), cold cache")
    parser.add_argument("--select", action="store_true", help="DPPClassifierCV over 4 K x 6 l2")
    parser.add_argument("--peer", action="store_true", help="DPPClassifierCV vs attention MIL")
    parser.add_argument("--together", action="store_true", help="batched Adam-trained fits")
    parser.add_argument("--cache", action="store_true", help="persistent cache: cold, then warm")
    parser.add_argument("--jobs", action="store_true", help="12 fits: threads against processes")
    parser.add_argument("--cache-child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--latency", action="store_true", help="a first fit: cold, then warm")
    parser.add_argument("--latency-child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--stopping", action="store_true", help="cost of the stopping rules")
    parser.add_argument("--scale", action="store_true", help="T = 1e5, 1e6, 1e7: time, memory")
    parser.add_argument("--sizes", type=float, nargs="+", default=[1e5, 1e6, 1e7])
    parser.add_argument("--scale-one", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--adam", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument(
        "--floor", action="store_true", help="value and gradient against the arithmetic floor"
    )
    parser.add_argument("--chain", action="store_true", help="a fit's steps and evaluations")
    args = parser.parse_args()
    print(
        f"device: {jax.devices()[0].device_kind} ({jax.default_backend()}), jax {jax.__version__}"
    )
    if args.scene:
        if args.prototypes == 200:
            args.prototypes = 50
        scene(args)
    elif args.cv:
        cross_validation(args)
    elif args.table1:
        table1(args)
    elif args.select:
        select(args)
    elif args.cache:
        cache(args)
    elif args.jobs:
        jobs(args)
    elif args.cache_child:
        cache_child(args)
    elif args.latency:
        latency(args)
    elif args.latency_child is not None:
        latency_child(args.latency_child)
    elif args.peer:
        peer(args)
    elif args.together:
        together(args)
    elif args.stopping:
        stopping(args)
    elif args.scale_one is not None:
        _scale_one(args)
    elif args.floor:
        floor(args)
    elif args.chain:
        chain(args)
    elif args.scale:
        if args.repeats == 20:
            args.repeats = 3
        scale(args)
    else:
        encoder(args)


if __name__ == "__main__":
    main()
