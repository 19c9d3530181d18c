"""The Hydra configs and run(cfg) end to end on the small synthetic problem."""

import inspect
import json

import numpy as np
import pytest
from conftest import CONFIG_DIR
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate
from omegaconf import OmegaConf

import dpp
from dpp.datasets.base import Dataset
from dpp.estimators import (
    ESTIMATORS,
    NEURAL_ESTIMATORS,
    POOLED_ESTIMATORS,
    StandardPrototypeClassifier,
)
from dpp.experiment.runner import run
from dpp.experiment.settings import trial_settings

#: a few 2-D sets to predict on (the synthetic data's dimension)
X_FEW = [np.random.default_rng(0).normal(size=(m, 2)) for m in (1, 3, 7)]
FAST = [
    "model.max_rounds=3",
    "optimizer.max_iter=10",
    "optimizer.theta_max_iter=100",
    "dataset.loader.num_sets=40",
]


def _compose(overrides=()):
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        return compose(config_name="config", overrides=list(overrides))


def _group_options(group):
    return sorted(p.stem for p in (CONFIG_DIR / group).glob("*.yaml"))


@pytest.mark.parametrize("optimizer", _group_options("optimizer"))
@pytest.mark.parametrize("model", _group_options("model"))
def test_cli_and_python_defaults_are_the_same(model, optimizer):
    """One source of truth: a config builds the estimator its Python defaults build."""
    cfg = _compose([f"model={model}", f"optimizer={optimizer}", "verbose=false"])
    estimator = trial_settings(cfg).methods[model]
    takes = inspect.signature(ESTIMATORS[model]).parameters  # the embedded DPP: no optimizer
    python = ESTIMATORS[model](**({"optimizer": optimizer} if "optimizer" in takes else {}))
    expected = python.get_params()
    got = estimator.get_params()
    # the default dataset's one model choice: section 4.1's K = 2 (configs/dataset/synthetic.yaml)
    assert got.pop("n_prototypes") == 2
    expected.pop("n_prototypes")
    # the trial standardises the sets itself, as the dataset config says (synthetic: no); the
    # class prior, a closed form, takes no standardize
    if model != "class_prior":
        assert expected.pop("standardize") is True and got.pop("standardize") is False
    assert "standardize" not in expected and "standardize" not in got
    got_options = got.pop("optimizer_options", None)
    assert expected.pop("optimizer_options", None) is None
    for key in ("embedding", "weight_decay"):  # a tuple in Python, a list in the config
        if isinstance(expected.get(key), tuple):
            assert list(got.pop(key)) == list(expected.pop(key))
    assert got == expected
    if model == "dpp":  # the solver settings are the same (early stopping is not among them)
        assert estimator.fit_settings() == python.fit_settings()
        assert python.set_params(optimizer_options=got_options).fit_settings() == (
            estimator.fit_settings()
        )


@pytest.mark.parametrize("dataset", ["sets_file", "generated"])
def test_a_dataset_without_a_paper_k_fits_the_estimators_default_k(dataset, tmp_path):
    """Issue 36: the root config's K = 2 (section 4.1's) used to apply to your own sets too."""
    path = [f"dataset.path={tmp_path / 'sets.npz'}"] if dataset == "sets_file" else []
    cfg = _compose([f"dataset={dataset}", *path])
    methods = trial_settings(cfg).methods
    default = ESTIMATORS["dpp"]().n_prototypes
    assert methods["dpp"].n_prototypes == methods["standard"].n_prototypes == default == 10
    assert methods["bag_of_words"].n_prototypes == default
    assert _compose(["experiment=synthetic"]).model.n_prototypes == 2  # the paper's K stays


def test_the_synthetic_table_pins_the_papers_rounds_and_the_plain_run_fits_the_default():
    """Issue 56: the plain fit's default chooses its rounds on folds of small data; the paper's
    synthetic table (experiment=synthetic) keeps rounds by tol, and says so; the plain run fits
    what DPPClassifier() fits."""
    assert _compose(["experiment=synthetic"]).model.validation_fraction == 0.0
    plain = trial_settings(_compose([])).methods["dpp"]
    assert plain.validation_fraction == ESTIMATORS["dpp"]().validation_fraction == 0.2


