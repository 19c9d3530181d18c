"""A selection on every core, compiled once (issue 44).

``DPPClassifierCV(n_jobs=...)`` runs its (candidate, fold) fits in joblib threads: every fit,
and so every score, choice and prediction, must be the one ``n_jobs=1`` gives, to the bit. Its
pooling candidates run one coordinate-ascent program (the pooling's kind as data,
:class:`dpp.pooling.PoolingChoice`), each branch exactly the static pooling's fit.
"""

import json
import os
import warnings
from pathlib import Path

import numpy as np
import pytest
from lab import run_suite
from test_experiment import FAST, _compose

from dpp import DPPClassifier, DPPClassifierCV
from dpp.datasets.generated import make_generated
from dpp.errors import FitWarning
from dpp.estimators import RAW_VECTORS
from dpp.experiment.compilation import CompileCounter
from dpp.experiment.runner import run
from dpp.pooling import POOLINGS, GeMPooling, PoolingChoice, as_choice, resolved

pytestmark = pytest.mark.filterwarnings("ignore::dpp.errors.FitWarning")


def _results(search: DPPClassifierCV) -> dict:
    """``cv_results_`` without its timings (the one thing ``n_jobs`` may change)."""
    return {k: v for k, v in search.cv_results_.items() if not k.endswith("_time")}


def _params(search: DPPClassifierCV) -> dict:
    """``best_params_``, an ensemble's members (estimators) by their parameters."""
    params = dict(search.best_params_)
    if "estimators" in params:  # the ensemble's own: its members with their choices
        params["estimators"] = [(n, e.get_params()) for n, e in params["estimators"]]
    return params


