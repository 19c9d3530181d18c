"""Fit times of the embedded DPP, DPP and attention MIL on whatever device JAX runs on.

``--digit-bags``: ``EmbeddedDPPClassifier`` (mean pooling without dropout, as before issue 52;
its default, the generalised mean with dropout 0.5; max pooling with dropout 0.5) and
``AttentionMILClassifier()`` on draw 0 of two digit-bag tasks (the suite's K = 16,
256-128-64): the first fit (compilation included) and a second fit on the same bags (compiled),
with the test accuracy. ``--big-bags``: 100 witness bags of 1,000-2,000 vectors in 256-D (a
held-out 25 % scored), ``DPPClassifier(n_prototypes=16)`` against ``AttentionMILClassifier()``,
first and second fit and the accuracy of each. ``--kmeans``: the k-means start of those big
bags' training vectors (K = 16), and of 120,000 clustered vectors in 10-D with K = 200
(MPEG-7's shape), scikit-learn's on the host (``dpp.init.kmeans_centres``)
against the device's (``dpp.init.device_kmeans``), first and second run and the inertia of
each. ``--host-share``: where a compiled ``DPPClassifier(n_prototypes=16)`` fit on those 100
big bags goes (the second fit under ``cProfile``): its seconds, the seconds spent waiting on
compiled programs (``block_until_ready``, and every read of a ``jax.Array``, made to block
first), the k-means start's, and
the host's (the rest) with their share, for each ``kmeans_solver`` (``scikit-learn``, and
``auto``, which runs JAX's k-means at this size; ``today`` for a checkout without the
parameter, whose start is scikit-learn's), in one run.
Every figure is printed with the device.

    python benchmarks/device_fits.py --digit-bags            # about 4 minutes on 2 CPU cores
    python benchmarks/device_fits.py --big-bags              # for an accelerator
    python benchmarks/device_fits.py --kmeans                # about 2 minutes on 2 CPU cores
    python benchmarks/device_fits.py --host-share            # about 3 minutes on 2 CPU cores
"""

import argparse
import contextlib
import sys
import time
import warnings
from pathlib import Path

import jax
import numpy as np
from lab import EMBEDDED_K, EMBEDDING, TASKS

import dpp
from dpp.datasets.suite import make_witness


def _split(dataset, train, test):
    X = np.split(
        np.asarray(dataset.sets.member_vectors()), np.cumsum(dataset.sets.set_sizes())[:-1]
    )
    y = np.asarray(dataset.sets.labels).argmax(1)
    return [X[i] for i in train], y[train], [X[i] for i in test], y[test]


def _time(make, X, y, X_test, y_test, label: str) -> None:
    seconds = []
    for _ in range(2):  # the first fit compiles; the second reuses every program
        est = make()
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est.fit(X, y)
        jax.block_until_ready(jax.numpy.zeros(()))
        seconds.append(time.perf_counter() - t0)
    accuracy = float(np.mean(est.predict(X_test) == y_test))
    epochs = est.fit_report_.rounds
    print(
        f"{label:<44} first fit {seconds[0]:7.1f} s  second {seconds[1]:7.1f} s  "
        f"accuracy {100 * accuracy:5.1f} %  ({est.fit_report_.status}, {epochs} rounds/epochs)",
        flush=True,
    )


_COMMON = {"n_prototypes": EMBEDDED_K, "embedding": EMBEDDING, "random_state": 0}
MODELS = (
    ("EmbeddedDPPClassifier (mean, no dropout)",
     lambda: dpp.EmbeddedDPPClassifier(**_COMMON, pooling="mean", dropout=0.0)),
    ("EmbeddedDPPClassifier() (gem, dropout 0.5)", lambda: dpp.EmbeddedDPPClassifier(**_COMMON)),
    ("EmbeddedDPPClassifier (max, dropout 0.5)",
     lambda: dpp.EmbeddedDPPClassifier(**_COMMON, pooling="max", dropout=0.5)),
    ("AttentionMILClassifier()", lambda: dpp.AttentionMILClassifier(random_state=0)),
)  # fmt: skip


def digit_bags() -> None:
    for task in ("digit_bags_m10_n100", "digit_bags_m50_n50"):
        dataset = TASKS[task][0](0)
        data = _split(dataset, dataset.info["train_sets"], dataset.info["test_sets"])
        for label, make in MODELS:
            _time(make, *data, f"{task}: {label}")


def big_bags(sets: int = 100) -> None:
    dataset = make_witness(num_sets=sets, dim=256, min_size=1000, max_size=2000, seed=0)
    index = np.arange(sets)
    test = index % 4 == 3
    data = _split(dataset, index[~test], index[test])
    vectors = int(dataset.sets.set_sizes().sum())
    print(f"big bags: {sets} bags, {vectors} vectors in 256-D", flush=True)
    _time(lambda: dpp.DPPClassifier(n_prototypes=16), *data, "DPPClassifier(n_prototypes=16)")
    _time(lambda: dpp.AttentionMILClassifier(random_state=0), *data, "AttentionMILClassifier()")


