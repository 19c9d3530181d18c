"""Metrics and summaries: KL in bits, accuracy on soft labels, the results summary."""

import numpy as np
import pytest

from dpp.experiment.reporting import describe, markdown_table, summarize
from dpp.metrics import accuracy, evaluate, kl_bits, mean_log_likelihood


def test_kl_in_bits_by_hand():
    p = np.array([[0.5, 0.5, 0.0], [1.0, 0.0, 0.0]])
    q = np.array([[0.25, 0.75, 0.0 + 1e-300], [0.5, 0.25, 0.25]])
    # set 0: 0.5 log2(0.5/0.25) + 0.5 log2(0.5/0.75) = 0.5 - 0.5 log2(1.5); set 1: log2(2) = 1
    expected = ((0.5 - 0.5 * np.log2(1.5)) + 1.0) / 2
    assert kl_bits(np.log(q), p) == pytest.approx(expected, rel=1e-12)


def test_kl_is_zero_for_identical_distributions():
    p = np.array([[0.2, 0.8], [1.0, 0.0], [0.5, 0.5]])
    with np.errstate(divide="ignore"):
        assert kl_bits(np.log(p), p) == pytest.approx(0.0, abs=1e-15)


def test_soft_label_metrics():
    labels = np.array([[0.6, 0.4], [0.3, 0.7], [0.5, 0.5]])
    probs = np.array([[0.9, 0.1], [0.8, 0.2], [0.4, 0.6]])
    # argmax: predicted 0, 0, 1; labels 0, 1, 0 (the tie in set 2 goes to the first class)
    assert accuracy(np.log(probs), labels) == pytest.approx(1 / 3)
    expected_ll = np.mean(np.sum(labels * np.log(probs), axis=1))
    assert mean_log_likelihood(np.log(probs), labels) == pytest.approx(expected_ll)
    metrics = evaluate(np.log(probs), labels)
    assert set(metrics) == {"accuracy", "balanced_accuracy", "test_log_likelihood", "kl_bits"}
    # truth 0, 1, 0 and predictions 0, 0, 1: recall 1/2 for class 0 and 0 for class 1
    assert metrics["balanced_accuracy"] == pytest.approx(0.25)
    assert "kl_bits" not in evaluate(np.log(probs), np.eye(2)[[0, 1, 1]])


def test_summary_statistics_and_table():
    records = [{"method": "dpp", "accuracy": a, "test_log_likelihood": -a} for a in (0.8, 0.9, 1.0)]
    records.append({"method": "standard", "accuracy": 0.5, "test_log_likelihood": -1.0})
    summary = summarize(records)
    assert summary["dpp"]["accuracy"] == describe([0.8, 0.9, 1.0])
    assert summary["dpp"]["accuracy"]["std"] == pytest.approx(0.1)
    assert summary["dpp"]["accuracy"]["stderr"] == pytest.approx(0.1 / np.sqrt(3))
    assert summary["standard"]["accuracy"]["std"] is None
    table = markdown_table(summary)
    assert "| dpp | 3 | 90.00 ± 10.00 |" in table and "| standard | 1 | 50.00 |" in table
    assert "two standard errors" in markdown_table(summary, spread="stderr2")
