"""Issue 80, item 1: benchmarks/round0.py, what a plain fit's first (mu, beta)-step does."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import round0  # noqa: E402


@pytest.mark.extended  # six small fits (about 15 s)
@pytest.mark.filterwarnings("ignore:.*. fit max_rounds:dpp.errors.FitWarning")  # one round
def test_the_probe_measures_an_ascent_step_from_the_standard_prototypes_centres():
    full = round0.one_draw("synthetic", 0, 40)
    partial = round0.one_draw("synthetic", 0, 40, {"max_iter": 1})
    for row in (full, partial):
        assert row["train"] == 40 and row["held_out"] == 360 and row["K"] == 2
        # coordinate ascent: the step cannot lower the training objective's likelihood by much
        # (the ridge is part of L; on 40 sets it is small beside the likelihood's rise)
        assert row["round1_train_ll"] > row["round0_train_ll"]
        assert 0 < row["beta_ratio"] <= 2.0 + 1e-6  # beta_step_limit
        assert 0.0 <= row["saturated_round0"] <= 1.0 and 0.0 <= row["saturated_round1"] <= 1.0
        assert row["grad_mu_rms"] > 0 and row["grad_log_beta"] >= 0
    # the same start, so the same round 0; one iteration moves the prototypes less
    assert full["round0_held_ll"] == partial["round0_held_ll"]
    assert partial["displacement_rms"] < full["displacement_rms"]
    assert full["saturated_round1"] > full["saturated_round0"]  # the whole solve saturates
    assert "| synthetic |" in round0.table([full, partial])