def kmeans(sets: int = 100) -> None:
    from sklearn.metrics import pairwise_distances_argmin_min

    from dpp.init import device_kmeans, kmeans_centres

    dataset = make_witness(num_sets=sets, dim=256, min_size=1000, max_size=2000, seed=0)
    big_bags = np.asarray(dataset.sets.member_vectors())[: 3 * len(dataset.sets.vectors) // 4]
    rng = np.random.default_rng(0)  # MPEG-7's shape: many vectors in few dimensions, large K
    low_d = (
        rng.normal(size=(120_000, 10)) + 3 * rng.normal(size=(8, 10))[rng.integers(0, 8, 120_000)]
    )
    for vectors, k in ((big_bags, 16), (low_d.astype(np.float32), 200)):
        print(f"k-means start: {vectors.shape[0]} vectors in {vectors.shape[1]}-D, K = {k}",
              flush=True)  # fmt: skip
        for name, run in (("scikit-learn KMeans (host, float64)", kmeans_centres),
                          ("device_kmeans (device, float32)", device_kmeans)):  # fmt: skip
            seconds = []
            for seed in (0, 1):  # the first run compiles the device's program
                t0 = time.perf_counter()
                centres = run(vectors, k, seed)
                seconds.append(time.perf_counter() - t0)
            inertia = float(np.sum(pairwise_distances_argmin_min(vectors, centres)[1] ** 2))
            print(f"{name:<38} first {seconds[0]:6.2f} s  second {seconds[1]:6.2f} s  "
                  f"inertia {inertia:.6g}", flush=True)  # fmt: skip


#: What a fit waits on compiled programs in: reading a device array, blocking on one.
_WAITS = ("_value", "block_until_ready", "try_to_block")


@contextlib.contextmanager
def _waiting_reads():
    """``np.asarray``/``np.array`` that block on a ``jax.Array`` first, so a profile shows the wait.

    NumPy reads a device array through the buffer protocol, inside its own C function, where
    ``cProfile`` cannot tell the wait from the copy; blocking first puts the wait under
    ``block_until_ready``.
    """
    originals = np.asarray, np.array

    def blocking(original):
        def read(a, *args, **kwargs):
            if isinstance(a, jax.Array):
                jax.block_until_ready(a)
            return original(a, *args, **kwargs)

        return read

    np.asarray, np.array = (blocking(f) for f in originals)
    try:
        yield
    finally:
        np.asarray, np.array = originals


def host_share(sets: int = 100, solvers=("scikit-learn", "auto")) -> None:
    import cProfile
    import inspect
    import pstats

    dataset = make_witness(num_sets=sets, dim=256, min_size=1000, max_size=2000, seed=0)
    index = np.arange(sets)
    X, y, _, _ = _split(dataset, index[index % 4 != 3], index[index % 4 == 3])
    print(f"host share: {len(X)} training bags, {sum(len(x) for x in X)} vectors in 256-D, "
          "DPPClassifier(n_prototypes=16), the second fit profiled", flush=True)  # fmt: skip
    takes_solver = "kmeans_solver" in inspect.signature(dpp.DPPClassifier).parameters
    for solver in solvers if takes_solver else (None,):
        options = {} if solver is None else {"kmeans_solver": solver}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            dpp.DPPClassifier(n_prototypes=16, **options).fit(X, y)  # compiles
            profile = cProfile.Profile()
            with _waiting_reads():
                t0 = time.perf_counter()
                profile.enable()
                est = dpp.DPPClassifier(n_prototypes=16, **options).fit(X, y)
                profile.disable()
                total = time.perf_counter() - t0
        stats = pstats.Stats(profile).stats
        waiting = sum(v[2] for (_, _, name), v in stats.items() if name in _WAITS)
        kmeans = sum(v[3] for (_, _, name), v in stats.items() if name == "kmeans_centres")
        host = total - waiting
        report = est.fit_report_
        print(
            f"kmeans_solver={solver or 'today'}: fit {total:6.1f} s, waiting on compiled "
            f"programs {waiting:6.1f} s, k-means start {kmeans:5.1f} s (waits included), "
            f"host {host:5.1f} s = {100 * host / total:4.1f} % of the fit  "
            f"({report.status}, {report.rounds} rounds)",
            flush=True,
        )
        top = sorted(
            ((v[2], f"{Path(file).name}:{line}({name})") for (file, line, name), v in stats.items()
             if name not in _WAITS), reverse=True,
        )[:6]  # fmt: skip
        print("    host's largest: " + ", ".join(f"{w} {t:.2f} s" for t, w in top), flush=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--digit-bags", action="store_true")
    parser.add_argument("--big-bags", action="store_true")
    parser.add_argument("--kmeans", action="store_true")
    parser.add_argument("--host-share", action="store_true")
    args = parser.parse_args(argv)
    print(f"device: {jax.devices()[0].device_kind} ({jax.default_backend()})", flush=True)
    if args.digit_bags:
        digit_bags()
    if args.big_bags:
        big_bags()
    if args.kmeans:
        kmeans()
    if args.host_share:
        host_share()
    return 0


if __name__ == "__main__":
    sys.exit(main())
