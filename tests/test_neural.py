"""Issue 33: neural set baselines (attention MIL, Deep Sets / MI-Net) and DPP on an embedding.

Small networks and few epochs keep these fast; the suite (``experiment=suite``) runs the
defaults.
"""

import dataclasses
import json
import warnings

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import expected_fit_warnings
from sklearn.base import clone
from sklearn.exceptions import NotFittedError

import dpp
from dpp import model_file
from dpp.errors import FitWarning, ModelFileError
from dpp.model import epoch_status
from dpp.networks import training
from dpp.sets import RaggedSets

SMALL = {"embedding": (16, 8), "max_epochs": 30, "patience": 5, "batch_size": 4}


def _witness(rng, n=80, dim=4):
    """Sets of 2-12 vectors; a positive set holds one vector far along the first axis."""
    X, y = [], []
    for i in range(n):
        x = rng.normal(size=(int(rng.integers(2, 13)), dim))
        if i % 2:
            x[rng.integers(len(x)), 0] += 6.0
        X.append(x * 2.0 + 5.0)  # off-centre and wide: standardised inside
        y.append(i % 2)
    return X, np.array(y)


@pytest.fixture(scope="module")
def problem():
    rng = np.random.default_rng(33)
    X, y = _witness(rng)
    X_test, y_test = _witness(rng, 40)
    return X, np.where(y, "pos", "neg"), X_test, np.where(y_test, "pos", "neg")


@pytest.fixture(scope="module")
def fitted(problem):
    X, y, _, _ = problem
    with expected_fit_warnings("epoch_cap"):  # 30 epochs on a small problem
        return {
            "attention": dpp.AttentionMILClassifier(**SMALL).fit(X, y),
            "gated": dpp.AttentionMILClassifier(gated=True, **SMALL).fit(X, y),
            "deep_sets": dpp.DeepSetsClassifier(**SMALL).fit(X, y),
        }


@pytest.mark.parametrize("name", ["attention", "gated", "deep_sets"])
def test_the_networks_classify_any_labels_and_ignore_vector_order(problem, fitted, name):
    _, _, X_test, y_test = problem
    est = fitted[name]
    assert list(est.classes_) == ["neg", "pos"] and est.n_features_in_ == 4
    assert est.score(X_test, y_test) >= 0.8
    proba = est.predict_proba(X_test)
    np.testing.assert_allclose(proba.sum(1), 1.0, rtol=1e-6)
    rng = np.random.default_rng(0)
    shuffled = [x[rng.permutation(len(x))] for x in X_test]
    np.testing.assert_allclose(est.predict_proba(shuffled), proba, rtol=1e-4, atol=1e-6)
    report = est.fit_report_
    assert report.status in ("early_stopped", "max_epochs") and report.unit == "epoch"
    early = report.early_stopping
    assert early.validation_sets == 16 and early.best == report.rounds
    history = np.asarray(early.validation_history)
    assert history.size == early.monitored + 1
    assert np.argmax(history) == early.best  # the best epoch, by the held-out sets


def test_padding_rows_and_other_buckets_change_no_prediction(fitted):
    """A set's logits depend on its own real rows only: padding to another size is inert."""
    net = fitted["attention"].network_
    rng = np.random.default_rng(1)
    x = jnp.asarray(rng.normal(size=(5, 4)), jnp.float32)
    alone = net(x, jnp.ones(5, bool))
    padded = jnp.concatenate([x, jnp.asarray(rng.normal(size=(11, 4)), jnp.float32)])
    np.testing.assert_allclose(net(padded, jnp.arange(16) < 5), alone, rtol=1e-5)
    sets = RaggedSets.from_list([rng.normal(size=(m, 4)) for m in (1, 3, 40, 2, 17, 9)], None)
    shape = training.layout(sets.set_sizes(), 1)
    buckets, index = training.bucketize(sets, 1, 2, shape)
    assert sorted(np.concatenate(index).tolist()) == list(range(6))  # every set, once
    for bucket, rows in zip(buckets, index, strict=True):
        assert bucket.x.shape[0] >= rows.size and np.all(bucket.weights[rows.size :] == 0)


def test_soft_labels_weights_and_bad_inputs(problem):
    X, y, _, _ = problem
    soft = np.random.default_rng(2).dirichlet(np.ones(3), size=len(X))
    est = dpp.DeepSetsClassifier(pooling="mean", **SMALL).fit(X, soft, np.ones(len(X)))
    assert est.predict_proba(X[:3]).shape == (3, 3) and list(est.classes_) == [0, 1, 2]
    with pytest.raises(NotFittedError):
        dpp.AttentionMILClassifier().predict(X)
    for bad, message in (
        ([np.zeros((0, 4)), *X[1:]], "empty"),
        ([np.full((3, 4), np.nan), *X[1:]], "NaN"),
        ([np.zeros((3, 5)), *X[1:]], "mismatched dimensions"),
    ):
        with pytest.raises(ValueError, match=message):
            dpp.AttentionMILClassifier(**SMALL).fit(bad, y)
    for params, message in (
        ({"embedding": (16, 0)}, "embedding must be a non-empty list of positive integer"),
        ({"pooling": "sum"}, "pooling must be one of mean, max"),
        ({"dropout": 1.0}, "dropout must be a finite number >= 0 and < 1"),
    ):
        with pytest.raises(ValueError, match=message):
            dpp.DeepSetsClassifier(**{**SMALL, **params}).fit(X, y)


