"""Instance-level evidence: every set model's per-vector scores sum back to its class scores.

In float64 the sums are checked against each model's own forward pass (the packed encoder of
eq. 2 over eq. 3, the networks' ``__call__``) to 1e-9; through the estimators (float32 fits),
the log-softmax of the sums plus ``intercept_`` is ``predict_log_proba`` to float32 rounding.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import expects
from scipy.special import log_softmax
from sklearn.metrics import roc_auc_score

import dpp
from dpp.datasets.suite import make_digit_bags, make_witness
from dpp.encoding import soft_assignment
from dpp.model import FittedModel
from dpp.model.report import FitReport
from dpp.networks import layers, readout
from dpp.pooling import make_pooling
from dpp.sets import RaggedSets


def _sets_with_ties(rng, num_sets=9, dim=3):
    """Random sets, each with a repeated vector (max pooling's ties) and a singleton."""
    vectors = []
    for i in range(num_sets):
        x = rng.normal(size=(int(rng.integers(1, 8)), dim))
        vectors.append(np.concatenate([x, x[:1]]) if i % 2 else x)
    return vectors, RaggedSets.from_list(vectors, None, dtype=np.float64)


def _model(rng, pooling, log_beta, k=4, dim=3, classes=3):
    mu = jnp.asarray(rng.normal(size=(k, dim)))
    theta = jnp.asarray(rng.normal(size=(k, classes)) * 3.0)
    return FittedModel("dpp", mu, log_beta, theta, np.zeros(0), FitReport("dpp"), pooling=pooling)


@pytest.mark.parametrize("kind", ["mean", "max", "gem"])
@pytest.mark.parametrize("beta", ["shared", "per_prototype", "hard"])
def test_prototype_scores_sum_to_the_encoders_class_scores(x64, rng, kind, beta):
    vectors, sets = _sets_with_ties(rng)
    log_beta = {
        "shared": jnp.float64(1.3),
        "per_prototype": jnp.asarray(rng.normal(size=4)),
        "hard": None,
    }[beta]
    pooling = make_pooling(kind, 0.4 if kind == "gem" else None)
    model = _model(rng, pooling if beta != "hard" else make_pooling("mean"), log_beta)
    scores = model.instance_scores(sets)
    assert scores.shape == (sets.num_memberships, 3) and scores.dtype == np.float64
    totals = np.zeros((sets.num_sets, 3))
    np.add.at(totals, np.asarray(sets.set_ids), scores)
    expected = np.asarray(model.encode(sets)) @ np.asarray(model.theta)
    np.testing.assert_allclose(totals, expected, atol=1e-9, rtol=0)
    np.testing.assert_allclose(
        log_softmax(totals, axis=1), np.asarray(model.log_predictive(sets)), atol=1e-9
    )


def test_each_poolings_shares_follow_its_rule(x64, rng):
    """Mean: f(x) / M; max: only the vectors holding the largest code, split at ties."""
    vectors, sets = _sets_with_ties(rng)
    log_beta = jnp.float64(0.7)
    base = _model(rng, make_pooling("mean"), log_beta)
    ids = np.asarray(sets.set_ids)
    sizes = sets.set_sizes()
    f = np.asarray(soft_assignment(jnp.asarray(np.concatenate(vectors)), base.mu, log_beta))
    np.testing.assert_allclose(base.membership_shares(sets), f / sizes[ids, None], atol=1e-12)
    np.testing.assert_allclose(base.membership_codes(sets), f, atol=1e-12)
    mu_model = _model(np.random.default_rng(1), make_pooling("max"), log_beta)
    shares, f = mu_model.membership_shares(sets), mu_model.membership_codes(sets)
    largest = np.zeros((sets.num_sets, 4))
    np.maximum.at(largest, ids, f)
    ties = f == largest[ids]
    count = np.zeros((sets.num_sets, 4))
    np.add.at(count, ids, ties)
    np.testing.assert_allclose(shares, np.where(ties, largest[ids] / count[ids], 0.0), atol=1e-15)
    assert (count >= 2).any()  # a repeated vector that holds the largest code: a real tie


def _as_float64(module):
    return jax.tree.map(lambda a: a.astype(jnp.float64) if eqx.is_inexact_array(a) else a, module)


@pytest.mark.parametrize(
    "name",
    [
        "gated",
        "max",
        "embedded_gem",
        pytest.param("attention", marks=pytest.mark.extended),
        pytest.param("mean", marks=pytest.mark.extended),
    ],
)
def test_network_scores_sum_to_the_logits_less_the_bias(x64, rng, name):
    key = jax.random.key(3)
    if name in ("attention", "gated"):
        net = layers.AttentionMIL(5, 3, (8, 6), 0.0, 4, name == "gated", key=key)
    elif name == "embedded_gem":
        emb = layers.Embedding(5, (8, 6), 0.0, key=key)
        net = readout.initial_embedded_dpp(
            emb, rng.normal(size=(4, 6)), 0.5, 3, make_pooling("gem", 0.3)
        )
        net = eqx.tree_at(lambda m: m.theta, net, jnp.asarray(rng.normal(size=(4, 3))))
    else:
        net = layers.DeepSets(5, 3, (8, 6), 0.0, name, key=key)
    net = _as_float64(net)
    x = jnp.asarray(rng.normal(size=(7, 5)))
    mask = jnp.asarray([True] * 5 + [False] * 2)
    scores = net.instance_scores(x, mask)
    assert scores.shape == (7, 3)
    np.testing.assert_allclose(scores[5:], 0.0, atol=0)
    np.testing.assert_allclose(scores.sum(0) + net.intercept(), net(x, mask), atol=1e-9)
    if name in ("attention", "gated"):
        a = net.attention(x, mask)
        np.testing.assert_allclose(a.sum(), 1.0, atol=1e-12)
        assert (a[5:] == 0).all() and (a[:5] > 0).all()


def _problem(rng, n=60, classes=3):
    X = [rng.normal(size=(int(rng.integers(1, 9)), 4)) + (i % classes) for i in range(n)]
    return X, np.arange(n) % classes


FAST = {
    "dpp_mean": lambda: dpp.DPPClassifier(n_prototypes=3, max_rounds=3),
    "dpp_max": lambda: dpp.DPPClassifier(n_prototypes=3, max_rounds=3, pooling="max"),
    "dpp_gem": lambda: dpp.DPPClassifier(
        n_prototypes=3, max_rounds=3, pooling="gem", per_prototype_beta=True
    ),
    "standard": lambda: dpp.StandardPrototypeClassifier(n_prototypes=3),
    "pooling": lambda: dpp.PoolingClassifier(Cs=(1.0,), cv=2),
    "pooling_max": lambda: dpp.PoolingClassifier(pooling="max", Cs=(1.0,), cv=2),
    "bag_of_words": lambda: dpp.BagOfWordsClassifier(n_prototypes=3, Cs=(1.0,), cv=2),
}


# the DPP fits' sums are checked in float64 on the model above and end to end on a witness
# task below; their estimator cases run in the extended tier
CASES = [(name, "soft") for name in ("standard", "pooling", "bag_of_words")] + [
    (name, "binary") for name in ("pooling", "pooling_max", "bag_of_words")
]
EXTENDED = [
    pytest.param(name, labels, marks=pytest.mark.extended)
    for name in FAST
    for labels in ("three_classes", "soft", "binary")
    if (name, labels) not in CASES
]


@pytest.mark.parametrize(("name", "labels"), CASES + EXTENDED)
def test_estimator_scores_sum_back_to_the_log_probabilities(rng, name, labels):
    X, y = _problem(rng, classes=2 if labels == "binary" else 3)
    if labels == "soft":
        y = 0.7 * np.eye(3)[y] + 0.1
    est = FAST[name]().fit(X, y)
    scores = est.instance_scores(X[:15])
    assert [s.shape for s in scores] == [(len(x), len(est.classes_)) for x in X[:15]]
    totals = np.stack([s.sum(0) for s in scores]) + est.intercept_
    np.testing.assert_allclose(
        log_softmax(totals, axis=1), est.predict_log_proba(X[:15]), atol=2e-5
    )
    # the order of a set's vectors orders its rows and nothing else
    order = rng.permutation(len(X[3]))
    np.testing.assert_allclose(est.instance_scores([X[3][order]])[0], scores[3][order], atol=1e-6)


@pytest.mark.extended
def test_the_networks_and_the_embedded_dpp_through_their_estimators(rng):
    X, y = _problem(rng)
    small = {"embedding": (8,), "max_epochs": 3, "batch_size": 4}
    for est in (
        dpp.AttentionMILClassifier(**small),
        dpp.DeepSetsClassifier(**small),
        dpp.EmbeddedDPPClassifier(n_prototypes=3, pooling="max", **small),
    ):
        est.fit(X, y)
        scores = est.instance_scores(X[:12])
        totals = np.stack([s.sum(0) for s in scores]) + est.intercept_
        np.testing.assert_allclose(
            log_softmax(totals, axis=1), est.predict_log_proba(X[:12]), atol=2e-5
        )
    weights = dpp.AttentionMILClassifier(**small).fit(X, y).attention_weights(X[:5])
    assert [w.shape for w in weights] == [(len(x),) for x in X[:5]]
    np.testing.assert_allclose([w.sum() for w in weights], 1.0, atol=1e-5)


@pytest.mark.extended  # over 7 s cold: the default tier keeps to its 5 minutes
def test_dpp_evidence_finds_the_witnesses():
    """On a witness task, the positive class's instance score ranks witnesses first."""
    data = make_witness(num_sets=160, dim=12, seed=1)
    sets, labels = data.sets, np.asarray(data.sets.labels).argmax(1)
    est = dpp.DPPClassifier(n_prototypes=8).fit(sets)
    scores = np.concatenate(est.instance_scores(sets))
    positive = labels[np.asarray(sets.set_ids)] == 1
    auc = roc_auc_score(data.instance_labels[positive], scores[positive, 1])
    assert auc > 0.95, auc
    codes = est.soft_assignments(sets)
    np.testing.assert_allclose(np.concatenate(codes).sum(1), 1.0, atol=1e-5)
    np.testing.assert_array_equal(est.intercept_, np.zeros(2))


@pytest.mark.extended
def test_the_cv_gives_its_refitted_estimators_evidence(rng):
    X, y = _problem(rng)
    base = dpp.DPPClassifier(n_prototypes=3, max_rounds=3)
    cv = dpp.DPPClassifierCV(base, cv=2, rule="best", embedding=(None,))
    cv.fit(X, y)
    best = cv.best_estimator_
    for method in ("instance_scores", "soft_assignments"):
        got, want = getattr(cv, method)(X[:5]), getattr(best, method)(X[:5])
        for a, b in zip(got, want, strict=True):
            np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(cv.intercept_, np.zeros(3))


def test_digit_bags_follow_the_protocol():
    data = make_digit_bags(num_bags=60, num_test_bags=40, mean_size=10, sd_size=2, seed=1)
    sets, info = data.sets, data.info
    assert sets.num_sets == 100 and info["test_sets"] == list(range(60, 100))
    ids = np.asarray(sets.set_ids)
    holds = np.zeros(100, bool)
    np.logical_or.at(holds, ids, data.instance_labels == 1)
    np.testing.assert_array_equal(np.asarray(sets.labels).argmax(1), holds.astype(int))
    assert 7 <= sets.set_sizes().mean() <= 13 and 0.4 < holds.mean() < 0.9
    # no image is in a training bag and a test bag
    vectors = np.asarray(sets.vectors)
    train = {v.tobytes() for v in vectors[ids < 60]}
    assert not any(v.tobytes() in train for v in vectors[ids >= 60])


def _ensemble_model():
    """The default's kind of model: members' log-probabilities averaged (issue 53)."""
    from dpp.estimators.ensemble import SetEnsembleClassifier

    return SetEnsembleClassifier([
        ("dpp", dpp.DPPClassifier(n_prototypes=3, max_rounds=2, validation_fraction=0.0)),
        ("bow", dpp.BagOfWordsClassifier(n_prototypes=3, Cs=(1.0,), cv=2)),
    ])  # fmt: skip


@pytest.mark.parametrize(
    "make",
    [lambda: dpp.BagOfWordsClassifier(n_prototypes=3, Cs=(1.0,), cv=2), _ensemble_model],
    ids=["bag_of_words", "ensemble"],
)
@expects("round_cap")  # 2 rounds
def test_predict_script_writes_every_vectors_scores_beside_the_predictions(rng, tmp_path, make):
    import runpy

    import pandas as pd

    X, y = _problem(rng, n=40)
    model = make().fit(X, y)
    model.save(tmp_path / "model.npz")
    ids = np.repeat(np.arange(40) * 10 + 7, [len(x) for x in X])  # ids that are not 0..N-1
    np.savez(tmp_path / "sets.npz", vectors=np.concatenate(X), set_ids=ids)
    main = runpy.run_path("scripts/predict.py")["main"]
    out = tmp_path / "out" / "pred.csv"
    assert main([str(tmp_path / "model.npz"), str(tmp_path / "sets.npz"), "--out", str(out)]) == 0
    sets, vectors = pd.read_csv(out), pd.read_csv(tmp_path / "out" / "pred_vectors.csv")
    assert len(vectors) == len(ids) and list(vectors.set_id) == list(ids)
    assert list(vectors.vector[: len(X[0]) + 1]) == [*range(len(X[0])), 0]
    columns = [f"score_{c}" for c in model.classes_]
    totals = vectors.groupby("set_id", sort=True)[columns].sum().to_numpy() + model.intercept_
    probability = np.exp(log_softmax(totals, axis=1))
    np.testing.assert_allclose(probability, sets[[f"p_{c}" for c in model.classes_]], atol=1e-6)


class _Oracle:
    """Evidence +1 on witnesses and -1 elsewhere (or the reverse): AUC 1 (or 0) by construction."""

    def __init__(self, witnesses, sign=1.0):
        self.witnesses, self.sign = witnesses, sign

    def instance_scores(self, sets):
        evidence = self.sign * (2.0 * self.witnesses - 1.0)
        rows = np.stack([np.zeros_like(evidence), evidence], axis=1)
        return np.split(rows, np.cumsum(sets.set_sizes())[:-1])


@pytest.mark.extended  # a 160-set fit
def test_instance_proba_scores_each_vector_alone_and_ranks_witnesses_under_max_pooling():
    """Issue 53: ``instance_proba`` is ``predict_proba`` of every vector as a set of one (rows
    sum to 1); under max pooling, where the exact shares give every non-winning vector 0, it
    still ranks the witnesses of a witness task first."""
    data = make_witness(num_sets=160, dim=12, seed=1)
    sets, labels = data.sets, np.asarray(data.sets.labels).argmax(1)
    est = dpp.DPPClassifier(n_prototypes=8, pooling="max").fit(sets)
    proba = est.instance_proba(sets)
    assert [p.shape for p in proba] == [(m, 2) for m in sets.set_sizes()]
    np.testing.assert_allclose(np.concatenate(proba).sum(1), 1.0, atol=1e-6)
    X = np.split(np.asarray(sets.member_vectors()), np.cumsum(sets.set_sizes())[:-1])
    for n, j in ((0, 0), (7, 1)):
        np.testing.assert_allclose(proba[n][j], est.predict_proba([X[n][j : j + 1]])[0], atol=1e-7)
    positive = labels[np.asarray(sets.set_ids)] == 1
    auc = roc_auc_score(data.instance_labels[positive], np.concatenate(proba)[positive, 1])
    assert auc > 0.9, auc
    with pytest.raises(ValueError, match="D = 3 features"):
        est.instance_proba([np.ones((2, 3))])


def test_the_suites_instance_metrics_read_the_witness_labels_of_the_held_out_sets():
    from lab import instance_metrics, membership_rows

    data = make_witness(num_sets=30, dim=3, max_size=6, seed=2)
    test = np.arange(1, 30, 3)  # a subset in another order than the file's
    witnesses = membership_rows(data.instance_labels, data.sets, test)
    held = data.sets.subset(test)
    assert witnesses.shape == (held.num_memberships,)
    labels = np.asarray(data.sets.labels)[test]
    holds = np.zeros(test.size, bool)
    np.logical_or.at(holds, np.asarray(held.set_ids), witnesses == 1)
    np.testing.assert_array_equal(holds, labels.argmax(1) == 1)  # rows follow the subset
    assert instance_metrics(_Oracle(witnesses), held, labels, witnesses) == {
        "instance_auc": 1.0,
        "top_witness": 1.0,
    }
    wrong = instance_metrics(_Oracle(witnesses, -1.0), held, labels, witnesses)
    assert wrong == {"instance_auc": 0.0, "top_witness": 0.0}
    assert instance_metrics(object(), held, labels, witnesses) == {}


@pytest.mark.extended  # a suite run (two draws of bags): the default tier keeps to 5 minutes
def test_a_suite_run_on_digit_bags_reports_instance_evidence_and_draws_a_bag(tmp_path):
    import json

    from lab import run_suite

    run_suite(tmp_path, ["digit_bags_m10_n100"], folds=2, methods=["pooling"], log=lambda _: None)
    records = json.loads((tmp_path / "suite.json").read_text())["records"]
    assert [r["fold"] for r in records] == [0, 1]
    assert all(0.0 <= r["instance_auc"] <= 1.0 for r in records)
    assert len(records[0]["example_evidence"]) == len(
        make_digit_bags(seed=0).sets.subset(np.array([records[0]["example_set"]])).vectors
    )
    assert "Which vectors decided" in (tmp_path / "suite.md").read_text()
    assert (tmp_path / "evidence.png").stat().st_size > 10_000


def test_paired_differences_pair_units_and_test_them_by_family():
    from lab import compare_table, paired_differences
    from scipy.stats import wilcoxon

    rng = np.random.default_rng(5)
    records, diffs = [], {}
    for task in ("witness_d10_r10", "witness_d50_r05", "proportion_d10_c3"):
        for draw in range(2):
            for fold in range(3):
                base = rng.uniform(0.5, 0.9)
                gain = 0.0 if (draw, fold) == (1, 2) else rng.normal(0.02, 0.03)
                diffs[task, draw, fold] = gain
                for method, value in (("b", base), ("a", base + gain)):
                    records.append(
                        {
                            "task": task,
                            "draw": draw,
                            "fold": fold,
                            "method": method,
                            "accuracy": value,
                        }  # fmt: skip
                    )
    records.append({"task": "witness_d10_r10", "draw": 5, "fold": 0, "method": "a", "accuracy": 1})
    d = paired_differences(records, "a", "b")
    every = np.array(list(diffs.values()))
    assert d["units"] == 18  # the unpaired record is left out
    np.testing.assert_allclose(d["mean"], every.mean(), atol=1e-12)
    np.testing.assert_allclose(d["se"], every.std(ddof=1) / np.sqrt(18), atol=1e-12)
    assert (d["wins"], d["ties"], d["losses"]) == ((every > 0).sum(), 3, (every < 0).sum())
    np.testing.assert_allclose(d["p"], wilcoxon(every).pvalue)
    witness = np.array([v for (t, _, _), v in diffs.items() if t.startswith("witness")])
    assert d["families"]["witness"]["units"] == 12
    np.testing.assert_allclose(d["families"]["witness"]["mean"], witness.mean(), atol=1e-12)
    assert set(d["families"]) == {"witness", "proportion"}
    table = compare_table(records, "a", "b")
    assert f"| all (18) | {100 * every.mean():+.2f} ± " in table and "| proportion (6) |" in table


def test_choose_takes_the_best_mean_then_the_stronger_l2_then_the_simpler_model():
    from dpp.estimators.search import Group, choose

    mean, maximum, gem = (Group(8, p) for p in ("mean", "max", "gem"))
    scores = {
        (gem, 0.01): np.array([-0.30, -0.40, -0.20]),  # the best mean, -0.30
        (maximum, 0.1): np.array([-0.33, -0.36, -0.30]),
        (mean, 0.001): np.array([-0.34, -0.35, -0.33]),
    }
    assert choose(scores) == (gem, 0.01)
    scores[gem, 0.1] = scores[gem, 0.01]  # a tie: the stronger l2
    assert choose(scores) == (gem, 0.1)
    scores[mean, 0.1] = scores[gem, 0.01]  # and then the simpler model (mean pooling)
    assert choose(scores) == (mean, 0.1)
    with pytest.raises(ValueError, match="rule"):
        dpp.DPPClassifierCV(rule="one_se").fit([np.ones((2, 2))] * 4, [0, 1, 0, 1])


def test_the_contour_figure_is_skipped_with_its_reason_off_mpeg7():
    from test_experiment import _compose

    from dpp.experiment.runner import _trial_figures

    cfg = _compose(["figures=[contour_evidence]"])  # the synthetic dataset: no shape files
    names, skipped = _trial_figures(cfg, ["dpp"], quiet=True)
    assert names == [] and skipped == {
        "contour_evidence": "needs the mpeg7 dataset (its shape files)"
    }
    names, skipped = _trial_figures(cfg, ["standard"], quiet=True)
    assert skipped == {"contour_evidence": "needs the dpp method(s), not in this run"}