@pytest.mark.parametrize("experiment", _group_options("experiment"))
def test_every_experiment_config_composes_and_resolves(experiment):
    cfg = _compose([f"experiment={experiment}"])
    OmegaConf.to_container(cfg, resolve=True)
    assert cfg.name


@pytest.mark.parametrize(
    "dataset", [d for d in _group_options("dataset") if d.startswith("synthetic")]
)
def test_synthetic_dataset_configs_instantiate(dataset):
    cfg = _compose([f"dataset={dataset}"])
    data = instantiate(cfg.dataset.loader)
    assert isinstance(data, Dataset) and data.sets.num_sets == cfg.dataset.loader.num_sets


def test_overrides_reach_the_estimators():
    settings = trial_settings(
        _compose(
            ["model.n_prototypes=4", "optimizer=lbfgs_jaxopt", "model.l2=0.5", "verbose=false"]
        )
    )
    dpp_clf, standard = settings.methods["dpp"], settings.methods["standard"]
    assert (standard.n_prototypes, standard.l2) == (4, 0.5)  # the baseline shares K and lambda
    fit = dpp_clf.fit_settings()
    assert fit.l2 == 0.5 and fit.prototype_solver.backend == "lbfgs_jaxopt"
    assert fit.theta_solver.backend == "lbfgs_jaxopt" and fit.theta_solver.max_iter == 500
    # a baseline of the model's own method is not fitted twice
    methods = list(trial_settings(_compose(["model=standard"])).methods)
    assert methods == ["standard", "pooling", "bag_of_words"]
    # the embedded DPP's weight decay: one number, or the candidates to keep the best of
    for override, candidates in (("0.01", (0.01,)), ("[0.01,0.1]", (0.01, 0.1))):
        cfg = _compose(["model=embedded_dpp", f"model.weight_decay={override}"])
        assert trial_settings(cfg).methods["embedded_dpp"].decay_candidates() == candidates


@pytest.mark.parametrize("baseline", _group_options("baseline"))
def test_cli_and_python_defaults_of_the_pooled_baselines_are_the_same(baseline):
    if baseline in NEURAL_ESTIMATORS:  # in the paper experiments' configs, not the root's
        cfg = _compose(["experiment=table1_mpeg7", "verbose=false"])
        got = trial_settings(cfg).methods[baseline].get_params()
        expected = NEURAL_ESTIMATORS[baseline]().get_params()
        assert got.pop("embedding") == list(expected.pop("embedding"))  # a list in the config
        # their own standardize=True, not MPEG-7's false (which left them at chance, issue 33)
        assert cfg.dataset.standardize is False and got["standardize"] is True
        assert got == expected
        return
    cfg = _compose(["verbose=false"])
    got = trial_settings(cfg).methods[baseline].get_params()
    expected = POOLED_ESTIMATORS[baseline]().get_params()
    assert got.pop("Cs") == list(expected.pop("Cs"))  # a list in the config
    if baseline == "bag_of_words":  # the model's K, and the trial standardises the sets
        assert got.pop("n_prototypes") == 2 and expected.pop("n_prototypes") == 10
        assert got.pop("standardize") is False and expected.pop("standardize") is True
    assert got == expected


