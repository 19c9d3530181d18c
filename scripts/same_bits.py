"""Checks that a revision predicts what this checkout predicts, to the bit ("nothing lost").

    python scripts/same_bits.py --base 8e86690

Fits, at ``--base`` (a git worktree in a temporary folder) and here, the embedded DPP (in dpp 0.1
spelt ``DPPClassifier(embedding=...)``, whose model files 0.2 loads), DPP by mini-batch Adam
(``optimizer="adam"``), Deep Sets with mean and max pooling, the shared-pool encodings (values
and gradients of mean, max and gem pooling) and ``DPPClassifierCV`` under each rule (``ensemble``,
``best``) over DPP and the standard prototype, over a tuned embedded DPP, and with the default's
members (an embedded one on its own settings over three seeds) (log-probabilities, the chosen
score, rounds and row, every candidate's mean score); compares every array, and loads the base's
model files here (the embedded DPP, Deep Sets, the ensemble). Prints one line per check and
exits 1 if any differs. The log-probabilities, not the probabilities: since ``predict_proba``
divides each row by its sum (2026-11-29) the probabilities of the same log-probabilities moved
by up to 1e-7.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]

#: Run in each checkout: writes ``arrays.npz`` (and model files) into the folder it is given.
PROBE = r"""
import sys, warnings
from pathlib import Path
import numpy as np, jax, jax.numpy as jnp
warnings.simplefilter("ignore")
import dpp
from dpp.sets import RaggedSets
from dpp.encoding import encode_soft
from dpp.pooling import make_pooling

out, arrays = Path(sys.argv[1]), {}
rng = np.random.default_rng(0)
X = [rng.normal(size=(rng.integers(3, 9), 5)) + (i % 2) for i in range(80)]
y = np.array(["a", "b"] * 40)
try:  # dpp 0.1's spelling of the embedded DPP, whose model files 0.2 loads as that model
    est = dpp.DPPClassifier(n_prototypes=4, embedding=(8,), optimizer="adam", pooling="gem",
                            optimizer_options={"batch_size": 4, "learning_rate": 3e-3})
except TypeError:  # dpp 0.2: the same fit under its own name
    est = dpp.EmbeddedDPPClassifier(n_prototypes=4, embedding=(8,), pooling="gem", batch_size=4,
                                    learning_rate=3e-3, dropout=0.0, normalize=False)
est.fit(X, y)
arrays["embedded"] = est.predict_log_proba(X)
est.save(out / "embedded.npz")
adam = dpp.DPPClassifier(n_prototypes=3, max_rounds=3, optimizer="adam",  # mini-batch Adam
                         optimizer_options={"batch_size": 8, "epochs": 2}).fit(X, y)
arrays["dpp_minibatch_adam"] = adam.predict_log_proba(X)
rng = np.random.default_rng(1)
S = [rng.normal(size=(rng.integers(1, 40), 7)) + (i % 3) * 0.5 for i in range(150)]
for pooling in ("mean", "max"):
    net = dpp.DeepSetsClassifier(pooling=pooling, embedding=(32, 16), max_epochs=15).fit(
        S, np.arange(150) % 3)
    arrays[f"deep_sets_{pooling}"] = net.predict_log_proba(S)
    arrays[f"deep_sets_{pooling}_scores"] = np.concatenate(net.instance_scores(S))
    net.save(out / f"deep_sets_{pooling}.npz")
rng = np.random.default_rng(0)
pool = rng.normal(size=(300, 5)).astype(np.float32)
members, ids = rng.integers(0, 300, size=2000), np.sort(rng.integers(0, 60, size=2000))
shared = RaggedSets.from_flat(pool, ids, np.eye(2)[rng.integers(0, 2, 60)], members=members)
mu = jnp.asarray(rng.normal(size=(7, 5)), jnp.float32)
for kind in ("mean", "max", "gem"):
    p = make_pooling(kind)
    arrays[f"encode_{kind}"] = np.asarray(encode_soft(shared, mu, jnp.float32(-0.3), p))
    grad = jax.grad(lambda m: jnp.sum(encode_soft(shared, m, jnp.float32(-0.3), p) ** 2))(mu)
    arrays[f"encode_{kind}_grad"] = np.asarray(grad)
