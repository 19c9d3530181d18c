"""Writes a model file of ``ClassPriorClassifier`` as it was while it took the shared parameters.

Run with dpp at commit e295349 (the last whose ``ClassPriorClassifier`` took ``standardize``,
``init``, ``random_state``, ...), from the repository root:
``python tests/data/legacy/make_class_prior.py``. It writes ``class_prior.npz`` (standardised
and projected on 3 components, so the file holds preprocessing arrays) and
``class_prior_expected.npz`` (the test sets and the ``predict_proba`` the fitted estimator gave
them), both read by ``tests/test_model_files.py``.
"""

from pathlib import Path

import numpy as np

import dpp

HERE = Path(__file__).parent

if __name__ == "__main__":
    rng = np.random.default_rng(55)
    X = [rng.normal(size=(int(m), 5)) for m in rng.integers(3, 9, size=40)]
    y = np.array(["a", "b", "b", "c"] * 10)
    X_test = [rng.normal(size=(int(m), 5)) for m in rng.integers(3, 9, size=10)]
    est = dpp.ClassPriorClassifier(n_prototypes=2, pca_components=3, random_state=7).fit(X, y)
    est.save(HERE / "class_prior.npz")
    np.savez(
        HERE / "class_prior_expected.npz",
        vectors=np.concatenate(X_test),
        lengths=np.array([len(x) for x in X_test]),
        proba=est.predict_proba(X_test),
        classes=est.classes_,
    )
    print(est.get_params(), est.predict_proba(X_test)[:2])