@pytest.mark.extended  # 7-21 s of fits or CLI runs: the default tier keeps to 5 minutes
def test_run_writes_results_table_and_figures(tmp_path):
    cfg = _compose(FAST)
    results = run(cfg, output_dir=tmp_path)
    for name in (
        "results.json",
        "results.csv",
        "table.md",
        "figure1.png",
        "loglik.png",
        "history.png",
        "config_resolved.yaml",
    ):
        assert (tmp_path / name).is_file(), name
    on_disk = json.loads((tmp_path / "results.json").read_text())
    assert on_disk["status"] == "complete"
    methods = ["dpp", "standard", "pooling", "bag_of_words"]
    assert [r["method"] for r in on_disk["trials"]] == methods
    # issue 36: every method's model is saved, the pooled baselines' too
    for method in methods:
        assert dpp.load(tmp_path / "models" / f"{method}.npz").predict_proba(X_FEW).shape[1] == 2
    # each record's test figures are those of its saved model on trial 0's test sets
    from dpp.datasets.synthetic import make_synthetic
    from dpp.experiment.splits import split_indices
    from dpp.metrics import evaluate

    data = make_synthetic(num_sets=40, min_size=1, max_size=20, seed=0)
    labels = np.asarray(data.sets.labels)
    _, test_idx = split_indices(labels, "stratified", seed=0, train_fraction=0.2)
    test = data.sets.subset(test_idx)
    for record in on_disk["trials"]:
        assert record["num_train"] == 8 and record["num_test"] == 32
        model = dpp.load(tmp_path / "models" / f"{record['method']}.npz")
        metrics = evaluate(model.predict_log_proba(test), labels[test_idx])
        assert record["accuracy"] == pytest.approx(metrics["accuracy"], abs=1e-12)
        assert record["test_log_likelihood"] == pytest.approx(
            metrics["test_log_likelihood"], rel=1e-6
        )
    assert sorted(p.name for p in (tmp_path / "models").iterdir()) == sorted(
        f"{m}.npz" for m in methods
    )  # the first trial's models
    assert set(on_disk["summary"]) == set(methods)
    table = (tmp_path / "table.md").read_text()
    assert "| dpp | 1 |" in table
    assert table.startswith("# synthetic\n")  # issue 56: not "# synthetic: synthetic"
    assert results["summary"] == on_disk["summary"]


@pytest.mark.extended  # two end-to-end CLI runs (over 7 s): the default tier keeps near 5 minutes
def test_same_seed_repeats_exactly(tmp_path):
    cfg = _compose(FAST + ["trials=2"])
    first = run(cfg, output_dir=tmp_path / "a")
    second = run(cfg, output_dir=tmp_path / "b")

    def without_timings(record):
        out = {k: v for k, v in record.items() if not k.endswith("seconds")}
        out["info"] = {k: v for k, v in record["info"].items() if k != "seconds"}
        facts = out["info"].get("prototypes")
        if facts and "steps" in facts:
            steps = {k: v for k, v in facts["steps"].items() if k != "seconds"}
            out["info"]["prototypes"] = {**facts, "steps": steps}
        return out

    for a, b in zip(first["trials"], second["trials"], strict=True):
        assert without_timings(a) == without_timings(b)
    assert first["trials"][0]["seed"] == 0 and first["trials"][-1]["seed"] == 1


class RaisingStandard(StandardPrototypeClassifier):
    """A method plugged in by ``_target_`` whose fit fails with an unexpected error."""

    def _fit_model(self, sets, seed):
        raise RuntimeError("the baseline broke")


def test_failed_run_keeps_finished_trials(tmp_path):
    # the standard baseline fails after dpp finished
    cfg = _compose(FAST + ["baselines.standard._target_=test_experiment.RaisingStandard"])
    with pytest.raises(RuntimeError, match="the baseline broke"):
        run(cfg, output_dir=tmp_path)
    on_disk = json.loads((tmp_path / "results.json").read_text())
    assert on_disk["status"] == "failed" and "the baseline broke" in on_disk["error"]
    assert [r["method"] for r in on_disk["trials"]] == ["dpp"]


def test_missing_data_is_reported_in_results(tmp_path):
    cfg = _compose(["dataset=mpeg7", f"data_dir={tmp_path / 'nowhere'}"])
    with pytest.raises(FileNotFoundError, match="nowhere"):
        run(cfg, output_dir=tmp_path / "run")
    on_disk = json.loads((tmp_path / "run" / "results.json").read_text())
    assert (
        on_disk["status"] == "failed" and "nowhere" in on_disk["error"] and on_disk["trials"] == []
    )


