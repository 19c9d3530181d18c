"""Compile once: traced hyperparameters, shape buckets that change nothing, one-pass gradients."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dpp import DPPClassifier
from dpp.compilation import CompileCounter
from dpp.datasets.generated import make_generated
from dpp.encoding import encode_hard, encode_soft
from dpp.likelihood import Params, mean_log_likelihood, objective
from dpp.sets import bucket_size, real_sets, sets_bucket


def _params(rng, k, d, c, per_prototype, scale=1.0, offset=0.0):
    log_beta = rng.normal(size=k) - 1.0 if per_prototype else np.float64(-1.0)
    return Params(
        jnp.asarray(offset + scale * rng.normal(size=(k, d))),
        jnp.asarray(log_beta - 2 * np.log(scale)),
        jnp.asarray(rng.normal(size=(k, c))),
    )


def test_bucket_sizes_step_by_at_most_a_quarter():
    sizes = [bucket_size(n) for n in range(1, 5000)]
    assert all(s >= n for n, s in zip(range(1, 5000), sizes, strict=True))
    grid = sorted(set(sizes))
    assert grid[:8] == [8, 10, 12, 14, 16, 20, 24, 28]
    assert max(b / a for a, b in zip(grid[:-1], grid[1:], strict=True)) <= 1.25
    assert bucket_size(4097, align=2048) == 6144 and bucket_size(100, align=2048) == 112
    assert [sets_bucket(n) for n in (1, 8, 9, 180, 200, 700)] == [8, 8, 16, 256, 256, 1024]


@pytest.mark.parametrize(
    ("dim", "max_size", "classes", "scale", "offset", "per_prototype"),
    [
        (3, 5, 2, 1.0, 0.0, False),
        (7, 40, 3, 1e-3, 0.0, True),
        (20, 13, 4, 1e3, 1e4, False),
        (2, 1, 2, 1.0, -5.0, True),  # singleton sets only
    ],
)
def test_padding_and_packing_change_no_value_or_gradient(
    x64, rng, dim, max_size, classes, scale, offset, per_prototype
):
    data = make_generated(
        num_sets=53,
        dim=dim,
        min_size=1,
        max_size=max_size,
        num_classes=classes,
        scale=scale,
        offset=offset,
        seed=int(rng.integers(1000)),
        dtype=np.float64,
    )
    sets = data.sets
    params = _params(rng, 5, dim, classes, per_prototype, scale, offset)
    value_and_grad = jax.jit(jax.value_and_grad(objective))
    mean_ll, soft, hard = (jax.jit(f) for f in (mean_log_likelihood, encode_soft, encode_hard))
    value, grad = value_and_grad(params, sets, 0.3)
    padded = sets.padded(sets.num_sets + 11, sets.num_memberships + 37)
    assert not bool(jnp.any(real_sets(padded)[sets.num_sets :]))
    variants = {
        "padded": padded,
        "bucketed, one pass": sets.bucketed(),
        "bucketed, blocks of 8": sets.bucketed(block_size=8),
    }
    assert variants["bucketed, blocks of 8"].packing.start.shape[0] > 4
    for name, variant in variants.items():
        v, g = value_and_grad(params, variant, 0.3)
        np.testing.assert_allclose(v, value, rtol=1e-12, err_msg=name)
        for a, b in zip(jax.tree.leaves(g), jax.tree.leaves(grad), strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12 * float(jnp.max(jnp.abs(b))))
        np.testing.assert_allclose(mean_ll(params, variant), mean_ll(params, sets), rtol=1e-12)
        n = sets.num_sets
        np.testing.assert_allclose(
            soft(variant, params.mu, params.log_beta)[:n],
            soft(sets, params.mu, params.log_beta),
            rtol=1e-10,
            atol=1e-14,
        )
        np.testing.assert_array_equal(hard(variant, params.mu)[:n], hard(sets, params.mu))


def test_shared_pool_sets_are_padded_without_packing(x64, rng):
    vectors = rng.normal(size=(6, 2))
    set_ids = np.array([0, 0, 1, 1, 1, 2], np.int32)
    members = np.array([0, 1, 1, 2, 3, 5], np.int32)
    from dpp.sets import RaggedSets, one_hot

    sets = RaggedSets.from_flat(vectors, set_ids, one_hot([0, 1, 0], 2), members=members)
    bucketed = sets.bucketed()
    assert bucketed.packing is None and bucketed.num_sets == 8
    params = _params(rng, 3, 2, 2, False)
    value_and_grad = jax.jit(jax.value_and_grad(objective))
    (v0, g0), (v1, g1) = value_and_grad(params, sets, 0.1), value_and_grad(params, bucketed, 0.1)
    np.testing.assert_allclose(v1, v0, rtol=1e-12)
    for a, b in zip(jax.tree.leaves(g1), jax.tree.leaves(g0), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-14)


def _sets(seed, n):
    data = make_generated(num_sets=n, dim=6, min_size=2, max_size=9, seed=seed)
    sizes = data.sets.set_sizes()
    X = np.split(np.asarray(data.sets.vectors), np.cumsum(sizes)[:-1])
    return X, np.argmax(np.asarray(data.sets.labels), axis=1)


def test_new_hyperparameters_and_folds_reuse_the_compiled_fit():
    X, y = _sets(0, 90)
    DPPClassifier(n_prototypes=3, l2=0.1, random_state=0).fit(X, y)
    with CompileCounter() as counter:
        # other lambda, tolerance, step limit: traced, nothing to compile
        DPPClassifier(n_prototypes=3, l2=3.0, tol=1e-3, beta_step_limit=3.0, random_state=0).fit(
            X, y
        )
    assert counter.compiles == 0, counter.names
    # a fold: the two smallest sets fewer, the same buckets (N 90, 88 -> 128; T 519, 515 -> 1024)
    quick = dict(n_prototypes=3, validation_fraction=0.0, random_state=0)
    size = sum(len(x) for x in X)
    keep = np.sort(np.argsort([len(x) for x in X])[2:])
    fold = [X[i] for i in keep], y[keep]
    assert bucket_size(size, 2048) == bucket_size(sum(len(x) for x in fold[0]), 2048)
    DPPClassifier(l2=0.1, **quick).fit(X, y)
    with CompileCounter() as counter:
        DPPClassifier(l2=0.5, **quick).fit(*fold)
    assert not any("ascent" in name for name in counter.names), counter.names
    with CompileCounter() as counter:
        DPPClassifier(n_prototypes=4, random_state=0).fit(X, y)  # K is a shape: compiles
    assert any("coordinate_ascent" in name for name in counter.names)


def test_settings_are_pytrees_with_static_structure():
    from dpp.solvers.coordinate_ascent import FitSettings

    a, b = FitSettings(l2=0.1, tol=1e-3), FitSettings(l2=2, tol=1e-4)
    leaves_a, tree_a = jax.tree.flatten(a)
    leaves_b, tree_b = jax.tree.flatten(b)
    assert tree_a == tree_b and 2.0 in leaves_b and isinstance(b.l2, float)
    assert jax.tree.flatten(dataclasses.replace(a, max_rounds=3))[1] != tree_a
    with pytest.raises(ValueError, match="l2"):
        FitSettings(l2=-1.0)


@pytest.mark.parametrize(
    ("min_size", "max_size", "block_size"), [(1, 20, 2048), (100, 300, 2048), (1, 40, 8)]
)
def test_packed_blocks_hold_whole_sets_in_sorted_unclamped_slices(min_size, max_size, block_size):
    """``indices_are_sorted`` holds in every real block, and no real block's slice is clamped."""
    data = make_generated(num_sets=700, dim=2, min_size=min_size, max_size=max_size, seed=1)
    sets = data.sets.bucketed(block_size=block_size)
    packing, ids = sets.packing, np.asarray(sets.set_ids)
    rows, slots = packing.rows.shape[0], packing.slots.shape[0]
    start, first, count = (
        np.asarray(a) for a in (packing.start, packing.first_set, packing.set_count)
    )
    real = count > 0
    assert np.all(start[real] + rows <= sets.num_memberships)
    assert count.sum() == data.sets.num_sets and count.max() <= slots
    for s, f, c in zip(start[real], first[real], count[real], strict=True):
        local = ids[s : s + rows] - f
        local = np.where((local >= 0) & (local < c), local, slots)
        assert local[0] == 0 and np.all(np.diff(local) >= 0)
        assert np.array_equal(np.unique(local[local < slots]), np.arange(c))
