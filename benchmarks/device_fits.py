"""Fit times of the embedded DPP, DPP and attention MIL on whatever device JAX runs on.

``--digit-bags``: ``EmbeddedDPPClassifier`` (mean pooling without dropout, as before issue 52;
its default, the generalised mean with dropout 0.5; max pooling with dropout 0.5) and
``AttentionMILClassifier()`` on draw 0 of two digit-bag tasks (the suite's K = 16,
256-128-64): the first fit (compilation included) and a second fit on the same bags (compiled),
with the test accuracy. ``--big-bags``: 100 witness bags of 1,000-2,000 vectors in 256-D (a
held-out 25 % scored), ``DPPClassifier(n_prototypes=16)`` against ``AttentionMILClassifier()``,
first and second fit and the accuracy of each. ``--kmeans``: the k-means start of those big
bags' training vectors (K = 16), scikit-learn's on the host (``dpp.init.kmeans_centres``)
against the device's (``dpp.init.device_kmeans``), first and second run and the inertia of
each. Every figure is printed with the device.

    python benchmarks/device_fits.py --digit-bags            # about 4 minutes on 2 CPU cores
    python benchmarks/device_fits.py --big-bags              # for an accelerator
    python benchmarks/device_fits.py --kmeans                # about a minute on 2 CPU cores
"""

import argparse
import sys
import time
import warnings

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
    vectors = np.asarray(dataset.sets.member_vectors())[: 3 * len(dataset.sets.vectors) // 4]
    print(f"k-means start: {vectors.shape[0]} vectors in 256-D, K = 16", flush=True)
    for name, run in (("scikit-learn KMeans (host, float64)", kmeans_centres),
                      ("device_kmeans (device, float32)", device_kmeans)):  # fmt: skip
        seconds = []
        for seed in (0, 1):  # the first run compiles the device's program
            t0 = time.perf_counter()
            centres = run(vectors, 16, seed)
            seconds.append(time.perf_counter() - t0)
        inertia = float(np.sum(pairwise_distances_argmin_min(vectors, centres)[1] ** 2))
        print(f"{name:<38} first {seconds[0]:6.2f} s  second {seconds[1]:6.2f} s  "
              f"inertia {inertia:.6g}", flush=True)  # fmt: skip


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--digit-bags", action="store_true")
    parser.add_argument("--big-bags", action="store_true")
    parser.add_argument("--kmeans", action="store_true")
    args = parser.parse_args(argv)
    print(f"device: {jax.devices()[0].device_kind} ({jax.default_backend()})", flush=True)
    if args.digit_bags:
        digit_bags()
    if args.big_bags:
        big_bags()
    if args.kmeans:
        kmeans()
    return 0


if __name__ == "__main__":
    sys.exit(main())