def test_a_fit_that_ran_out_of_epochs_is_a_fit_warning(problem):
    X, y, _, _ = problem
    with pytest.warns(
        FitWarning,
        match=r"AttentionMILClassifier\(.*max_epochs=2.*\): fit "
        r"max_epochs: the validation log-likelihood was still rising",
    ) as caught:
        est = dpp.AttentionMILClassifier(**{**SMALL, "max_epochs": 2, "learning_rate": 1e-2})
        est.fit(X, y)
    assert caught[0].filename == __file__ and est.fit_report_.status == "max_epochs"


def test_the_networks_save_and_load_exactly_and_refuse_damage(problem, fitted, tmp_path):
    _, _, X_test, _ = problem
    for name, est in fitted.items():
        loaded = dpp.load(est.save(tmp_path / f"{name}.npz"))
        assert type(loaded) is type(est) and loaded.get_params() == est.get_params()
        np.testing.assert_array_equal(loaded.predict_proba(X_test), est.predict_proba(X_test))
    with np.load(tmp_path / "attention.npz") as data:
        members = {k: data[k] for k in data.files}
    members["net_000"] = np.zeros((3, 3))
    np.savez(tmp_path / "bad.npz", **members)
    with pytest.raises(ModelFileError, match="array net_000 does not match its digest"):
        dpp.load(tmp_path / "bad.npz")
    # rewritten with its digests recomputed, the shape check behind them names the problem
    header = json.loads(str(members["header"]))
    header["digests"]["net_000"] = model_file.digest(members["net_000"])
    members["header"] = np.asarray(json.dumps(header))
    np.savez(tmp_path / "bad.npz", **members)
    with pytest.raises(ModelFileError, match=r"array net_000 has shape \(3, 3\); the network"):
        dpp.load(tmp_path / "bad.npz")


@pytest.mark.extended  # 13 s; the default tier fits the embedded DPP in the forwarding test
def test_dpp_on_a_learned_embedding(problem, tmp_path):
    X, y, X_test, y_test = problem
    est = dpp.EmbeddedDPPClassifier(
        n_prototypes=6,
        embedding=(16, 8),
        pooling="max",
        batch_size=4,
        random_state=0,
        weight_decay=5e-3,  # one decay: the default's choice is tested in test_diagnosis.py
    ).fit(X, y)
    assert est.score(X_test, y_test) >= 0.8
    assert est.transform(X_test).shape == (40, 6) and est.prototypes_.shape == (6, 8)
    assert (
        est.fit_report_.prototypes.embedding == (16, 8)
        and est.fit_report_.status == "early_stopped"
        and est.fit_report_.method == "embedded_dpp"
    )
    loaded = dpp.load(est.save(tmp_path / "embedded.npz"))
    assert type(loaded) is dpp.EmbeddedDPPClassifier
    np.testing.assert_array_equal(loaded.predict_proba(X_test), est.predict_proba(X_test))
    np.testing.assert_array_equal(loaded.transform(X_test), est.transform(X_test))
    for params, message in (
        ({"pooling": "sum"}, "pooling must be one of mean, max, gem; got 'sum'"),
        ({"embedding": (16, 2.5)}, r"embedding must be a non-empty list of positive integer"),
        ({"embedding": (0,)}, r"embedding must be a non-empty list of positive integer"),
        ({"max_epochs": 0}, r"max_epochs must be"),
        ({"dropout": 1.0}, r"dropout must be"),
        ({"normalize": "yes"}, r"normalize must be"),
        ({"weight_decay": (5e-3, -1.0)}, r"weight_decay\[1\] must be a finite number >= 0"),
        ({"weight_decay": []}, r"weight_decay must be a number or a non-empty list"),
    ):
        with pytest.raises(ValueError, match=message):
            dpp.EmbeddedDPPClassifier(**params).fit(X, y)