def _assert_same_results(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for key in a:
        left, right = a[key], b[key]
        if isinstance(left, np.ndarray) and left.dtype != object:
            np.testing.assert_array_equal(left, right, err_msg=key)
        else:
            assert list(left) == list(right), key


@pytest.mark.parametrize("n_jobs", [0, 1.5, True, "2"])
def test_n_jobs_is_none_or_an_int_other_than_zero(n_jobs):
    X = [np.ones((2, 2)), np.zeros((3, 2))] * 3
    with pytest.raises(ValueError, match="n_jobs must be None or an int other than 0"):
        DPPClassifierCV(n_jobs=n_jobs).fit(X, [0, 1] * 3)


def test_a_pooling_choice_holds_each_pooling_and_resolves_to_it():
    """The choice names its pooling by position and keeps the generalised mean's rho."""
    for i, kind in enumerate(POOLINGS):
        choice = PoolingChoice(np.int32(i), np.float32(0.25))
        assert resolved(choice).kind == kind and choice.branch(i).kind == kind
        assert as_choice(resolved(choice)).index == i
    gem = resolved(PoolingChoice(np.int32(POOLINGS.index("gem")), np.float32(0.25)))
    assert isinstance(gem, GeMPooling) and float(gem.rho) == 0.25
    assert float(as_choice(gem).rho) == 0.25


@pytest.mark.extended  # four coordinate-ascent programs compiled: about 20 s cold
def test_every_pooling_fitted_in_one_program_is_its_own_fit_to_the_bit():
    """Mean, max and gem as data of one compiled program (what a selection over poolings
    runs): one coordinate-ascent program for the three, each fit the static pooling's."""
    data = make_generated(num_sets=46, dim=7, min_size=2, max_size=13, seed=3)
    part, held = data.sets.subset(np.arange(34)), data.sets.subset(np.arange(34, 46))

    def fit(pooling, **kw):
        est = DPPClassifier(
            n_prototypes=3, pooling=pooling, max_rounds=4, validation_fraction=0.0, random_state=0
        )
        return est.fit_fold(part, held, **kw)

    with CompileCounter() as counter:
        chosen = [fit(p, any_pooling=True) for p in POOLINGS]
    assert counter.programs("coordinate_ascent") <= 1, counter.names  # 0: compiled earlier
    for pooling, a in zip(POOLINGS, chosen, strict=True):
        b = fit(pooling)
        assert a.model_.pooling.kind == b.model_.pooling.kind == pooling
        for name in ("prototypes_", "beta_", "theta_"):
            np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
        np.testing.assert_array_equal(a.model_.history, b.model_.history)
        assert a.fit_report_.rounds == b.fit_report_.rounds > 0
        assert a.fit_report_.status == b.fit_report_.status
        early_a, early_b = a.fit_report_.early_stopping, b.fit_report_.early_stopping
        assert early_a.validation_history == early_b.validation_history
        np.testing.assert_array_equal(a.predict_log_proba(held), b.predict_log_proba(held))
    gem = chosen[POOLINGS.index("gem")]
    assert gem.fit_report_.prototypes.pooling_p not in (None, 3.0)  # p was learned


@pytest.mark.extended  # two selections of 3 poolings x 2 K on 40 sets: about 25 s
def test_n_jobs_changes_no_bit_of_a_selection():
    """Every score, status, round, choice and prediction of n_jobs=2 equals n_jobs=1's, with
    the rounds chosen (fresh fits) and along warm-started paths."""
    data = make_generated(num_sets=40, dim=5, min_size=2, max_size=11, seed=6)
    base = DPPClassifier(n_prototypes=3, max_rounds=3, random_state=0)
    grid = {"l2s": (0.1, 1.0), "n_prototypes": (2, 3), "cv": 3, "max_extensions": 1}
    grid.update(RAW_VECTORS)  # the paper's model, every pooling's winner kept
    for options in ({"pooling": POOLINGS}, {"pooling": ("mean",), "select_rounds": False}):
        searches = []
        for n_jobs in (1, 2):
            with CompileCounter() as counter, warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                search = DPPClassifierCV(base, n_jobs=n_jobs, **grid, **options).fit(data.sets)
            searches.append(search)
            # a FitWarning names this line, from a worker thread too (not joblib's); the fold
            # fits' statuses are rows of cv_results_, the chosen candidates' are warnings
            assert {w.filename for w in caught if w.category is FitWarning} <= {__file__}
            # one program per K whatever the poolings (0 where an earlier fit compiled it)
            assert counter.programs("coordinate_ascent") <= 2, counter.names
        one, two = searches
        _assert_same_results(_results(one), _results(two))
        assert _params(one) == _params(two) and one.best_rounds_ == two.best_rounds_
        assert one.best_score_ == two.best_score_ and one.l2s_added_ == two.l2s_added_
        np.testing.assert_array_equal(one.predict_proba(data.sets), two.predict_proba(data.sets))
    assert len(set(one.cv_results_["param_n_prototypes"])) == 2  # both K were candidates


@pytest.mark.extended  # three selections with an embedded member: about 40 s
def test_an_embedded_member_trained_beside_the_other_candidates_changes_no_bit(monkeypatch):
    """Issue 54: with ``n_jobs=None`` an embedded member's fold fits and refit run in a thread
    beside the coordinate-ascent candidates (:meth:`CandidateSearch.beside`); every score,
    status, row, choice and prediction is ``n_jobs=1``'s, in its order, and a failure in that
    thread is raised by ``fit``."""
    from dpp.estimators import search as search_module
    from dpp.estimators.search import cores

    rng = np.random.default_rng(0)
    X = [rng.normal(size=(4, 3)) + (i % 2) for i in range(40)]
    y = np.arange(40) % 2
    base = DPPClassifier(n_prototypes=2, max_rounds=2, random_state=0)
    grid = {
        "pooling": ["mean", "max"],
        "l2s": (0.1, 1.0),
        "cv": 2,
        "max_extensions": 0,
        "embedding": (None, (4,)),
        "rule": "ensemble",
    }
    started = []

    class Counted(search_module.Beside):
        def __init__(self, *args, **kwargs):
            started.append(args)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(search_module, "Beside", Counted)
    one, beside = (DPPClassifierCV(base, n_jobs=n, **grid).fit(X, y) for n in (1, None))
    assert len(started) == one.embedding_seeds * (cores() > 1)  # each embedded seed's
    _assert_same_results(_results(one), _results(beside))
    assert one.best_score_ == beside.best_score_
    assert [(m["name"], m["kept"]) for m in one.members_] == [
        (m["name"], m["kept"]) for m in beside.members_
    ]
    assert "gem_embedded" in [m["name"] for m in one.members_]  # EmbeddedDPPClassifier()'s
    np.testing.assert_array_equal(one.predict_proba(X), beside.predict_proba(X))

    def fails(*_):
        raise RuntimeError("the embedded fold fits failed")

    monkeypatch.setattr(search_module.CandidateSearch, "_train_together", fails)
    with pytest.raises(RuntimeError, match="embedded fold fits failed"):
        DPPClassifierCV(base, **grid).fit(X, y)


@pytest.mark.extended  # a suite task and an experiment, each twice: about 40 s
def test_the_suite_and_the_experiments_record_the_same_with_any_n_jobs(tmp_path):
    """``n_jobs`` reaches the selections of the suite and of ``l2_selection.kind=dpp_cv`` and
    changes no record (only timings)."""

    def strip(value):  # timings (``*seconds``) apart
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if not k.endswith("seconds")}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    suites = []
    for n_jobs in (1, 2):
        out = tmp_path / f"suite{n_jobs}"
        results = run_suite(
            out, ["proportion_d10_c3"], folds=2, methods=["dpp_mean"], log=lambda _: None,
            n_jobs=n_jobs,
        )  # fmt: skip
        suites.append(strip(json.loads(json.dumps(results["records"], default=float))))
    assert suites[0] == suites[1] and len(suites[0]) == 2

    trials = []
    overrides = [*FAST, "l2_selection.kind=dpp_cv", "l2_selection.folds=2", "figures=[]"]
    overrides += ["l2_selection.grid=[0.01,1.0]", "~baselines.pooling", "~baselines.bag_of_words"]
    for n_jobs in (1, 2):
        cfg = _compose([*overrides, f"n_jobs={n_jobs}"])
        results = run(cfg, output_dir=tmp_path / f"run{n_jobs}")
        trials.append(strip(json.loads(json.dumps(results["trials"], default=float))))
    differ = [k for k in trials[0][0] if trials[0][0][k] != trials[1][0].get(k)]
    assert trials[0] == trials[1] and trials[0], differ


