"""Compile once: traced hyperparameters, shape buckets that change nothing, one-pass gradients."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dpp import DPPClassifier
from dpp.datasets.generated import make_generated
from dpp.encoding import encode_hard, encode_soft
from dpp.experiment.compilation import CompileCounter
from dpp.likelihood import Params, mean_log_likelihood, objective
from dpp.sets import Layout, RaggedSets, bucket_size, real_sets, sets_bucket


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
        # two more shapes and scales, in the extended tier (about 10 s each)
        pytest.param(7, 40, 3, 1e-3, 0.0, True, marks=pytest.mark.extended),
        pytest.param(20, 13, 4, 1e3, 1e4, False, marks=pytest.mark.extended),
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


@pytest.mark.extended  # 10 s; the default tier was at 4:52 of its 5 minutes in a fresh clone
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


# ------------------------------------------------------------- one program for a whole selection
def _sizes_sets(sizes, rng, dim=3, classes=2):
    vectors = [rng.normal(size=(int(m), dim)).astype(np.float32) for m in sizes]
    labels = np.eye(classes, dtype=np.float32)[rng.integers(0, classes, len(sizes))]
    return RaggedSets.from_list(vectors, labels)


def _shapes(sets):
    return jax.tree.map(lambda a: a.shape, sets)


@pytest.mark.parametrize(("low", "high", "block_size"), [(1, 40, 64), (30, 300, 2048), (1, 9, 16)])
def test_a_covering_layout_gives_any_order_of_any_subset_its_blocks(rng, low, high, block_size):
    """Blocks and T are floored for any order of any subset of the sets (padding blocks are
    skipped, so that floor is exact); N, B and S only to what given orders need."""
    sizes = rng.integers(low, high + 1, size=300)
    cover = Layout.covering(sizes, 200, block_size)
    for _ in range(25):
        chosen = rng.choice(sizes, size=int(rng.integers(100, 201)), replace=False)
        sets = _sizes_sets(chosen, rng).bucketed(block_size, floor=cover)
        assert sets.packing.start.shape[0] == cover.blocks  # never more blocks than the bound
        own = Layout.of_orders([chosen], block_size)
        assert sets.num_sets == max(own.num_sets, cover.num_sets)
        assert sets.packing.slots.shape[0] == own.slots  # S left to the sets
    orders = [rng.permutation(sizes[:200]) for _ in range(5)]
    floor = cover.union(Layout.of_orders(orders, block_size))
    shapes = {str(_shapes(_sizes_sets(o, rng).bucketed(block_size, floor=floor))) for o in orders}
    assert len(shapes) == 1


@pytest.mark.extended  # 8-10 s: the default tier keeps to its 5 minutes
def test_raising_the_blocks_changes_no_bit_of_a_fit():
    """A floor of padding blocks (the bound of Layout.covering) leaves every bit of a fit as
    it is: the Table 1 refits of an experiment stay what they were."""
    from dpp.model import fit_dpp
    from dpp.solvers.coordinate_ascent import FitSettings

    data = make_generated(num_sets=70, dim=4, min_size=3, max_size=30, seed=3)
    centres = np.asarray(data.sets.vectors)[:5]
    settings = FitSettings(max_rounds=2)
    key = jax.random.key(0)
    plain = fit_dpp(data.sets, centres, settings, key)
    floored = fit_dpp(data.sets, centres, settings, key, layout=Layout(blocks=64, memberships=4))
    np.testing.assert_array_equal(plain.history, floored.history)
    np.testing.assert_array_equal(np.asarray(plain.mu), np.asarray(floored.mu))


@pytest.mark.extended  # 13 s: the default tier stays under its 5-minute budget
def test_held_out_sets_as_weights_on_the_training_layout_equal_held_out_sets_apart(x64):
    """Early stopping's held-out sets as weights on the training layout (one program for the
    fit and its refit) give the fit on the other sets, scored on them, as before."""
    from dpp.init import init_log_beta
    from dpp.solvers.coordinate_ascent import FitSettings, coordinate_ascent

    data = make_generated(num_sets=60, dim=3, min_size=2, max_size=12, seed=5, dtype=np.float64)
    sets = data.sets
    fit_idx, val_idx = np.arange(45), np.arange(45, 60)
    fit_part, val_part = sets.subset(fit_idx), sets.subset(val_idx)
    centres = np.asarray(sets.vectors)[:4]
    params0 = Params(
        jnp.asarray(centres),
        init_log_beta(np.asarray(fit_part.vectors), centres, 1.0, False, dtype=np.float64),
        jnp.zeros((4, 2)),
    )
    settings, key = FitSettings(max_rounds=4, patience=4, tol=0.0), jax.random.key(0)
    apart = coordinate_ascent(
        params0, fit_part.bucketed(), settings, key, validation=val_part.bucketed()
    )
    layout = sets.bucketed()
    w = np.asarray(layout.weights)
    held = np.isin(np.arange(layout.num_sets), val_idx)
    one = coordinate_ascent(
        params0,
        layout.with_weights(w * ~held),
        settings,
        key,
        validation=layout.with_weights(w * held),
    )
    np.testing.assert_allclose(one.history, apart.history, rtol=1e-9)
    np.testing.assert_allclose(one.validation_history, apart.validation_history, rtol=1e-9)
    assert int(one.best_round) == int(apart.best_round)
    # validation weights of 0: no early stopping, the plain fit, in the same program
    off = coordinate_ascent(
        params0, layout, settings, key, validation=layout.with_weights(np.zeros(w.size))
    )
    plain = coordinate_ascent(params0, layout, settings, key)
    np.testing.assert_array_equal(off.history, plain.history)
    assert int(off.best_round) == int(off.num_rounds) == int(plain.num_rounds)


@pytest.mark.extended  # 9.5 s, as above
@pytest.mark.filterwarnings("ignore::dpp.errors.FitWarning")
def test_a_selection_and_its_refit_run_one_coordinate_ascent_program(caplog):
    """Every fold of a DPPClassifierCV candidate group (its held-out sets as weights) and the
    refit share one compiled program; so do a verbose and a quiet fit, and the verbose one
    logs its rounds from the returned history."""
    import logging

    from dpp import DPPClassifierCV

    data = make_generated(num_sets=57, dim=11, min_size=2, max_size=17, seed=8)
    base = DPPClassifier(n_prototypes=5, max_rounds=3, random_state=0)
    with CompileCounter() as counter:
        DPPClassifierCV(
            base, l2s=(0.1, 1.0), pooling=("mean",), embedding=(None,), cv=3, max_extensions=0
        ).fit(data.sets)
    # one program, not two (0 where an earlier test in this worker compiled the same shapes)
    assert counter.programs("coordinate_ascent") <= 1, counter.names
    quiet = DPPClassifier(n_prototypes=5, max_rounds=3, random_state=0).fit(data.sets)
    with CompileCounter() as counter, caplog.at_level(logging.INFO, "dpp.solvers"):
        fitted = DPPClassifier(n_prototypes=5, max_rounds=3, random_state=0, verbose=True)
        fitted.fit(data.sets)
    assert counter.programs("coordinate_ascent") == 0, counter.names
    np.testing.assert_array_equal(fitted.model_.history, quiet.model_.history)
    rounds = [r for r in caplog.records if "coordinate ascent round" in r.getMessage()]
    assert len(rounds) == fitted.fit_report_.rounds > 0


@pytest.mark.filterwarnings("ignore::dpp.errors.FitWarning")
def test_early_stopping_and_its_refit_run_one_coordinate_ascent_program():
    """The validation fit (held-out sets last, weighted 0) and the refit on every set share
    one compiled program (they were two, with shapes that varied from fit to fit)."""
    data = make_generated(num_sets=83, dim=13, min_size=1, max_size=23, seed=4)
    est = DPPClassifier(n_prototypes=3, max_rounds=2, validation_fraction=0.25, random_state=0)
    with CompileCounter() as counter:
        est.fit(data.sets)
    assert est.fit_report_.early_stopping.source == "validation_fraction"
    # one program, not two (0 where an earlier test in this worker compiled the same shapes)
    assert counter.programs("coordinate_ascent") <= 1, counter.names


@pytest.mark.extended  # 7-21 s of fits or CLI runs: the default tier keeps to 5 minutes
def test_live_compiled_programs_hold_memory_mappings_that_a_release_returns(monkeypatch):
    """Each live XLA CPU program holds memory mappings, capped per process by the kernel
    (``vm.max_map_count``): past a share of that cap ``release_compiled_programs`` drops the
    programs, and the mappings with them; below it, nothing."""
    from dpp.solvers import cache

    if cache.memory_mappings() == 0:
        pytest.skip("no /proc/self/maps on this system")
    functions = [jax.jit(lambda x, i=i: jnp.sin(x) * i) for i in range(40)]
    before = cache.memory_mappings()
    for f in functions:
        f(jnp.ones(3)).block_until_ready()
    held = cache.memory_mappings()
    assert held - before >= 40  # at least one mapping a live program
    assert not cache.release_compiled_programs(share=1.0)  # far below the kernel's cap
    assert cache.memory_mappings() >= held - 5
    monkeypatch.setattr(cache, "max_map_count", lambda: held)  # as if the cap were near
    assert cache.release_compiled_programs(share=0.9)
    assert cache.memory_mappings() < held - 30
