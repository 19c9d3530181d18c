"""Strict test configuration: rank promotion raises, an `rng` fixture, float64 where asked.

The persistent compilation cache, on by default for Python users, is off here and in every
process a test starts (``DPP_COMPILATION_CACHE=0``, inherited): no test depends on a warm cache.
"""

import os
from pathlib import Path

import jax
import numpy as np
import pytest

from dpp.sets import RaggedSets, one_hot
from dpp.solvers.cache import release_compiled_programs

jax.config.update("jax_numpy_rank_promotion", "raise")
os.environ["DPP_COMPILATION_CACHE"] = "0"

CONFIG_DIR = Path(__file__).resolve().parents[1] / "configs"


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
    import dpp.encoding.codes

    monkeypatch.setattr(dpp.encoding.codes, "BLOCK_SIZE", request.param)
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