_CHILD = """
import json, sys, warnings
import dpp, jax
from dpp.datasets.generated import make_generated
from dpp.errors import FitWarning
from dpp.experiment.compilation import CompileCounter
warnings.simplefilter("ignore")
sets = make_generated(num_sets=30, dim=3, min_size=2, max_size=6, seed=0).sets
with CompileCounter() as counter:
    dpp.DPPClassifier(n_prototypes=2, max_rounds=2, random_state=0).fit(sets)
print(json.dumps({"dir": jax.config.jax_compilation_cache_dir,
                  "compiled": counter.programs("coordinate_ascent", loaded=False),
                  "loaded": counter.programs("coordinate_ascent", loaded=True)}))
"""


def _child(env_value: str | None, xdg: Path) -> dict:
    import subprocess
    import sys

    drop = ("DPP_COMPILATION_CACHE", "DPP_CACHE_DIR")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env["XDG_CACHE_HOME"] = str(xdg)  # the per-user default, here a temporary folder
    if env_value is not None:
        env["DPP_COMPILATION_CACHE"] = env_value
    out = subprocess.run(
        [sys.executable, "-c", _CHILD], env=env, check=True, capture_output=True, text=True
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


@pytest.mark.extended  # five fresh processes, each compiling or loading a fit: about 40 s
def test_a_second_process_loads_the_fit_from_the_persistent_cache_on_by_default(tmp_path):
    """Issue 54: without any opt-in, a Python process keeps its programs in the per-user cache
    (``$XDG_CACHE_HOME/dpp/jax``) and the next one loads them; ``DPP_COMPILATION_CACHE`` names
    another folder, and ``0`` turns it off."""
    xdg = tmp_path / "xdg"
    first, second = _child(None, xdg), _child(None, xdg)
    assert first["dir"] == second["dir"] == str((xdg / "dpp" / "jax").resolve())
    assert (first["compiled"], first["loaded"]) == (1, 0)
    assert (second["compiled"], second["loaded"]) == (0, 1)
    there = _child(str(tmp_path / "there"), xdg)  # another folder: compiled anew there
    assert there["dir"] == str((tmp_path / "there").resolve()) and there["compiled"] == 1
    off = _child("0", xdg)
    assert not off["dir"] and (off["compiled"], off["loaded"]) == (1, 0)


def test_the_python_cache_defaults_to_a_per_user_folder_and_the_variable_turns_it_off(
    monkeypatch, tmp_path
):
    """``$DPP_CACHE_DIR/jax`` where set (the command line's folder too), else
    ``$XDG_CACHE_HOME/dpp/jax``; ``DPP_COMPILATION_CACHE``: unset or 1 on, 0 or off off, else
    a folder."""
    from dpp.experiment import compilation
    from dpp.solvers import cache

    monkeypatch.delenv("DPP_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    user = tmp_path / "xdg" / "dpp" / "jax"
    assert cache.user_compilation_cache() == user
    monkeypatch.setenv("DPP_CACHE_DIR", str(tmp_path))
    assert cache.user_compilation_cache() == compilation.default_compilation_cache()
    assert compilation.default_compilation_cache() == tmp_path / "jax"
    monkeypatch.delenv("DPP_CACHE_DIR")
    calls = []
    monkeypatch.setattr(cache, "enable_persistent_cache", lambda d: calls.append(d) or d)
    cases = (("", user), ("1", user), ("0", None), ("off", None), ("/x/y", Path("/x/y")))
    for value, expected in cases:
        monkeypatch.setenv(cache.CACHE_ENV, value)
        assert cache.cache_from_environment() == expected
    assert calls == [user, user, None, None, Path("/x/y")]
    monkeypatch.undo()  # the real switch: a folder that cannot be made leaves the cache off
    monkeypatch.setenv(cache.CACHE_ENV, str(tmp_path / "file" / "jax"))
    (tmp_path / "file").write_text("a file, not a folder")
    with pytest.warns(UserWarning, match="compilation cache is off: its folder"):
        assert cache.cache_from_environment() is None
    monkeypatch.setenv(cache.CACHE_ENV, "0")
    cache.cache_from_environment()


def test_the_cache_is_pruned_to_its_cap_least_recently_used_first(tmp_path):
    """Issue 54: a cache folder past its cap loses its least recently used files first."""

    from dpp.solvers.cache import prune_cache

    for i in range(5):
        path = tmp_path / f"entry{i}"
        path.write_bytes(b"x" * 100)
        os.utime(path, (1000 + i, 1000 + i))  # entry0 the least recently used
    assert prune_cache(tmp_path, max_bytes=300) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["entry2", "entry3", "entry4"]
    assert prune_cache(tmp_path, max_bytes=300) == 0