def test_a_selection_fits_an_embedding_candidate_as_the_embedded_dpp():
    """Issue 45: ``DPPClassifierCV`` over a ``DPPClassifier`` fits its embedding candidates as
    :class:`dpp.EmbeddedDPPClassifier` with the base's shared parameters (not its patience,
    which counts rounds), and tunes an ``EmbeddedDPPClassifier`` itself."""
    from dpp.estimators.search import Group, candidate

    base = dpp.DPPClassifier(n_prototypes=3, l2=0.5, patience=2, random_state=4)
    est = candidate(base, Group(5, "max", (8,)), l2=0.25)
    assert type(est) is dpp.EmbeddedDPPClassifier
    assert (est.n_prototypes, est.l2, est.pooling, est.embedding) == (5, 0.25, "max", (8,))
    assert est.random_state == 4 and est.patience == dpp.EmbeddedDPPClassifier().patience
    assert type(candidate(base, Group(5, "max"))) is dpp.DPPClassifier
    # another optimizer's options are not the embedded fit's (L-BFGS's max_iter is not Adam's)
    lbfgs = dpp.DPPClassifier(optimizer_options={"max_iter": 5})
    assert candidate(lbfgs, Group(5, "max", (8,))).theta_options is None
    adam = dpp.DPPClassifier(optimizer="adam", optimizer_options={"learning_rate": 1e-3})
    taken = candidate(adam, Group(5, "max", (8,)))
    assert taken.learning_rate == 1e-3
    # the start's Theta-step options are a parameter, so a clone keeps them
    assert clone(taken).theta_options == {"learning_rate": 1e-3}
    with pytest.raises(ValueError, match="max_iter"):
        dpp.EmbeddedDPPClassifier(theta_options={"max_iter": 5}).check_params()
    search = dpp.DPPClassifierCV(dpp.EmbeddedDPPClassifier(embedding=(8,)), pooling=["mean"])
    _, groups, by_round, own = search._checked()
    assert groups == [Group(16, "mean", (8,))] and not by_round  # its own K (16 by default)
    assert own == {}  # on the grid's l2 path (embedding_grid="auto": grid for it)


def test_the_monitored_fit_and_the_refit_share_one_compiled_program(problem):
    """Layouts, the cap and the monitoring flag are shapes or traced: one program for both."""
    X, y, _, _ = problem
    sets = RaggedSets.from_list(X, dpp.one_hot((y == "pos").astype(int), 2))
    shape = training.layout(sets.set_sizes(), 4)
    part, _ = training.bucketize(sets.subset(np.arange(60)), 4, 2, shape)
    full, _ = training.bucketize(sets, 4, 2, shape)
    assert jax.tree.map(jnp.shape, part) == jax.tree.map(jnp.shape, full)


def test_a_network_that_never_beat_its_random_start_is_stalled_not_early_stopped():
    """Table 1's first run with the neural baselines: on MPEG-7's unscaled frequencies every
    epoch's validation log-likelihood fell below the untrained network's, the refit ran 0 epochs
    and the random start (chance accuracy) was reported ``early_stopped``, a clean status."""
    settings = training.TrainSettings(max_epochs=100, patience=20)
    early = dpp.model.EarlyStopping(
        "validation_fraction", best=0, monitored=20, validation_history=(-4.251, -4.358),
        unit="epoch",
    )  # fmt: skip
    status, reason = epoch_status(early, None, settings.max_epochs)
    assert status == "stalled" and status not in dpp.model.CLEAN_STATUSES
    assert "above the untrained network's (-4.2510)" in reason and "0 epochs" in reason
    best3 = dataclasses.replace(early, best=3)
    assert epoch_status(best3, None, settings.max_epochs)[0] == "early_stopped"
    # DPP on an embedding starts from a fitted model (k-means prototypes, a Theta-step): its
    # best epoch 0 is an early stop at its start, as DPP's best round 0 is
    status, reason = epoch_status(early, None, settings.max_epochs, fitted_start=True)
    assert status == "early_stopped" and "above the start's (-4.2510" in reason
    assert "refitted for 0 epochs" in reason


def test_the_experiments_neural_baselines_standardise_whatever_the_dataset_says():
    """A dataset's ``standardize: false`` (MPEG-7's frequencies) states the prototype models'
    units; the networks keep their own ``standardize=True``, as a Python user gets them."""
    from pathlib import Path

    from hydra import compose, initialize_config_dir

    import dpp.experiment.config_store  # noqa: F401  (the model defaults the configs name)
    from dpp.experiment.settings import trial_settings

    configs = Path(__file__).resolve().parents[1] / "configs"
    with initialize_config_dir(config_dir=str(configs), version_base="1.3"):
        cfg = compose(config_name="config", overrides=["experiment=table1_mpeg7"])
    assert cfg.dataset.standardize is False
    methods = trial_settings(cfg).methods
    assert methods["dpp"].standardize is False and methods["bag_of_words"].standardize is False
    assert methods["attention_mil"].standardize is True and methods["deep_sets"].standardize


def _leaves(network):
    return jax.tree.leaves(eqx.filter(network, eqx.is_array))


