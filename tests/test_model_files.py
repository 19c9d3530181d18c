"""Issue 20, item 4: a model file is loaded whole or refused as ``ModelFileError``.

Named regressions from the issue, then a fuzz test: random truncations, byte flips, header edits
and array swaps never raise anything but ``ModelFileError``, and a file that loads predicts
finite probabilities.
"""

import functools
import io
import json
import zipfile
from pathlib import Path

import numpy as np
import pytest
from conftest import expected_fit_warnings, expects

import dpp
from dpp import model_file
from dpp.errors import ModelFileError

# one K = 3 soft encoder with standardisation and PCA, one hard encoder with string classes
_RNG = np.random.default_rng(7)
X = [_RNG.normal(size=(_RNG.integers(2, 8), 4)) + (i % 3) for i in range(36)]
Y = np.asarray(["a", "b", "c"])[np.arange(36) % 3]
_RNG_PROBE = np.random.default_rng(8)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("models")
    fitted = _fitted()
    assert set(fitted) == set(dpp.estimators.ESTIMATORS)  # every kind that writes a file
    return {name: est.save(folder / f"{name}.npz").read_bytes() for name, est in fitted.items()}


@functools.cache
def _fitted() -> dict:
    """One small fitted estimator of every kind in the registry (read-only: shared); their
    fits are tiny, so the caps' FitWarnings are expected."""
    with expected_fit_warnings("round_cap", "epoch_cap", "early_stopping_skipped"):
        return _fit_every_kind()


def _fit_every_kind() -> dict:
    net = {"max_epochs": 3, "embedding": (8,), "random_state": 0}
    return {
        "dpp": dpp.DPPClassifier(
            n_prototypes=3, standardize=True, pca_components=3, max_rounds=2,
            per_prototype_beta=True,
        ).fit(X, np.arange(36) % 3),
        "standard": dpp.StandardPrototypeClassifier(n_prototypes=4).fit(X, Y),
        "infoloss": dpp.InfoLossClassifier(n_prototypes=3, max_rounds=2).fit(X, Y),
        "class_prior": dpp.ClassPriorClassifier().fit(X, Y),
        "pooling": dpp.PoolingClassifier(Cs=[1.0], max_extensions=0).fit(X, Y),
        "bag_of_words": dpp.BagOfWordsClassifier(n_prototypes=4, Cs=[1.0], max_extensions=0)
        .fit(X, np.arange(36) % 3),
        "embedded_dpp": dpp.EmbeddedDPPClassifier(n_prototypes=3, **net).fit(X, Y),
        "attention_mil": dpp.AttentionMILClassifier(gated=True, attention_size=4, **net).fit(X, Y),
        "deep_sets": dpp.DeepSetsClassifier(**net).fit(X, np.arange(36) % 3),
    }  # fmt: skip


@pytest.mark.parametrize("kind", sorted(dpp.estimators.ESTIMATORS))
def test_every_kind_predicts_the_same_to_the_bit_after_a_round_trip(files, tmp_path, kind):
    """Issue 46: a saved and loaded model predicts exactly what the fitted one does (a load
    that swapped two arrays of the same shape, or rounded one, would not)."""
    path = tmp_path / f"{kind}.npz"
    path.write_bytes(files[kind])
    original, loaded = _fitted()[kind], dpp.load(path)
    assert type(loaded) is type(original)
    np.testing.assert_array_equal(loaded.classes_, original.classes_)
    probe = [*X[:5], _RNG_PROBE.normal(size=(3, 4)) * 3.0]  # seen sets and a new one
    np.testing.assert_array_equal(loaded.predict_proba(probe), original.predict_proba(probe))
    assert loaded.fit_report_.to_dict() == original.fit_report_.to_dict()


def _members(data: bytes) -> dict:
    with np.load(io.BytesIO(data), allow_pickle=False) as npz:
        return {name: npz[name] for name in npz.files}


def _rewrite(path, members: dict, header=None, digests: bool = True) -> None:
    """Writes ``members`` (with ``header``); ``digests``: recomputed for the arrays as they now
    are (a rewrite the digests cannot tell from a save, so the checks behind them are tested),
    else the header's as they were."""
    members = dict(members)
    header = _header(members) if header is None else header
    if digests and "digests" in header:
        arrays = {k: v for k, v in members.items() if k != "header"}
        header = {**header, "digests": {k: model_file.digest(v) for k, v in arrays.items()}}
    members["header"] = np.asarray(json.dumps(header))
    with open(path, "wb") as f:
        np.savez(f, **members)


