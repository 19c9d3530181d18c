"""End-to-end results on the real data: the paper's claims, at reduced size by default.

The default run checks one Indian Pines partition (about 20 s); ``pytest -m slow`` runs the
longer checks (several trials of each experiment, a few minutes each).
"""

import pytest
from conftest import CONFIG_DIR
from hydra import compose, initialize_config_dir

from dpp.datasets.base import default_data_dir
from dpp.experiment.runner import run
from dpp.experiment.tables import paired_differences

needs_data = pytest.mark.skipif(
    not default_data_dir().is_dir(), reason=f"no data directory at {default_data_dir()}"
)


def _run(tmp_path, overrides):
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = compose(config_name="config", overrides=overrides)
    return run(cfg, output_dir=tmp_path)


def _mean(results, method, metric):
    return results["summary"][method][metric]["mean"]


@pytest.mark.extended  # one of the longest end-to-end runs
@needs_data
def test_indian_pines_dpp_beats_standard_prototype(tmp_path):
    """Table 2's claim on one partition: DPP ahead of the standard prototype by > 5 points."""
    results = _run(tmp_path, ["experiment=table2_indian_pines", "trials=1", "~baselines.infoloss",
                              "~baselines.pooling", "~baselines.bag_of_words",
                              "~baselines.attention_mil", "~baselines.deep_sets", "figures=[]",
                              "model.max_rounds=3", "optimizer.max_iter=20"])  # fmt: skip
    assert _mean(results, "dpp", "accuracy") - _mean(results, "standard", "accuracy") > 0.05
    assert _mean(results, "dpp", "test_log_likelihood") > _mean(
        results, "standard", "test_log_likelihood"
    )


@needs_data
@pytest.mark.slow
def test_table2_ranking_over_three_partitions(tmp_path):
    results = _run(tmp_path, ["experiment=table2_indian_pines", "trials=3"])
    assert min(paired_differences(results, "accuracy", "dpp", "standard")) > 0.05
    assert min(paired_differences(results, "accuracy", "dpp", "infoloss")) > 0
    assert _mean(results, "dpp", "accuracy") > 0.9


@needs_data
@pytest.mark.slow
def test_table1_dpp_beats_standard_in_every_trial(tmp_path):
    results = _run(tmp_path, ["experiment=table1_mpeg7", "trials=3"])
    assert min(paired_differences(results, "accuracy", "dpp", "standard")) > 0
    assert min(paired_differences(results, "test_log_likelihood", "dpp", "standard")) > 0
    assert _mean(results, "dpp", "accuracy") >= 0.855


@needs_data
@pytest.mark.slow
def test_adult_kl_below_paper_and_baselines(tmp_path):
    results = _run(tmp_path, ["experiment=adult", "trials=3"])
    assert _mean(results, "dpp", "kl_bits") <= 1.12
    assert min(paired_differences(results, "kl_bits", "standard", "dpp")) > 0
    assert min(paired_differences(results, "kl_bits", "class_prior", "dpp")) > 0
    assert _mean(results, "dpp", "accuracy") >= 0.77