@pytest.mark.extended  # 3 compilations of the training program (about 12 s)
def test_a_batched_selection_equals_its_fits_one_by_one(problem, monkeypatch):
    """Issue 34, decision 2: folds x l2 x seeds of DPP on an embedding as one program per
    stage, member by member the fits one at a time: bit for bit with one member at a time in
    the program (``chunk=1``, the CPU's default), and vectorised with the same epochs and
    statuses and parameters and held-out log-likelihoods to 1e-3 (float32: vectorised kernels
    round differently, by a CPU-dependent amount that 8 epochs of Adam grow; 1.9e-4 on an AMD
    EPYC, below 1e-6 where this test was written); ``DPPClassifierCV`` scores its embedding
    candidates by these batched fits."""
    from sklearn.base import clone

    from dpp.estimators.adam import fit_together

    X, y, X_test, _ = problem
    sets = RaggedSets.from_list(X, dpp.one_hot((y == "pos").astype(int), 2))
    folds = [sets.subset(np.arange(0, 60)), sets.subset(np.arange(20, 80))]
    # a short training (8 epochs, patience 3): some members stop early, others do not
    base = dpp.EmbeddedDPPClassifier(  # no dropout: its masks amplify the vectorised rounding
        n_prototypes=4, embedding=(8,), pooling="max", batch_size=4, learning_rate=5e-3,
        max_epochs=8, patience=3, dropout=0.0,
    )  # fmt: skip
    grid = [
        (fold, l2, seed) for fold in range(2) for l2 in (1e-2, 1.0) for seed in (0, 1)
    ]  # fmt: skip

    def members():
        return [clone(base).set_params(l2=l2, random_state=seed) for _, l2, seed in grid]

    training = [folds[f] for f, _, _ in grid]
    alone = [est.fit(part) for est, part in zip(members(), training, strict=True)]
    in_turn = fit_together(members(), training, chunk=1)
    vectorised = fit_together(members(), training, chunk=len(grid))
    assert len({est.fit_report_.rounds for est in alone}) > 1, "all members stopped alike"
    for one, turn, vector in zip(alone, in_turn, vectorised, strict=True):
        assert turn.fit_report_.rounds == vector.fit_report_.rounds == one.fit_report_.rounds
        assert turn.fit_report_.status == vector.fit_report_.status == one.fit_report_.status
        history = np.asarray(one.fit_report_.early_stopping.validation_history)
        for a, b, c in zip(
            _leaves(one.model_.network), _leaves(turn.model_.network),
            _leaves(vector.model_.network), strict=True,
        ):  # fmt: skip
            np.testing.assert_array_equal(np.asarray(b), np.asarray(a))
            np.testing.assert_allclose(np.asarray(c), np.asarray(a), rtol=0, atol=1e-3)
        np.testing.assert_array_equal(
            np.asarray(turn.fit_report_.early_stopping.validation_history), history
        )
        np.testing.assert_allclose(
            np.asarray(vector.fit_report_.early_stopping.validation_history), history,
            rtol=0, atol=1e-3,
        )  # fmt: skip
        np.testing.assert_array_equal(turn.predict_proba(X_test), one.predict_proba(X_test))
    # the selection: every fold x l2 of an embedding candidate in one batch, scored as the
    # fold's fit alone scores
    search = dpp.DPPClassifierCV(
        base, l2s=(1e-2, 1.0), pooling=["max"], embedding=[(8,)], cv=2, max_extensions=0
    ).fit(sets)
    for f, (fit_idx, val_idx) in enumerate(dpp.selection.cv_splits(2, sets.labels, 0, None)):
        part, held = sets.subset(np.sort(fit_idx)), sets.subset(np.sort(val_idx))
        for j, l2 in enumerate(search.cv_results_["param_l2"]):
            one = clone(base).set_params(l2=l2 * part.num_sets / sets.num_sets).fit(part)
            score = dpp.metrics.weighted_score(
                one.predict_log_proba(held), held.labels, held.weights, "log_likelihood"
            )
            assert search.cv_results_[f"split{f}_test_score"][j] == score
    # issue 45: the chosen candidate is refitted as it was scored, stopping early on its own
    # held-out share (it was refitted with validation_fraction=0, all max_rounds epochs)
    best = search.best_estimator_
    assert best.validation_fraction == 0.2
    assert best.fit_report_.early_stopping.source == "validation_fraction"
    alone = clone(base).set_params(l2=search.best_params_["l2"], validation_fraction=0.2)
    np.testing.assert_array_equal(best.predict_proba(X_test), alone.fit(sets).predict_proba(X_test))
    # the neural baselines batch the same way: seeds of attention MIL, each its fit alone
    small = {**SMALL, "max_epochs": 5, "patience": 2}
    seeds = [dpp.AttentionMILClassifier(**small, random_state=s) for s in (0, 1)]
    together = fit_together([clone(e) for e in seeds], [folds[0], folds[1]])
    for est, part, other in zip(seeds, folds, together, strict=True):
        est.fit(part)
        assert other.fit_report_.rounds == est.fit_report_.rounds
        for a, b in zip(_leaves(est.network_), _leaves(other.network_), strict=True):
            np.testing.assert_array_equal(np.asarray(b), np.asarray(a))
    with pytest.raises(ValueError, match="one training set per estimator: 2 estimators, 1"):
        fit_together(members()[:2], folds[:1])
    with pytest.raises(ValueError, match="Adam-trained fits: DPPClassifier is not one"):
        fit_together([dpp.DPPClassifier()], folds[:1])