def _header(members: dict) -> dict:
    return json.loads(str(members["header"]))


def _loads_or_refuses(path) -> None:
    """The contract: ModelFileError, or an estimator whose predictions are finite."""
    try:
        estimator = dpp.load(path)
    except ModelFileError as err:
        assert str(path) in str(err)
        return
    proba = estimator.predict_proba(X[:5])
    assert proba.shape == (5, len(estimator.classes_)) and np.all(np.isfinite(proba))


# ------------------------------------------------------------------ the cases
def _edit(header, key, value):
    header = json.loads(json.dumps(header))
    node = header
    *parents, leaf = key.split(".")
    for part in parents:
        node = node[part]
    node[leaf] = value
    return header


@pytest.mark.parametrize(
    "key, value, message",
    [
        ("params.evil", 1, "params.evil is not a parameter of DPPClassifier"),
        ("params.n_prototypes", -5, "params.n_prototypes must be a positive integer"),
        ("params.n_prototypes", 10**15, "array mu has shape (3, 3); n_prototypes = 1000000000"),
        ("params.l2", "lots", "params.l2 must be a finite number"),
        ("classes", ["a"], "classes must list 2 or more distinct labels"),
        ("n_features_in", 0, "n_features_in must be a positive integer"),
        ("info", [], "info must be a JSON object"),
        ("method", "magic", "estimator 'DPPClassifier' with method 'magic' is not a dpp"),
        ("format_version", 99, "format version 99, newer than"),
    ],
)
def test_header_fields_are_checked_by_the_constructors_rules(files, tmp_path, key, value, message):
    members = _members(files["dpp"])
    path = tmp_path / "edited.npz"
    _rewrite(path, members, _edit(_header(members), key, value))
    with pytest.raises(ModelFileError) as err:
        dpp.load(path)
    assert message in str(err.value) and str(path) in str(err.value)


def test_a_header_that_is_a_list_is_refused(files, tmp_path):
    path = tmp_path / "list.npz"
    _rewrite(path, _members(files["dpp"]), [1, 2, 3])
    with pytest.raises(ModelFileError, match="not a dpp model file"):
        dpp.load(path)


@pytest.mark.parametrize(
    "name, value, message",
    [
        ("mu", np.full((3, 3), np.nan), "array mu holds NaN or infinite values"),
        ("mu", np.zeros((2, 3)), "array mu has shape (2, 3)"),
        ("theta", np.zeros((3, 4)), "array theta has shape (3, 4)"),
        ("log_beta", np.zeros(()), "array log_beta has shape ()"),  # per-prototype beta
        ("normalizer_scale", np.asarray(-1.0), "normalizer_scale must be > 0"),
        ("preprocess_shift", np.zeros(4, np.int64), "must hold floats"),
    ],
)
def test_arrays_are_checked_against_each_other(files, tmp_path, name, value, message):
    members = _members(files["dpp"])
    members[name] = value
    path = tmp_path / "arrays.npz"
    _rewrite(path, members)
    with pytest.raises(ModelFileError) as err:
        dpp.load(path)
    assert message in str(err.value)


LEGACY = Path(__file__).parent / "data" / "legacy"


def _rows_summing_to_one(proba):
    """What ``predict_proba`` gives since each row is divided by its sum (it was ``exp`` of
    the log-probabilities alone): the same log-probabilities, so a saved ``exp`` divided so
    is the same to the bit."""
    return proba / proba.sum(axis=1, keepdims=True)


