"""Issue 82: what a new user still hit: the last bad inputs, mistyped overrides, the selection's
progress on a terminal, run logs and figures a reader can trust."""

import io
import sys
from pathlib import Path

import numpy as np
import pytest

import dpp
from dpp.experiment.config_check import did_you_mean, unknown_override_keys

CONFIGS = Path(__file__).resolve().parents[1] / "configs"


def _sets(n=40, d=4, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.normal(size=(int(rng.integers(2, 6)), d)) + (i % 2) for i in range(n)]


def test_one_column_soft_labels_are_refused_like_one_hard_class():
    with pytest.raises(ValueError, match=r"soft labels need .* at least 2 classes; y has shape "
                                         r"\(40, 1\)"):  # fmt: skip
        dpp.DPPClassifier(n_prototypes=2).fit(_sets(), np.ones((40, 1)))


def test_string_features_name_the_set_not_numpys_ufunc():
    X = _sets()
    X[3] = X[3].astype(str)
    with pytest.raises(ValueError, match=r"set 3 holds <U\d+ values .*features must be numbers"):
        dpp.DPPClassifier(n_prototypes=2).fit(X, np.arange(40) % 2)
    vectors = np.array([["a", "b"], ["c", "d"]])
    with pytest.raises(ValueError, match="vectors hold <U1 values"):
        dpp.estimators.inputs.as_sets((vectors, np.array([0, 1])))


def test_a_3d_array_is_n_sets_of_equal_size_as_documented():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 5, 4))
    sets = dpp.estimators.inputs.as_sets(X)
    assert sets.num_sets == 40 and sets.dim == 4 and set(sets.set_sizes().tolist()) == {5}
    np.testing.assert_array_equal(np.asarray(sets.vectors), X.reshape(200, 4).astype(np.float32))
    with pytest.raises(ValueError, match=r"an \[N, M, D\] array of sets of equal size"):
        dpp.estimators.inputs.as_sets(rng.normal(size=(40, 4)))
    with pytest.raises(ValueError, match="got int"):
        dpp.estimators.inputs.as_sets(7)


def test_predicting_on_no_sets_names_x_not_an_internal_variable():
    clf = dpp.DPPClassifier(n_prototypes=2, max_rounds=1).fit(_sets(), np.arange(40) % 2)
    with pytest.raises(ValueError, match=r"no sets given: X is an empty list") as raised:
        clf.predict([])
    assert "`vectors`" not in str(raised.value)


def test_a_selection_on_too_few_sets_names_n():
    with pytest.raises(ValueError, match=r"folds=5 and N=2: pass cv=2 or more sets"):
        dpp.DPPClassifierCV().fit(_sets(2), [0, 1])


def test_did_you_mean_finds_keys_within_two_edits_and_nothing_far():
    options = ["n_prototypes", "l2", "max_rounds", "pooling"]
    assert did_you_mean("n_prototype", options, "model.") == "; did you mean model.n_prototypes?"
    assert did_you_mean("l3", options) == "; did you mean l2?"
    assert did_you_mean("max_round", options) == "; did you mean max_rounds?"
    assert did_you_mean("learning_rate", options) == ""
    assert did_you_mean("k", options) == ""


def test_a_mistyped_override_key_gets_a_suggestion_from_the_run_it_belongs_to():
    messages = unknown_override_keys(["model.n_prototype=4", "trials=2", "-m"], CONFIGS)
    assert messages == ["model.n_prototype is not a key of this run's config; did you mean "
                        "model.n_prototypes?"]  # fmt: skip
    picked = ["model=embedded_dpp", "model.embeding=[8]", "hydra.run.dir=x", "+model.x=1"]
    (message,) = unknown_override_keys(picked, CONFIGS)
    assert "model.embeding" in message and "did you mean model.embedding?" in message
    assert unknown_override_keys(["model.l2=1e-3,1e-2", "seed=1"], CONFIGS) == []


def test_an_appended_key_the_estimator_lacks_is_named_with_a_suggestion():
    from omegaconf import OmegaConf

    from dpp.errors import ConfigError
    from dpp.experiment.config_check import _method

    cfg = OmegaConf.create({"model": {"_target_": "dpp.DPPClassifier", "n_prototype": 4},
                            "optimizer": {"name": "lbfgs_optax"}})  # fmt: skip
    with pytest.raises(
        ConfigError,
        match=r"model.n_prototype: DPPClassifier has no parameter "
        r"'n_prototype'; did you mean model.n_prototypes\?",
    ):
        _method(cfg, "model")


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_the_selections_bar_is_on_by_default_on_a_terminal_and_off_in_a_pipe(monkeypatch):
    from dpp.solvers.progress import bar

    assert dpp.DPPClassifierCV().verbose == "auto"

    def disabled(enabled) -> bool:
        with bar(3, "x", enabled) as made:
            return made.disable

    monkeypatch.setattr(sys, "stderr", io.StringIO())
    assert disabled("auto") and disabled(False) and not disabled(True)
    monkeypatch.setattr(sys, "stderr", _Terminal())
    assert not disabled("auto") and disabled(False)