@pytest.mark.extended  # four network fits: about 15 s: the default tier keeps near 5 minutes
def test_fits_that_differ_only_in_rate_and_decay_share_one_compiled_program(problem):
    """Issue 54: the learning rate and the weight decay are traced, not static, so a grid of
    them (the networks' selection, the embedded model's decays) compiles the training once, and
    its members batch together, each still bit for bit its fit alone."""
    from sklearn.base import clone

    from dpp.estimators.adam import fit_together
    from dpp.experiment.compilation import CompileCounter

    X, y, X_test, _ = problem
    small = {**SMALL, "max_epochs": 4, "patience": 2}
    first = dpp.AttentionMILClassifier(**small, learning_rate=1e-3, weight_decay=1e-4).fit(X, y)
    with CompileCounter() as counter:
        other = dpp.AttentionMILClassifier(**small, learning_rate=3e-3, weight_decay=0.1)
        other.fit(X, y)
    assert not [n for n in counter.names if "train" in n], counter.names
    assert not np.array_equal(first.predict_proba(X_test), other.predict_proba(X_test))
    sets = RaggedSets.from_list(X, dpp.one_hot((y == "pos").astype(int), 2))
    grid = [
        dpp.AttentionMILClassifier(**small, learning_rate=lr, weight_decay=wd)
        for lr, wd in ((1e-3, 1e-4), (3e-3, 0.1))
    ]
    with CompileCounter() as counter:
        together = fit_together([clone(e) for e in grid], [sets, sets])
    assert sum("train_batch" in n for n in counter.names) <= 2  # monitored fits, then refits
    for est, batched in zip(grid, together, strict=True):
        est.fit(sets)
        for a, b in zip(_leaves(est.network_), _leaves(batched.network_), strict=True):
            np.testing.assert_array_equal(np.asarray(b), np.asarray(a))


def test_a_validation_value_that_is_not_finite_is_a_failed_fit_naming_the_epoch():
    """Issue 45: a network whose held-out log-likelihood became NaN stopped on patience (NaN
    never improves) and reported ``early_stopped``; it is ``failed``, and says at which epoch."""
    from dpp.model import STATUSES, EarlyStopping

    settings = training.TrainSettings(max_epochs=20, patience=2)
    history = (-0.69, -0.61, -0.58, float("nan"), float("nan"))
    early = EarlyStopping("validation_fraction", best=2, monitored=4,
                          validation_history=history, unit="epoch")  # fmt: skip
    status, reason = epoch_status(early, None, settings.max_epochs)
    assert status == "failed" and status in STATUSES
    assert "not finite at epoch 3 of 4" in reason and "refitted for 2 epochs" in reason
    # a JSON round trip keeps NaN as null; it is still not finite
    restored = dataclasses.replace(early, validation_history=(*history[:3], None, None))
    assert epoch_status(restored, None, settings.max_epochs)[0] == "failed"
    finite = dataclasses.replace(early, validation_history=history[:3] + (-0.6, -0.62))
    assert epoch_status(finite, None, settings.max_epochs)[0] == "early_stopped"
    # the prototype fits' status function keeps the same rule, naming the round
    rounds = dataclasses.replace(restored, unit="round")
    status, reason = dpp.model.fit_status(None, 0.0, "coordinate_ascent", early=rounds)
    assert status == "failed" and "not finite at round 3 of 4" in reason