def test_a_dpp_0_1_file_of_dpp_classifier_on_an_embedding_loads_as_the_embedded_dpp(tmp_path):
    """dpp 0.2 removed ``DPPClassifier(embedding=...)``; its model files, written by dpp 0.1
    (``tests/data/legacy/make_files.py`` at commit e607c07), load through the header mapping
    as the ``EmbeddedDPPClassifier`` that spelling trained (no dropout, no normalisation, no
    moving average, no widened hold-out, the networks' weight decay, Adam's options taken
    over) and predict what they predicted: to float32 rounding, since the predictions were
    saved on one processor and XLA compiles for the one it runs on (an AMD EPYC without
    AVX-512 differs by 3e-7 relative); saved again, it predicts the same to the bit."""
    expected = np.load(LEGACY / "dpp_embedding_expected.npz")
    X_test = np.split(expected["vectors"], np.cumsum(expected["lengths"])[:-1])
    header, _ = model_file.read(LEGACY / "dpp_embedding.npz")
    assert header["estimator"] == "DPPClassifier" and header["params"]["embedding"] == [8]
    loaded = dpp.load(LEGACY / "dpp_embedding.npz")
    assert type(loaded) is dpp.EmbeddedDPPClassifier
    assert (loaded.embedding, loaded.dropout, loaded.normalize) == ((8,), 0.0, False)
    assert loaded.weight_decay == 5e-3  # the networks' decay that 0.1 trained it with
    # nor the moving average or the widened hold-out, which came after
    assert (loaded.weight_average, loaded.widen_validation) == (0.0, False)
    assert (loaded.n_prototypes, loaded.pooling) == (4, "gem")
    assert (loaded.learning_rate, loaded.batch_size) == (3e-3, 8)  # its optimizer_options
    assert loaded.fit_report_.status == "early_stopped"
    np.testing.assert_array_equal(loaded.classes_, expected["classes"])
    proba = loaded.predict_proba(X_test)
    np.testing.assert_allclose(proba, _rows_summing_to_one(expected["proba"]), rtol=2e-6, atol=0)
    # saved again, it is an embedded DPP's file, and the same model
    again = dpp.load(loaded.save(tmp_path / "again.npz"))
    assert model_file.read(tmp_path / "again.npz")[0]["estimator"] == "EmbeddedDPPClassifier"
    np.testing.assert_array_equal(again.predict_proba(X_test), proba)
    with pytest.raises(TypeError, match="embedding"):
        dpp.DPPClassifier(embedding=(8,))


def test_a_class_prior_file_written_with_the_shared_parameters_loads_and_predicts_as_before(
    tmp_path,
):
    """Issue 55: ``ClassPriorClassifier`` takes only ``n_prototypes`` and ``l2``. Its files
    written while it took the shared parameters (``tests/data/legacy/make_class_prior.py`` at
    commit e295349: standardised, 3 PCA components, ``random_state=7``) load, dropping them,
    with their preprocessing arrays, and predict what they predicted, to the bit; a name that
    was never a parameter is still refused."""
    expected = np.load(LEGACY / "class_prior_expected.npz")
    X_test = np.split(expected["vectors"], np.cumsum(expected["lengths"])[:-1])
    header, arrays = model_file.read(LEGACY / "class_prior.npz")
    assert header["params"]["pca_components"] == 3 and "preprocess_matrix" in arrays
    loaded = dpp.load(LEGACY / "class_prior.npz")
    assert loaded.get_params() == {"n_prototypes": 2, "l2": 0.0}
    np.testing.assert_array_equal(loaded.classes_, expected["classes"])
    np.testing.assert_array_equal(
        loaded.predict_proba(X_test), _rows_summing_to_one(expected["proba"])
    )
    header["params"]["zz_bogus"] = 1  # after every shared name: it, not one of them, is named
    model_file.write(tmp_path / "bogus.npz", header, arrays)
    with pytest.raises(ModelFileError, match="params.zz_bogus"):
        dpp.load(tmp_path / "bogus.npz")


def test_a_text_file_is_named_as_one(tmp_path):
    """Issue 36: a CSV given as a model file was said to hold 'pickled Python objects'."""
    path = tmp_path / "sets.csv"
    path.write_text("set_id,label,f0\n0,a,1.5\n")
    with pytest.raises(ModelFileError) as err:
        dpp.load(path)
    assert str(err.value) == (
        f"{path} is not a dpp model file: it is a text file (it begins 'set_id,label,f0'), "
        "not an .npz archive"
    )
    (tmp_path / "empty.npz").write_bytes(b"")
    with pytest.raises(ModelFileError, match="it is empty"):
        dpp.load(tmp_path / "empty.npz")


@pytest.mark.parametrize(
    "name, array, value, message",
    [
        ("pooling", "coef", np.zeros((2, 8)), "array coef has shape (2, 8); 3 classes and 8"),
        ("pooling", "scaler_scale", np.zeros(8), "array scaler_scale must be > 0"),
        ("bag_of_words", "mu", np.zeros((3, 4)), "array mu has shape (3, 4); n_prototypes = 4"),
    ],
)
def test_the_pooled_baselines_arrays_are_checked(files, tmp_path, name, array, value, message):
    members = _members(files[name])
    members[array] = value
    path = tmp_path / "arrays.npz"
    _rewrite(path, members)
    with pytest.raises(ModelFileError) as err:
        dpp.load(path)
    assert message in str(err.value)


