"""ADULT: parsing, grouping into soft-labelled sets, the class prior and the experiment."""

import numpy as np
import pandas as pd
import pytest
from conftest import CONFIG_DIR
from hydra import compose, initialize_config_dir

from dpp.baselines.class_prior import fit_class_prior
from dpp.datasets.adult import CONTINUOUS, GROUP_BY, WORKCLASSES, group_records, read_records
from dpp.datasets.base import default_data_dir
from dpp.errors import DataError
from dpp.experiment.runner import run
from dpp.sets import RaggedSets

FOLDER = default_data_dir() / "adult"
needs_data = pytest.mark.skipif(not FOLDER.is_dir(), reason=f"ADULT not found in {FOLDER}")


@pytest.fixture(scope="module")
def records():
    return read_records(FOLDER)


@needs_data
def test_both_files_parse(records):
    assert (records["source"] == "data").sum() == 32561  # as the data README counts
    assert (records["source"] == "test").sum() == 16281  # the odd first line skipped
    assert set(records["income"]) == {"<=50K", ">50K"}  # the test file's trailing '.' stripped
    assert (records["workclass"] == "?").sum() == 1836 + 963


@needs_data
def test_groups_have_proportions_of_their_own_records(records):
    vectors, set_ids, labels, keys = group_records(records, log_capital=False)
    kept = records[records["workclass"] != "?"]
    assert vectors.shape == (len(kept), 6) and np.all(np.diff(set_ids) >= 0)
    np.testing.assert_allclose(labels.sum(axis=1), 1.0)
    rng = np.random.default_rng(0)
    for n in rng.choice(len(keys), 25, replace=False):
        own = kept[(kept[list(GROUP_BY)] == pd.Series(keys[n], index=list(GROUP_BY))).all(axis=1)]
        expected = own["workclass"].value_counts(normalize=True).reindex(WORKCLASSES, fill_value=0)
        np.testing.assert_allclose(labels[n], expected.to_numpy())
        np.testing.assert_allclose(
            np.sort(vectors[set_ids == n], axis=0),
            np.sort(own[list(CONTINUOUS)].to_numpy(float), axis=0),
        )
    assert "?" not in set(kept["workclass"])


@needs_data
def test_capital_columns_are_log_transformed(records):
    raw, _, _, _ = group_records(records, log_capital=False)
    logged, _, _, _ = group_records(records, log_capital=True)
    gain = CONTINUOUS.index("capital-gain")
    np.testing.assert_allclose(logged[:, gain], np.log1p(raw[:, gain]))
    np.testing.assert_allclose(logged[:, 0], raw[:, 0])


def test_class_prior_predicts_training_proportions():
    labels = np.array([[0.5, 0.5, 0.0], [1.0, 0.0, 0.0], [0.0, 0.25, 0.75]])
    sets = RaggedSets.from_list([np.ones((2, 2)), np.zeros((1, 2)), np.ones((3, 2))], labels)
    model = fit_class_prior(sets, np.zeros((1, 2)))
    probs = np.exp(np.asarray(model.log_predictive(sets)))
    np.testing.assert_allclose(probs, np.tile(labels.mean(axis=0), (3, 1)), rtol=1e-5, atol=1e-7)


@needs_data
@pytest.mark.extended  # one of the longest end-to-end runs
def test_adult_experiment_runs_on_a_subsample(tmp_path):
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = compose(
            config_name="config",
            overrides=[
                "experiment=adult",
                "trials=1",
                "model.n_prototypes=3",
                "model.max_rounds=2",
                "optimizer.max_iter=5",
                "dataset.split.subsample=200",
                "l2_selection.folds=2",
                # the neural baselines, small and short: the table has them (issue 33)
                "baselines.attention_mil.embedding=[8]",
                "baselines.attention_mil.max_epochs=3",
                "baselines.deep_sets.embedding=[8]",
                "baselines.deep_sets.max_epochs=3",
            ],
        )
    results = run(cfg, output_dir=tmp_path)
    for name in ("adult.md", "prototypes.md", "prototypes.csv", "prototypes.png", "results.json"):
        assert (tmp_path / name).is_file(), name
    methods = ["dpp", "standard", "pooling", "bag_of_words", "class_prior", "attention_mil",
               "deep_sets"]  # fmt: skip
    assert [r["method"] for r in results["trials"]] == methods
    for record in results["trials"]:
        assert record["num_train"] == 100 and record["num_test"] == 100
    # KL(P || Q) = sum P log P - sum P log Q over the same test sets: KL (in nats) plus the
    # test log-likelihood is minus the test labels' entropy, the same for every method
    entropy = [-(r["kl_bits"] * np.log(2) + r["test_log_likelihood"]) for r in results["trials"]]
    np.testing.assert_allclose(entropy, entropy[0], rtol=1e-6)
    assert 0 < entropy[0] < np.log(3)  # soft labels over 3 classes, not all one-hot
    table = (tmp_path / "adult.md").read_text()
    for record in results["trials"]:  # the table shows each method's measured KL (1 trial)
        assert f"{record['kl_bits']:.3f} |" in table, record["method"]
    assert "| paper (DPP) | 1.12 | 77 |" in table  # and the paper's, beside them
    assert "Class prior" in table and "Attention MIL" in table
    prototypes = (tmp_path / "prototypes.csv").read_text().splitlines()
    assert len(prototypes) == 1 + 3 and "p(Private)" in prototypes[0]


# ------------------------------------------------------------------ issue 8, observation 7
def _adult_copy(tmp_path, edit):
    """The real ADULT files copied, with ``edit(lines)`` applied to adult.data."""
    source = FOLDER
    if not (source / "adult.data").is_file():
        pytest.skip(f"ADULT not found in {FOLDER}")
    folder = tmp_path / "adult"
    folder.mkdir()
    (folder / "adult.test").write_text((source / "adult.test").read_text())
    lines = (source / "adult.data").read_text().splitlines(keepends=True)[:400]
    (folder / "adult.data").write_text("".join(edit(lines)))
    return folder


def test_record_cut_short_names_file_and_line(tmp_path):
    """Was: pandas' "could not convert string to float: ''" with no file or line."""
    folder = _adult_copy(tmp_path, lambda lines: lines[:250] + [lines[250][:40]])
    with pytest.raises(DataError, match=r"adult\.data, line 251: record cut short"):
        read_records(folder)


def test_truncated_income_label_is_rejected(tmp_path):
    """Was: a truncated income `<=` became a third class and 17.5 k records vanished silently."""

    def truncate(lines):
        lines[99] = lines[99].rstrip("\n").rsplit(",", 1)[0] + ", <=\n"
        return lines

    folder = _adult_copy(tmp_path, truncate)
    with pytest.raises(DataError, match=r"adult\.data, line 100: unknown income '<='"):
        read_records(folder)


def test_non_numeric_field_names_the_column(tmp_path):
    def corrupt(lines):
        lines[9] = "forty" + lines[9][2:]
        return lines

    folder = _adult_copy(tmp_path, corrupt)
    with pytest.raises(DataError, match=r"line 10: 'age' is not a number: 'forty'"):
        read_records(folder)
