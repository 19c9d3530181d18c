"""Issue 35: a layout that shows the layers; ``import dpp`` lazy; moved modules still import."""

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

_HEAVY = ("hydra", "omegaconf", "matplotlib", "pandas", "dpp.experiment.config_store")


def _loaded_after(code: str) -> set[str]:
    probe = f"import sys\n{code}\nprint(' '.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return set(out.stdout.split())


def test_import_dpp_loads_no_hydra_matplotlib_pandas_or_config_store():
    loaded = _loaded_after("import dpp")
    assert not [m for m in _HEAVY if m in loaded]
    assert not [m for m in loaded if m.startswith("dpp.")]  # every submodule on first use


def test_an_estimator_loads_no_experiment_layer():
    loaded = _loaded_after("import dpp\ndpp.DPPClassifier\ndpp.RaggedSets")
    assert "dpp.estimators.dpp" in loaded
    assert not [m for m in ("hydra", "omegaconf", "matplotlib") if m in loaded]
    assert not [m for m in loaded if m.startswith("dpp.experiment")]


#: A benchmark's statistic as docstrings used to carry it: "+0.77 points over 210 units",
#: "p = 0.025", "± 0.22 points", "over 70 units".
_STATISTIC = re.compile(
    r"points over|over \d+ units|\bp = 0\.\d|± [\d.]+ points|[+-]\d+(\.\d+)? points"
)


def test_no_docstring_in_the_package_carries_a_benchmark_statistic():
    """Issue 79: docstrings say what and why, with the equation or the reference; a decision's
    statistics live on the benchmark page, generated from the records."""
    found = []
    for path in sorted((REPO / "dpp").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.ClassDef | ast.AsyncFunctionDef | ast.Module):
                doc = ast.get_docstring(node) or ""
                found += [f"{path.relative_to(REPO)}: {m[0]!r}" for m in _STATISTIC.finditer(doc)]
    assert not found, found
    assert _STATISTIC.search("+0.77 points over 210 units") and _STATISTIC.search("p = 0.025")


def test_public_names_and_submodules_come_from_import_dpp():
    import importlib

    import dpp

    for name in dpp.__all__:  # the very object its module defines
        assert getattr(dpp, name) is getattr(importlib.import_module(dpp._PUBLIC[name]), name)
    assert dpp.experiment.protocol.run_trial.__module__ == "dpp.experiment.protocol"
    with pytest.raises(AttributeError, match="no attribute 'nonexistent'"):
        dpp.nonexistent  # noqa: B018


@pytest.mark.parametrize("old", ["protocol", "experiment_settings", "normalize", "persist"])
def test_the_modules_moved_before_0_2_are_gone_under_their_old_names(old):
    """dpp 0.2 dropped the old names that 0.1 kept with a DeprecationWarning."""
    import importlib

    with pytest.raises(ModuleNotFoundError, match=f"dpp.{old}"):
        importlib.import_module(f"dpp.{old}")
    import dpp

    with pytest.raises(AttributeError, match=f"no attribute '{old}'"):
        getattr(dpp, old)


def test_the_layers_contract_is_kept():
    pytest.importorskip("importlinter")  # the test extra installs it
    code = "from importlinter.cli import lint_imports; raise SystemExit(lint_imports())"
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "0 broken" in proc.stdout


def test_the_prototype_estimators_share_one_parameter_block():
    """Issue 35: the shared constructor parameters have one home (``SHARED_PARAMETERS``); each
    estimator's signature, which scikit-learn, the config store and the model file read, lists
    them with those defaults, and a misspelt one is refused as Python refuses any."""
    import inspect

    from sklearn.base import clone

    import dpp
    from dpp.estimators.base import SHARED_PARAMETERS

    classes = (dpp.DPPClassifier, dpp.StandardPrototypeClassifier, dpp.InfoLossClassifier)
    for cls in classes:
        parameters = inspect.signature(cls.__init__).parameters
        shared = {n: p.default for n, p in parameters.items() if n in SHARED_PARAMETERS}
        assert shared == SHARED_PARAMETERS, cls.__name__
        assert list(parameters)[-len(SHARED_PARAMETERS) :] == list(SHARED_PARAMETERS)
        est = cls(standardize=False, random_state=3)
        assert (
            est.get_params()["standardize"] is False
            and est.kmeans_n_init == SHARED_PARAMETERS["kmeans_n_init"]
        )
        assert clone(est).get_params() == est.get_params()
        with pytest.raises(TypeError, match="unexpected keyword argument 'standardise'"):
            cls(standardise=False)
    # issue 55: the class prior, a closed form, takes only what every prototype method is
    # tuned by, and none of the shared parameters it never read
    assert dpp.ClassPriorClassifier().get_params() == {"n_prototypes": 1, "l2": 0.0}
    with pytest.raises(TypeError, match="unexpected keyword argument 'standardize'"):
        dpp.ClassPriorClassifier(standardize=False)


def test_no_module_imports_in_a_circle():
    """Issue 45: modules that import each other (``dpp.estimators.cv`` and ``ensemble``, one
    of them inside a function) are one module in two files; none is left."""
    import grimp
    import networkx as nx

    graph = grimp.build_graph("dpp")
    edges = nx.DiGraph()
    for module in graph.modules:
        for imported in graph.find_modules_directly_imported_by(module):
            edges.add_edge(module, imported)
    circles = [c for c in nx.simple_cycles(edges) if len(c) > 1]
    assert not circles, circles[:3]


def test_no_benchmark_statistic_stands_in_a_docstring_of_the_package():
    """Issue 79: docstrings say what and why; a decision's statistics live on the benchmark
    page (``docs/benchmarks.md``, generated from the records), never typed into ``dpp/``."""
    import ast
    import re
    from pathlib import Path

    statistic = re.compile(
        r"[+-]\d+(\.\d+)? ?(±|\+-) ?\d+(\.\d+)? (accuracy )?points"
        r"|\bp = 0\.\d+|\b\d+ of \d+ (fits|units)\b|points over \d+ units"
    )
    found = []
    for path in sorted((Path(__file__).resolve().parents[1] / "dpp").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            doc = isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef) and (
                ast.get_docstring(node)
            )
            if doc and statistic.search(doc):
                found.append(f"{path.name}: {statistic.search(doc).group(0)}")
    assert not found, found