def test_a_pickle_is_refused_without_numpys_hint(tmp_path):
    path = tmp_path / "pickled.npz"
    np.savez(path, header=np.asarray([{"format": "dpp-model"}], dtype=object))
    with pytest.raises(ModelFileError, match="pickled Python objects") as err:
        dpp.load(path)
    assert "allow_pickle" not in str(err.value)


# ------------------------------------------------------------------ fuzz
_VALUES = [None, -5, 0, 1, 2.5, 1e300, "x", "", [], [1, "a"], {}, {"a": 1}, True, float("nan")]


def _fuzzed(rng, name: str, data: bytes, kind: str):
    """Bytes of one damaged variant of a saved model file."""
    if kind == "truncate":
        return data[: int(rng.integers(0, len(data)))]
    if kind == "flip":
        damaged = bytearray(data)
        for pos in rng.integers(0, len(data), size=int(rng.integers(1, 4))):
            damaged[pos] ^= int(rng.integers(1, 256))
        return bytes(damaged)
    members = _members(data)
    header = _header(members)
    if kind == "header":
        section = rng.choice(["top", "params", "info"])
        node = header if section == "top" else header[section]
        key = str(rng.choice([*node.keys(), "extra"]))
        if rng.random() < 0.2:
            node.pop(key, None)
        else:
            node[key] = _VALUES[int(rng.integers(len(_VALUES)))]
    else:  # "arrays": swap two (of the same shape where there are), drop one, change a
        # dtype or a shape, or move one value by one float step
        names = sorted(members.keys() - {"header"})
        shapes = {}
        for n in names:
            shapes.setdefault(members[n].shape, []).append(n)
        pairs = [group for group in shapes.values() if len(group) > 1]
        action = rng.integers(5)
        if action == 0:
            group = pairs[int(rng.integers(len(pairs)))] if pairs else names
            a, b = rng.choice(group, size=2, replace=False)
            members[a], members[b] = members[b], members[a]
        else:
            a = str(rng.choice(names))
            if action == 1:
                del members[a]
            elif action == 2:
                members[a] = members[a].astype(np.int32)
            elif action == 3:
                members[a] = np.zeros(members[a].shape + (2,))
            else:
                moved = members[a].copy().reshape(-1)
                if moved.size:
                    moved[0] = np.nextafter(moved[0], np.inf)
                    members[a] = moved.reshape(members[a].shape)
                else:  # an empty array: a value added
                    members[a] = np.zeros(1)
    buffer = io.BytesIO()
    np.savez(buffer, **{k: v for k, v in members.items() if k != "header"},
             header=np.asarray(json.dumps(header)))  # fmt: skip
    return buffer.getvalue()


@pytest.mark.parametrize("kind", ["truncate", "flip", "header", "arrays"])
def test_fuzzed_model_files_load_whole_or_raise_model_file_error(files, tmp_path, kind):
    """Every kind of model file, damaged: ``ModelFileError`` or finite predictions; an array
    damaged in any way (swapped with one of its shape, or one value moved by one float step)
    is always refused."""
    rng = np.random.default_rng(["truncate", "flip", "header", "arrays"].index(kind))
    kinds = sorted(files)
    refused = 0
    for i in range(64):
        name = kinds[i % len(kinds)]
        path = tmp_path / f"{kind}{i}.npz"
        path.write_bytes(_fuzzed(rng, name, files[name], kind))
        try:
            _loads_or_refuses(path)
        except AssertionError:
            raise
        except Exception as err:  # anything but ModelFileError breaks the contract
            pytest.fail(f"{kind} #{i} ({name}) raised {type(err).__name__}: {err}")
        refused += not _loaded(path)
    assert refused == 64 if kind == "arrays" else refused >= 20  # the fuzzing is not a no-op