def test_the_bars_eta_leaves_out_the_seconds_spent_compiling(monkeypatch):
    """A rate over time that was mostly compiling promised 24 min for a 70 s selection."""
    from dpp.solvers.progress import BACKEND_COMPILE_EVENT, bar

    monkeypatch.setattr(sys, "stderr", _Terminal())
    with bar(10, "x", True) as progress:
        progress.start_t -= 10.0  # 10 s open, of which 8 s compiling, 2 fits done
        progress._on_duration(BACKEND_COMPILE_EVENT, 8.0)
        progress.update(2)
        info = progress.format_dict
        assert info["rate"] == pytest.approx(2 / (info["elapsed"] - 8.0), rel=1e-6)
        assert info["rate"] > 2 / info["elapsed"] * 3  # 1 fit/s, not 0.2
        assert "compiled 8 s" in str(progress)


def test_dpp_classifier_cv_checks_its_verbose():
    with pytest.raises(ValueError, match="verbose"):
        dpp.DPPClassifierCV(verbose="loud").check_params()


def test_centres_out_of_view_are_arrows_whose_labels_sit_in_the_legend_not_on_the_data():
    import matplotlib.pyplot as plt

    from dpp.experiment.plots import _centres_in_view

    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(200, 2))
    centres = np.array([[0.2, 0.1], [40.0, -30.0], [-25.0, 5.0]])
    fig, ax = plt.subplots()
    far = _centres_in_view(ax, centres, vectors)
    assert far == [1, 2]
    assert [t.get_text() for t in ax.texts] == ["", ""]  # two arrows, no label inside the panel
    labels = [h.get_label() for h in ax.get_lines()]
    far_off = [np.linalg.norm(centres[k] - vectors.mean(0)) for k in (1, 2)]
    assert labels == [f"$\\mu_{{{k}}}$ out of view, {d:.3g} from the data's mean"
                      for k, d in zip((1, 2), far_off, strict=True)]  # fmt: skip
    lo, hi = vectors.min(0), vectors.max(0)
    assert ax.get_xlim()[0] < lo[0] and ax.get_xlim()[1] > hi[0]
    for arrow in ax.texts:  # every arrow's tip inside the panel
        assert ax.get_xlim()[0] <= arrow.xy[0] <= ax.get_xlim()[1]
        assert ax.get_ylim()[0] <= arrow.xy[1] <= ax.get_ylim()[1]
    plt.close(fig)


def test_the_history_figure_names_every_trial_one_that_stopped_at_round_0_too(tmp_path):
    import matplotlib.image

    from dpp.experiment import plots

    drawn = {}

    def keep(fig, path, dpi=120):
        drawn["legend"] = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
        drawn["points"] = [len(line.get_xdata()) for line in fig.axes[0].get_lines()]
        return path

    records = [
        {"trial": 0, "method": "dpp", "num_train": 20, "fit_status": "early_stopped",
         "objective_history": [-10.0]},
        {"trial": 1, "method": "dpp", "num_train": 20, "fit_status": "early_stopped",
         "objective_history": [-10.0, -0.8]},
        {"trial": 1, "method": "standard", "objective_history": [-3.0]},
    ]  # fmt: skip
    real = plots.save_figure
    plots.save_figure = keep
    try:
        plots.objective_histories(records, tmp_path / "history.png")
    finally:
        plots.save_figure = real
    assert drawn["legend"] == ["trial 0, 20 sets, early_stopped at round 0",
                               "trial 1, 20 sets, early_stopped at round 1"]  # fmt: skip
    assert drawn["points"] == [1, 2]
    path = plots.objective_histories(records, tmp_path / "history.png")
    assert matplotlib.image.imread(path).shape[2] in (3, 4)


def test_a_trials_fit_seconds_leave_out_its_compilation():
    from dpp.experiment.protocol import summary_line
    from dpp.experiment.reporting import markdown_table, summarize

    record = {"trial": 0, "method": "dpp", "K": 2, "accuracy": 0.9, "test_log_likelihood": -0.3,
              "fit_seconds": 0.04, "compile_seconds": 2.5, "fit_status": "converged"}  # fmt: skip
    assert "fit 0.0 s (+ 2.5 s compiling)  (converged)" in summary_line(record)
    table = markdown_table(summarize([record]))
    assert "| fit (s) | compile (s) |" in table and "| 0.04 | 2.50 |" in table