def test_a_mini_batch_holds_real_sets_only_but_for_the_last_partial_one():
    """Issue 45: with ``batch_size > 1`` padding rows were shuffled in with real sets and each
    step's loss divided by its batch's real weight, so a set sharing a batch with padding
    weighed more and the layout's padding changed the fit."""
    import jax
    import jax.numpy as jnp

    from dpp.networks.training import batch_order

    for real, rows, batch in ((5, 16, 4), (9, 16, 4), (3, 8, 2), (7, 8, 8)):
        weights = jnp.asarray([1.0] * real + [0.0] * (rows - real))
        for seed in range(5):
            batches = np.asarray(batch_order(jax.random.key(seed), weights, batch))
            assert batches.shape == (rows // batch, batch)
            assert sorted(batches.ravel()) == list(range(rows))  # every row once
            is_real = np.asarray(weights)[batches] > 0
            mixed = [b for b in is_real if b.any() and not b.all()]
            assert len(mixed) <= 1 and (not mixed or mixed[0][: real % batch].all())
            assert is_real.ravel()[:real].all()  # the real sets first, then padding only
    order = [np.asarray(batch_order(jax.random.key(s), jnp.ones(8), 2)).ravel() for s in (0, 1)]
    assert not np.array_equal(*order)  # shuffled
    one = np.asarray(batch_order(jax.random.key(3), jnp.asarray([1.0, 1, 0, 0]), 1)).ravel()
    assert np.array_equal(one, np.asarray(jax.random.permutation(jax.random.key(3), 4)))


@pytest.mark.extended  # a selection with an embedded candidate: about 15 s
def test_a_selection_over_the_paper_model_and_an_embedding_refits_both(monkeypatch):
    """The refit of an embedding member got the coordinate-ascent fits' ``layout`` and failed
    (``TypeError``); it is refitted as its ``EmbeddedDPPClassifier`` alone would be (on its
    own settings, ``members_``' params). The ensemble's score reuses the member's fold fits
    (batched), which are its refits on the folds: the embedded model is fitted alone once,
    for the final refit."""
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(4, 3)) + (i % 2) for i in range(40)]
    y = np.arange(40) % 2
    base = dpp.DPPClassifier(n_prototypes=2, max_rounds=2)
    fits = []
    fit = dpp.EmbeddedDPPClassifier.fit
    monkeypatch.setattr(
        dpp.EmbeddedDPPClassifier, "fit", lambda self, *a, **k: fits.append(1) or fit(self, *a, **k)
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FitWarning)
        search = dpp.DPPClassifierCV(
            base, embedding=[None, (4,)], embedding_seeds=1, rule="ensemble",
            pooling=["mean"], l2s=(1.0,), cv=2, max_extensions=0,
            embedding_options={"n_prototypes": 2, "max_epochs": 5},
        ).fit(X, y)  # fmt: skip
        names = [m["name"] for m in search.members_]
        assert names == ["mean", "gem_embedded"]
        assert len(fits) == 1  # the refit; the folds' were fitted together, and reused
        embedded = search.best_estimator_.estimators_[1]
        params = search.members_[1]["params"]
        alone = dpp.EmbeddedDPPClassifier.like(base, **params).fit(X, y)
    assert type(embedded) is dpp.EmbeddedDPPClassifier
    np.testing.assert_array_equal(embedded.predict_proba(X), alone.predict_proba(X))


@pytest.mark.extended  # two selections with an embedded candidate: about 30 s
def test_an_embedding_on_its_own_settings_is_one_candidate_scored_on_the_same_folds():
    """An embedding added to the paper's model is one candidate, ``EmbeddedDPPClassifier()``'s
    own ``K``, pooling and ``l2``, not crossed with the grid; one fit per fold, no extension;
    a tuned ``EmbeddedDPPClassifier`` is crossed with the grid, and ``best_params_`` rebuilds
    its refit; ``embedding_grid`` (0.2) is no parameter now."""
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(4, 3)) + (i % 2) for i in range(40)]
    y = np.arange(40) % 2
    # one seed: one candidate (the seeds are tested below)
    grid = {"pooling": ["mean", "max"], "l2s": (0.1, 1.0), "cv": 2, "max_extensions": 2}
    grid["embedding_seeds"] = 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FitWarning)
        search = dpp.DPPClassifierCV(
            dpp.DPPClassifier(n_prototypes=2, max_rounds=2), embedding=[None, (4,)],
            rule="best", **grid,
        ).fit(X, y)  # fmt: skip
        own = dpp.EmbeddedDPPClassifier()
        embedded = [p for p in search.cv_results_["params"] if "embedding" in p]
        assert embedded == [
            {"n_prototypes": own.n_prototypes, "pooling": own.pooling, "embedding": (4,),
             "l2": own.l2}
        ]  # fmt: skip
        assert len(search.cv_results_["params"]) >= 1 + 2 * 2  # the paper's model: its grid
        tuned = dpp.EmbeddedDPPClassifier(
            n_prototypes=3, pooling="max", embedding=(4,), l2=0.5, max_epochs=5
        )
        alone = dpp.DPPClassifierCV(tuned, rule="best", **grid).fit(X, y)
        again = clone(tuned).set_params(**alone.best_params_).fit(X, y)
    assert {(p["pooling"], p["l2"]) for p in alone.cv_results_["params"]} >= {
        (p, v) for p in ("mean", "max") for v in (0.1, 1.0)
    }  # on the grid
    assert all(s is not None for s in alone.cv_results_["split1_fit_status"])
    np.testing.assert_allclose(again.predict_proba(X), alone.predict_proba(X), atol=1e-6)
    with pytest.raises(TypeError, match="embedding_grid"):
        dpp.DPPClassifierCV(embedding_grid="own")