def test_what_the_digests_cannot_detect_is_what_the_format_says(files, tmp_path):
    """``dpp.model_file``'s statement: mu and theta of the same shape swapped are refused by
    their digests; with the digests removed (a file from before them) or recomputed (a
    deliberate rewrite) the same swap loads, and predicts something else."""
    members = _members(files["standard"])
    assert members["mu"].shape != members["theta"].shape  # so: a DPP file where they match
    members = _members(files["dpp"])
    header = _header(members)
    members["mu"], members["theta"] = members["theta"], members["mu"]
    assert members["mu"].shape == members["theta"].shape == (3, 3)
    path = tmp_path / "swapped.npz"
    _rewrite(path, members, digests=False)
    with pytest.raises(ModelFileError, match="array (mu|theta) does not match its digest"):
        dpp.load(path)
    original = _fitted()["dpp"].predict_proba(X[:6])
    _rewrite(path, members, {k: v for k, v in header.items() if k != "digests"})
    swapped = dpp.load(path).predict_proba(X[:6])
    _rewrite(path, members, header, digests=True)
    np.testing.assert_array_equal(dpp.load(path).predict_proba(X[:6]), swapped)
    assert not np.allclose(swapped, original)


def _loaded(path) -> bool:
    try:
        dpp.load(path)
        return True
    except ModelFileError:
        return False


def test_the_intact_files_load(files, tmp_path):
    for name, data in files.items():
        path = tmp_path / f"{name}.npz"
        path.write_bytes(data)
        assert _loaded(path)
        assert zipfile.is_zipfile(path)


@pytest.mark.parametrize("kind", sorted(dpp.estimators.ESTIMATORS))
def test_every_kind_refuses_bad_sets_at_predict_time(files, kind):
    """Issue 46: a fitted estimator of every kind names what is wrong with the sets it is
    asked to predict, rather than predicting from them."""
    estimator = _fitted()[kind]
    good = X[:3]
    for bad, message in (
        ([np.zeros((0, 4)), *good], "empty"),
        ([np.full((3, 4), np.nan), *good], "NaN"),
        ([np.zeros((3, 5)), np.zeros((2, 5))], "D = 5 features per vector but .* D = 4"),
        ([np.zeros((3, 4)), np.zeros((2, 5))], "mismatched dimensions"),
        ([], "no sets"),
    ):
        for method in ("predict", "predict_proba", "predict_log_proba"):
            with pytest.raises(ValueError, match=message):
                getattr(estimator, method)(bad)


@expects("grid_edge")  # two values, no extension
def test_a_selection_saves_its_refitted_estimator_and_returns_the_path(tmp_path):
    """``DPPClassifierCV.save`` returned ``None`` and was untested: it writes the refitted
    estimator, which loads as that estimator and predicts what the selection does."""
    from sklearn.exceptions import NotFittedError

    search = dpp.DPPClassifierCV(
        dpp.StandardPrototypeClassifier(n_prototypes=3), l2s=[0.1, 1.0], cv=3, max_extensions=0
    )
    with pytest.raises(NotFittedError):
        search.save(tmp_path / "unfitted.npz")
    search.fit(X, Y)
    path = search.save(tmp_path / "search.npz")
    assert path == tmp_path / "search.npz" and path.is_file()
    loaded = dpp.load(path)
    assert type(loaded) is dpp.StandardPrototypeClassifier
    assert loaded.l2 == search.best_params_["l2"]
    np.testing.assert_array_equal(loaded.predict_proba(X), search.predict_proba(X))
    np.testing.assert_array_equal(loaded.classes_, search.classes_)


@pytest.mark.parametrize("kind", sorted(dpp.estimators.ESTIMATORS))
def test_every_set_model_transforms_sets_into_what_its_head_reads(kind):
    """Issue 45: ``transform`` on every set model: the pooled representation its classifier
    reads (the networks' ``z``, the pooled regressions' features, the prototype codes)."""
    from scipy.special import log_softmax

    est = _fitted()[kind]
    probe = [_RNG_PROBE.normal(size=(m, 4)) for m in (1, 3, 7)]
    z = est.transform(probe)
    assert z.shape[0] == 3 and z.dtype == np.float64 and np.all(np.isfinite(z))
    if kind in ("attention_mil", "deep_sets"):
        head = est.network_.classifier
        logits = z @ np.asarray(head.weight, np.float64).T + np.asarray(head.bias, np.float64)
    elif kind in ("pooling", "bag_of_words"):
        weights, bias = est.head_.linear()
        logits = z @ weights + bias
    else:  # eq. (16): z Theta in the model's internal units
        logits = z @ np.asarray(est.theta_, np.float64)
    assert logits.shape == (3, len(est.classes_))
    np.testing.assert_allclose(log_softmax(logits, axis=1), est.predict_log_proba(probe), atol=2e-5)
