"""Writes the model files of ``DPPClassifier(embedding=...)`` that dpp 0.2.0 still loads.

Run with dpp 0.1.0 (commit e607c07, the last with that spelling), from the repository root:
``python tests/data/legacy/make_files.py``. It writes ``dpp_embedding.npz`` (a model file) and
``dpp_embedding_expected.npz`` (the test sets, as ``vectors`` and ``lengths``, and the
``predict_proba`` the fitted estimator gave them), both read by ``tests/test_model_files.py``.
"""

import warnings
from pathlib import Path

import numpy as np

import dpp

HERE = Path(__file__).parent


def witness_sets(rng, n):
    """Sets of 3-8 vectors in 5 dimensions; positive when one vector is shifted by 3."""
    sizes = rng.integers(3, 9, size=n)
    labels = rng.integers(0, 2, size=n)
    sets = [rng.normal(size=(m, 5)) for m in sizes]
    for x, positive in zip(sets, labels, strict=True):
        if positive:
            x[0, 0] += 3.0
    return sets, np.where(labels == 1, "pos", "neg")


if __name__ == "__main__":
    rng = np.random.default_rng(52)
    X, y = witness_sets(rng, 60)
    X_test, _ = witness_sets(rng, 20)
    est = dpp.DPPClassifier(
        n_prototypes=4, embedding=(8,), optimizer="adam", pooling="gem",
        optimizer_options={"batch_size": 8, "learning_rate": 3e-3},
    )  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.fit(X, y)
    est.save(HERE / "dpp_embedding.npz")
    np.savez(
        HERE / "dpp_embedding_expected.npz",
        vectors=np.concatenate(X_test),
        lengths=np.array([len(x) for x in X_test]),
        proba=est.predict_proba(X_test),
        classes=est.classes_,
    )
    print(est.fit_report_.status, est.predict_proba(X_test)[:3])