def test_an_own_embedded_member_over_seeds_is_one_member_per_seed_named_by_it():
    """:func:`seeded_embeddings`: each ``own`` group on an embedding gains ``seeds - 1`` copies
    seeded ``seed + 1``, ... (each its own member, scored at the same ``l2``); groups on the
    grid's path and the paper's model are left as they are; one seed changes nothing."""
    from dpp.estimators import search as c

    base = dpp.DPPClassifier(n_prototypes=4, random_state=7)
    groups, own = c.candidate_groups(base, None, ["mean"], [None, (8,)], "own")
    assert c.seeded_embeddings(groups, own, 1, 7) == (groups, own)
    seeded, scored = c.seeded_embeddings(groups, own, 3, 7)
    embedded = next(iter(own))
    assert seeded == [c.Group(4, "mean"), embedded, embedded._replace(random_state=8),
                      embedded._replace(random_state=9)]  # fmt: skip
    assert scored == dict.fromkeys(seeded[1:], own[embedded])
    assert [c.member_name(g.member()) for g in seeded] == [
        "mean",
        "gem_embedded",
        "gem_embedded_seed8",
        "gem_embedded_seed9",
    ]
    assert len({g.member() for g in seeded}) == 4  # one member each
    assert c.candidate(base, seeded[2]).random_state == 8  # and best_params_ carries it
    assert seeded[2].params()["random_state"] == 8 and "random_state" not in seeded[1].params()
    on_path, _ = c.candidate_groups(base, None, ["mean"], [None, (8,)], "grid")
    assert c.seeded_embeddings(on_path, {}, 3, 7) == (on_path, {})


@pytest.mark.extended  # two selections with embedded members: about 20 s
def test_a_selection_over_seeds_keeps_a_member_per_seed_and_its_params_rebuild_it():
    """``DPPClassifierCV(embedding_seeds=3)``: the embedded member and two more seeds, each
    refitted with its seed; ``SetEnsembleClassifier(**best_params_)`` rebuilds the ensemble,
    ``cv_results_`` names the seeds; the first member is the one-seed selection's."""
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(4, 3)) + (i % 2) for i in range(40)]
    y = np.arange(40) % 2
    base = dpp.DPPClassifier(n_prototypes=2, max_rounds=2, random_state=5)
    grid = {"rule": "ensemble", "cv": 2, "pooling": ["mean"], "l2s": (0.1,), "max_extensions": 0}
    grid.update(embedding=(None, (4,)), embedding_options={"n_prototypes": 2, "max_epochs": 3})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FitWarning)
        seeds = dpp.DPPClassifierCV(base, embedding_seeds=3, **grid).fit(X, y)
        one = dpp.DPPClassifierCV(base, embedding_seeds=1, **grid).fit(X, y)
        again = dpp.SetEnsembleClassifier(**seeds.best_params_).fit(X, y)
    assert [m["name"] for m in seeds.members_] == [
        "mean",
        "gem_embedded",
        "gem_embedded_seed6",
        "gem_embedded_seed7",
    ]
    assert [e.random_state for e in seeds.best_estimator_.estimators_][2:] == [6, 7]
    assert list(seeds.cv_results_["param_random_state"])[-2:] == [6, 7]
    assert "param_random_state" not in one.cv_results_
    assert seeds.members_[1]["score"] == one.members_[1]["score"]
    np.testing.assert_allclose(again.predict_proba(X), seeds.predict_proba(X), atol=1e-6)
    with pytest.raises(ValueError, match="embedding_seeds"):
        dpp.DPPClassifierCV(base, embedding_seeds=0).fit(X, y)


def test_embedding_options_set_the_embedded_members_and_their_refits_name_them():
    """``embedding_options``: the members on an embedding over a paper's model fit with them
    (their ``K``, pooling and ``l2`` too with ``embedding_grid="own"``, the grid's otherwise),
    every seed's copy keeps them, ``refit_params`` names them (so ``best_params_`` rebuilds the
    refit); the paper's model is untouched; bad names, values and owners are refused."""
    from dpp.estimators import search as c

    base = dpp.DPPClassifier(n_prototypes=4, random_state=7)
    options = {"weight_average": 0.5, "n_prototypes": 6, "l2": 0.3, "dropout": 0.1}
    groups, own = c.candidate_groups(base, None, ["mean"], [None, (8,)], "own", options)
    seeded, scored = c.seeded_embeddings(groups, own, 2, 7)
    paper, embedded, copy = seeded
    assert (
        c.candidate(base, paper).get_params() == clone(base).set_params(pooling="mean").get_params()
    )
    assert embedded.n_prototypes == 6 and scored[embedded] == scored[copy] == 0.3
    for g in (embedded, copy):
        refit = c.refit_estimator(base, (g, scored[g]), None)
        assert (refit.weight_average, refit.dropout, refit.n_prototypes, refit.l2) == (
            0.5, 0.1, 6, 0.3)  # fmt: skip
        params = c.refit_params((g, scored[g]), None)
        rebuilt = dpp.EmbeddedDPPClassifier.like(base, **params)
        assert rebuilt.get_params() == refit.get_params()
    on_path, _ = c.candidate_groups(base, [2], ["max"], [(8,)], "grid", options)
    assert on_path == [
        c.Group(2, "max", (8,), settings=(("dropout", 0.1), ("weight_average", 0.5)))
    ]
    default, _ = c.candidate_groups(base, None, ["mean"], [None, (8,)], "own")
    assert (
        c.candidate(base, default[1]).weight_average == dpp.EmbeddedDPPClassifier().weight_average
    )
    for bad, match in (([1], "must be a dict"), ({"widths": 1}, "'widths' is not"),
                       ({"random_state": 1}, "'random_state' is not"),
                       ({"theta_options": {"a": 1}}, "hashable")):  # fmt: skip
        with pytest.raises(ValueError, match=match):
            c.candidate_groups(base, None, None, "auto", "own", bad)
    with pytest.raises(ValueError, match="set them on it"):
        c.candidate_groups(dpp.EmbeddedDPPClassifier(), None, None, "auto", "own", options)