def test_loglik_figure_spans_the_data_and_shows_errors_only_with_several_trials():
    import matplotlib.pyplot as plt

    from dpp.experiment.plots import metric_dots_figure

    def records(trials):
        return [
            {"trial": t, "method": m, "test_log_likelihood": v + 0.001 * t}
            for t in range(trials)
            for m, v in (("dpp", -0.28), ("standard", -0.30))
        ]

    one = metric_dots_figure(records(1), "test_log_likelihood", "LL", "nats")
    ax = one.axes[0]
    low, high = ax.get_ylim()
    assert -0.31 < low < -0.30 and -0.28 < high < -0.27  # the 0.02-nat gap fills the axis
    assert "s.e." not in ax.get_title() and "(1 trial)" in ax.get_title()
    assert not any(c.has_yerr for c in ax.containers)
    three = metric_dots_figure(records(3), "test_log_likelihood", "LL", "nats").axes[0]
    assert "± 2 s.e." in three.get_title()
    assert all(c.has_yerr for c in three.containers)
    plt.close("all")


def _comment(text: str) -> str:
    """A config file's leading comment, as one line."""
    lines = [line[1:].strip() for line in text.splitlines() if line.startswith("#")]
    return " ".join(lines)


def _claimed(value: str):
    """A default as a comment writes it (``false``, ``5e-4``, ``[256, 128, 64]``, ``max``)."""
    if value in ("true", "false"):
        return value == "true"
    value = value.rstrip(".")  # the end of a sentence
    if value.startswith("["):
        return json.loads(value)
    try:
        return float(value)
    except ValueError:
        return value


def test_the_config_comments_say_what_the_code_does():
    """Issue 45: comments of ``configs/`` had drifted from the code (verbose's host callback,
    the pooling default). Each model and baseline config's comment names every key it has, its
    ``key = value`` defaults are the estimator's and its ``key (a | b)`` choices the rule's; the
    root config's statements about ``DPPClassifierCV``'s defaults are its defaults."""
    import re

    from dpp import params as check
    from dpp.experiment.config_store import model_node

    checked = 0
    for path in sorted(CONFIG_DIR.glob("*/*.yaml")):
        text = path.read_text()
        found = re.search(r"/dpp_defaults/model@_here_: (\w+)", text)
        if not found:
            continue
        cls = ESTIMATORS[found.group(1)]
        node = {k: v for k, v in model_node(cls).items() if k != "_target_"}
        comment = _comment(text)
        missing = [k for k in node if not re.search(rf"\b{k}\b", comment)]
        assert not missing, f"{path.name}: keys not in its comment: {missing}"
        for key, value in re.findall(r"\b(\w+) = (\[[^\]]*\]|[\w.+-]+)", comment):
            if key in node:
                claimed, actual = _claimed(value), node[key]
                assert claimed == actual, f"{path.name}: {key} = {value}, the code's {actual!r}"
                checked += 1
        for key, options in re.findall(r"\b(\w+) \(([\w]+(?: \| [\w]+)+)\)", comment):
            rule = cls.PARAMETER_RULES.get(key)
            if isinstance(rule, check.Choice):
                assert set(options.split(" | ")) == set(rule.options), (path.name, key)
                checked += 1
    assert checked >= 20  # the parser found the claims it checks
    lines = (CONFIG_DIR / "config.yaml").read_text().splitlines()
    root = " ".join(line.split("#", 1)[1].strip() for line in lines if "#" in line)
    cv = dpp.DPPClassifierCV()
    poolings = re.search(r"DPPClassifierCV's own default is \[([\w, ]+)\]", root).group(1)
    assert tuple(poolings.split(", ")) == tuple(cv.pooling)
    assert re.search(r"DPPClassifierCV's default, (\w+)", root).group(1) == cv.rule