for name, tuned in (("dpp", dpp.DPPClassifier(n_prototypes=3, max_rounds=4)),
                    ("standard", dpp.StandardPrototypeClassifier(n_prototypes=3))):
    for rule in ("ensemble", "best"):
        cv = dpp.DPPClassifierCV(tuned, l2s=(1e-2, 1e-1, 1.0), cv=3, rule=rule,
                                 embedding=(None,)).fit(X, y)  # the same in every version
        rounds = -1 if cv.best_rounds_ is None else cv.best_rounds_
        arrays[f"cv_{name}_{rule}"] = cv.predict_log_proba(X)
        arrays[f"cv_{name}_{rule}_chosen"] = np.array(
            [cv.best_score_, cv.prior_score_, rounds, cv.best_index_])
        arrays[f"cv_{name}_{rule}_table"] = np.asarray(cv.cv_results_["mean_test_score"])
embedded = dpp.EmbeddedDPPClassifier(n_prototypes=3, embedding=(8,), max_epochs=10)
for rule in ("ensemble", "best"):  # a tuned embedded DPP: on the grid
    cv = dpp.DPPClassifierCV(embedded, l2s=(1e-1,), pooling=["mean", "max"], cv=2, rule=rule,
                             max_extensions=0).fit(X, y)
    arrays[f"cv_embedding_{rule}"] = cv.predict_log_proba(X)
    arrays[f"cv_embedding_{rule}_chosen"] = np.array([cv.best_score_])
    arrays[f"cv_embedding_{rule}_table"] = np.asarray(cv.cv_results_["mean_test_score"])
tuned = dpp.DPPClassifier(n_prototypes=3, max_rounds=3)  # the default's members: one embedded
cv = dpp.DPPClassifierCV(tuned, l2s=(1e-1,), embedding=[None, (32, 16)], cv=2, rule="ensemble",
                         max_extensions=0).fit(X, y)  # on its own settings, over 3 seeds
arrays["cv_embedding_own"] = cv.predict_log_proba(X)
arrays["cv_embedding_own_chosen"] = np.array([cv.best_score_])
arrays["cv_embedding_own_table"] = np.asarray(cv.cv_results_["mean_test_score"])
cv.best_estimator_.save(out / "ensemble.npz")
np.savez(out / "arrays.npz", **arrays)
"""

#: Run here: the base's model files, loaded by this checkout, predict what they did there.
LOAD = r"""
import sys, warnings
from pathlib import Path
import numpy as np
warnings.simplefilter("ignore")
import dpp
base = Path(sys.argv[1])
rng = np.random.default_rng(0)
X = [rng.normal(size=(rng.integers(3, 9), 5)) + (i % 2) for i in range(80)]
rng = np.random.default_rng(1)
S = [rng.normal(size=(rng.integers(1, 40), 7)) + (i % 3) * 0.5 for i in range(150)]
arrays = {"embedded": dpp.load(base / "embedded.npz").predict_log_proba(X)}
arrays["cv_embedding_own"] = dpp.load(base / "ensemble.npz").predict_log_proba(X)
for pooling in ("mean", "max"):
    loaded = dpp.load(base / f"deep_sets_{pooling}.npz")
    arrays[f"deep_sets_{pooling}"] = loaded.predict_log_proba(S)
np.savez(base / "loaded.npz", **arrays)
"""


def _run(code: str, checkout: Path, folder: Path) -> None:
    env = {"PYTHONPATH": str(checkout), "PATH": "/usr/bin:/bin", "HOME": str(Path.home())}
    subprocess.run([sys.executable, "-c", code, str(folder)], cwd=checkout, env=env, check=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True, help="the git revision to compare against")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        worktree, base_out, here_out = tmp / "base", tmp / "base_out", tmp / "here_out"
        base_out.mkdir()
        here_out.mkdir()
        subprocess.run(["git", "worktree", "add", "-q", "--detach", str(worktree), args.base],
                       cwd=REPO, check=True)  # fmt: skip
        try:
            _run(PROBE, worktree, base_out)
            _run(PROBE, REPO, here_out)
            _run(LOAD, REPO, base_out)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(worktree)], cwd=REPO)
        base, here = np.load(base_out / "arrays.npz"), np.load(here_out / "arrays.npz")
        loaded = np.load(base_out / "loaded.npz")
        rows = [(f"fit {k}", base[k], here[k]) for k in base.files]
        rows += [(f"{k} model file of the base, loaded here", base[k], loaded[k])
                 for k in loaded.files]  # fmt: skip
        same = True
        for name, a, b in rows:
            equal = a.shape == b.shape and np.array_equal(a, b)
            same &= equal
            if equal:
                diff = ""
            elif a.shape != b.shape:  # e.g. a selection's table with more candidates
                diff = f" (shape {a.shape} there, {b.shape} here)"
            else:
                diff = f" (largest difference {np.max(np.abs(a - b)):.3g})"
            print(f"{'same' if equal else 'DIFFERS'}  {name}{diff}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