def test_the_candidate_groups_cross_an_embedding_with_the_grid_or_give_it_its_own_settings():
    """:func:`candidate_groups`: every embedding x pooling x ``K`` on the ``l2`` path
    (``grid``), or one group per embedding at the embedded estimator's own settings (``own``)."""
    from dpp.estimators.search import Group, candidate_groups

    base = dpp.DPPClassifier(n_prototypes=4)
    grid, own = candidate_groups(base, [2, 3], ["mean", "max"], [None, (8,)])
    assert own == {} and len(grid) == 2 * 2 * 2
    assert grid[:4] == [Group(2, "mean"), Group(3, "mean"), Group(2, "max"), Group(3, "max")]
    assert grid[4:] == [Group(k, p, (8,)) for p in ("mean", "max") for k in (2, 3)]
    alone = dpp.EmbeddedDPPClassifier()
    groups, own = candidate_groups(base, [2, 3], ["mean", "max"], [None, [8]], "own")
    embedded = Group(alone.n_prototypes, alone.pooling, (8,))
    assert groups == [*grid[:4], embedded] and own == {embedded: alone.l2}
    tuned = dpp.EmbeddedDPPClassifier(n_prototypes=5, pooling="max", l2=0.3, embedding=(6,))
    assert candidate_groups(tuned, None, ["mean"], None, "own") == (
        [Group(5, "max", (6,))],
        {Group(5, "max", (6,)): 0.3},
    )  # its own widths (None: the estimator's) on its own K, pooling and l2
    assert candidate_groups(tuned, None, ["mean"], None)[0] == [Group(5, "mean", (6,))]
    standard = dpp.StandardPrototypeClassifier(n_prototypes=3)  # no pooling, no embedding
    assert candidate_groups(standard, None, ["mean", "max"], [None, (8,)]) == ([Group(3)], {})
    # DPPClassifierCV's defaults ("auto"): over the paper's model, one member on
    # EmbeddedDPPClassifier() as it fits alone; over an embedded estimator, its grid
    default = Group(alone.n_prototypes, alone.pooling, alone.embedding)
    assert candidate_groups(base, None, ["mean"], "auto", "auto") == (
        [Group(4, "mean"), default],
        {default: alone.l2},
    )
    assert candidate_groups(tuned, None, ["mean"], "auto", "auto") == ([Group(5, "mean", (6,))], {})
    assert candidate_groups(standard, None, ["mean"], "auto", "auto") == ([Group(3)], {})
    # "auto" leaves its member out where the training sets are too few for its early stopping
    # (under 20: not even 10 held out with the widening): its refit would train unmonitored;
    # explicit ones stay. Without the widening (widen_validation=False) that is under 46 sets
    # (ceil(0.2 * 45) = 9 < 10 held out)
    from dpp.estimators.search import monitored_embeddings

    auto = candidate_groups(base, None, ["mean"], "auto", "auto")
    small, enough = 19, 20  # training sets (from 20 kept, whatever the inner folds' parts)
    assert monitored_embeddings(base, "auto", *auto, small) == ([Group(4, "mean")], {})
    assert monitored_embeddings(base, "auto", *auto, enough) == auto
    named = candidate_groups(base, None, ["mean"], [None, alone.embedding], "own")
    assert monitored_embeddings(base, [None, alone.embedding], *named, small) == named == auto
    off = candidate_groups(base, None, ["mean"], "auto", "auto", {"widen_validation": False})
    assert monitored_embeddings(base, "auto", *off, 45) == ([Group(4, "mean")], {})
    assert monitored_embeddings(base, "auto", *off, 46) == off != auto
    from dpp.estimators.search import check_grids

    with pytest.raises(ValueError, match=r"embedding must be .*'auto' or None, got 'own'"):
        check_grids((0.1,), None, None, "own")  # a string other than "auto" is no list
    check_grids((0.1,), None, None, "auto")
    with pytest.raises(ValueError, match="pooling"):
        candidate_groups(base, None, ["median"], None)
