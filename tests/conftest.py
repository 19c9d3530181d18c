"""Strict test configuration: rank promotion raises, an `rng` fixture, float64 where asked.

In the default tier a :class:`~dpp.errors.FitWarning` is an error unless the test expects it
(a ``filterwarnings`` mark naming the status, e.g. :data:`EXPECTS_ROUND_CAP`, or
:func:`expected_fit_warnings` around a fixture's fits): the tier prints no warning that a test
did not ask for (issue 82).

The persistent compilation cache, on by default for Python users, is off here and in every
process a test starts (``DPP_COMPILATION_CACHE=0``, inherited): no test depends on a warm cache.
"""

import os
import sys
import warnings
from contextlib import contextmanager
from pathlib import Path

import jax
import numpy as np
import pytest

from dpp.sets import RaggedSets, one_hot
from dpp.solvers.cache import release_compiled_programs

#: The benchmark beside the package (``benchmarks/lab``, not installed) is imported as ``lab``,
#: as its scripts in ``benchmarks/`` import it.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

jax.config.update("jax_numpy_rank_promotion", "raise")
os.environ["DPP_COMPILATION_CACHE"] = "0"

CONFIG_DIR = Path(__file__).resolve().parents[1] / "configs"

#: The FitWarnings a small test fit gives by design, as ``filterwarnings`` messages: a round
#: or epoch cap reached, a grid too short for its choice to be interior, a chosen candidate
#: whose fold fits reached their cap.
FIT_WARNING_MESSAGES = {
    "round_cap": r".*. fit max_rounds",  # "...): fit max_rounds": no colon in a filter
    "epoch_cap": r".*. fit max_epochs",
    "grid_edge": r".*lies at the (strongest|weakest) edge",
    "chosen_at_cap": r".*ended max_rounds",
    "early_stopping_skipped": r".*early stopping skipped",
    "chosen_saturated": r".*ended saturated",
}


def expects(*kinds: str):
    """A mark: the test expects the FitWarnings of ``kinds`` (keys of FIT_WARNING_MESSAGES)."""
    return pytest.mark.filterwarnings(
        *(f"ignore:{FIT_WARNING_MESSAGES[k]}:dpp.errors.FitWarning" for k in kinds)
    )


@contextmanager
def expected_fit_warnings(*kinds: str):
    """Fits inside give only the FitWarnings of ``kinds``, which are not shown (for fixtures)."""
    with warnings.catch_warnings():
        for kind in kinds:
            from dpp.errors import FitWarning

            warnings.filterwarnings("ignore", FIT_WARNING_MESSAGES[kind], FitWarning)
        yield


def pytest_collection_modifyitems(items):
    """The default tier's tests fail on a FitWarning they do not expect (their own marks, set
    after this one, take precedence)."""
    for item in items:
        if item.get_closest_marker("extended") or item.get_closest_marker("slow"):
            continue
        item.add_marker(pytest.mark.filterwarnings("error::dpp.errors.FitWarning"), append=False)


@pytest.fixture(autouse=True, scope="module")
def bounded_compiled_programs():
    """Drops the compiled programs after a module that left the worker near the kernel's limit
    on memory mappings (:func:`dpp.solvers.cache.release_compiled_programs`): a worker that
    lived through most of the extended tier crashed inside XLA's compiler at that limit."""
    yield
    release_compiled_programs()


@pytest.fixture
def rng():
    return np.random.default_rng(20121)


@pytest.fixture(params=[3, 2048], ids=["blocks-of-3", "one-block"])
def block_size(request, monkeypatch):
    """Runs the test with several encoder block sizes (3 forces padding and many blocks)."""
    import dpp.encoding

    monkeypatch.setattr(dpp.encoding, "BLOCK_SIZE", request.param)
    return request.param


@pytest.fixture
def x64():
    """Runs the test with 64-bit floats (gradient checks need them)."""
    with jax.enable_x64(True):
        yield


def random_sets(
    rng,
    num_sets=7,
    dim=3,
    num_classes=3,
    max_size=5,
    soft=False,
    weighted=False,
    dtype=np.float64,
):
    """Random ragged sets with at least two singleton sets (sets 0 and the last)."""
    sizes = rng.integers(1, max_size + 1, size=num_sets)
    sizes[0] = sizes[-1] = 1
    vectors = [rng.normal(size=(m, dim)) for m in sizes]
    if soft:
        labels = rng.dirichlet(np.ones(num_classes), size=num_sets)
    else:
        labels = one_hot(rng.integers(0, num_classes, size=num_sets), num_classes)
    weights = rng.uniform(0.5, 2.0, size=num_sets) if weighted else None
    return RaggedSets.from_list(vectors, labels, weights=weights, dtype=dtype)
