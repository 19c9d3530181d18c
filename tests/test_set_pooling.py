"""Issue 33: max and generalised-mean pooling of the codes, in every layout, with gradients.

Segment code against a naive per-set loop (singleton sets, shuffled vectors); the fused one-pass
gradient over packed blocks against autodiff of the segment ops and against central finite
differences (float64), also where codes tie for the max.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import random_sets

from dpp.encoding import encode_soft, packed_log_likelihood, soft_assignment
from dpp.pooling import (
    GEM_P_MAX,
    MEAN,
    GeMPooling,
    MaxPooling,
    gem_rho,
    make_pooling,
    padded_pool,
    segment_pool,
)
from dpp.sets import RaggedSets

POOLINGS = {"max": MaxPooling(), "gem": GeMPooling(jnp.asarray(gem_rho(2.5)))}


def _naive(pooling, codes_per_set):
    """Per-set loop over the codes: mean, max or (mean f^p)^(1/p)."""
    out = []
    for f in codes_per_set:
        if pooling == "mean":
            out.append(f.mean(0))
        elif pooling == "max":
            out.append(f.max(0))
        else:
            out.append((f**2.5).mean(0) ** (1 / 2.5))
    return np.array(out)


def _per_set_codes(sets, mu, log_beta):
    f = np.asarray(soft_assignment(sets.vectors, mu, log_beta))
    ids = np.asarray(sets.set_ids)
    return [f[ids == n] for n in range(sets.num_sets)]


@pytest.mark.parametrize("name", ["mean", "max", "gem"])
def test_every_layout_pools_as_a_loop_over_sets_does(rng, x64, block_size, name):
    sets = random_sets(rng, num_sets=9, max_size=6)
    mu = jnp.asarray(rng.normal(size=(4, 3)))
    log_beta = jnp.asarray(0.3)
    pooling = MEAN if name == "mean" else POOLINGS[name]
    want = _naive(name, _per_set_codes(sets, mu, log_beta))
    for layout in (sets, sets.bucketed(block_size)):  # flat rows; packed blocks
        z = encode_soft(layout, mu, log_beta, pooling)[:9]  # bucketed: padding sets after
        np.testing.assert_allclose(z, want, rtol=1e-10)
    # the shared-pool layout: every membership reads a pool of distinct vectors
    flat = np.asarray(sets.vectors)
    members = rng.permutation(len(flat))
    pool = np.empty_like(flat)
    pool[members] = flat
    shared = RaggedSets.from_flat(
        pool, np.asarray(sets.set_ids), np.asarray(sets.labels), members=members, num_sets=9,
        dtype=np.float64,
    )  # fmt: skip
    np.testing.assert_allclose(encode_soft(shared, mu, log_beta, pooling), want, rtol=1e-10)
    # the order of the vectors within a set changes nothing
    shuffled = RaggedSets.from_list(
        [x[rng.permutation(len(x))] for x in np.split(flat, np.cumsum(sets.set_sizes())[:-1])],
        np.asarray(sets.labels),
        dtype=np.float64,
    )
    np.testing.assert_allclose(encode_soft(shuffled, mu, log_beta, pooling), want, rtol=1e-10)


def test_the_generalised_mean_runs_from_the_mean_to_the_max(rng, x64):
    f = jnp.asarray(rng.dirichlet(np.ones(4), size=12))
    ids = jnp.asarray(np.repeat([0, 1, 2], 4), jnp.int32)
    mean = segment_pool(MEAN, f, jnp.log(f), ids, 3)
    largest = segment_pool(MaxPooling(), f, jnp.log(f), ids, 3)
    near_one = segment_pool(GeMPooling(jnp.asarray(-30.0)), f, jnp.log(f), ids, 3)  # p = 1 + 1e-13
    np.testing.assert_allclose(near_one, mean, rtol=1e-9)
    top = segment_pool(GeMPooling(jnp.asarray(1e3)), f, jnp.log(f), ids, 3)  # p = GEM_P_MAX
    assert GeMPooling(jnp.asarray(1e3)).p() == GEM_P_MAX
    assert np.all(np.asarray(top) <= np.asarray(largest) + 1e-12)
    np.testing.assert_allclose(top, largest, rtol=np.log(4) / GEM_P_MAX)  # (1/M)^(1/p) away
    assert np.all(np.diff(np.asarray([segment_pool(GeMPooling(jnp.asarray(gem_rho(p))), f,
                  jnp.log(f), ids, 3) for p in (1.5, 3.0, 10.0)]), axis=0) >= -1e-12)  # fmt: skip


def test_padded_pooling_equals_segment_pooling(rng, x64):
    f = jnp.asarray(rng.dirichlet(np.ones(3), size=5))
    padded = jnp.concatenate([f, jnp.full((3, 3), 0.7)])  # padding rows that would win the max
    mask = jnp.arange(8) < 5
    for pooling in (MEAN, *POOLINGS.values()):
        np.testing.assert_allclose(
            padded_pool(pooling, padded, jnp.log(padded), mask),
            segment_pool(pooling, f, jnp.log(f), jnp.zeros(5, jnp.int32), 1)[0],
            rtol=1e-12,
        )


def _reference_objective(pooling_name):
    """``sum_n w_n L^n`` by autodiff-ready segment ops on the flat layout (no fused gradient)."""

    def objective(mu, log_beta, theta, pooling, sets):
        z = encode_soft(sets, mu, log_beta, pooling)  # unpacked: segment_pool over all rows
        log_p = jax.nn.log_softmax(z @ theta, axis=1)
        return jnp.sum(sets.weights * jnp.sum(sets.labels * log_p, axis=1))

    return objective


def _problem(rng, ties: bool, per_prototype: bool = False):
    sets = random_sets(rng, num_sets=8, max_size=5, soft=True, weighted=True)
    if ties:  # duplicate vectors: their codes tie for the max for every mu and beta
        lists = np.split(np.asarray(sets.vectors), np.cumsum(sets.set_sizes())[:-1])
        lists = [np.concatenate([x, x[:1], x[:1]]) for x in lists]
        sets = RaggedSets.from_list(
            lists, np.asarray(sets.labels), weights=np.asarray(sets.weights), dtype=np.float64
        )
    mu = jnp.asarray(rng.normal(size=(4, 3)))
    log_beta = jnp.asarray(rng.normal(size=4) * 0.3 if per_prototype else 0.2)
    theta = jnp.asarray(rng.normal(size=(4, 3)))
    return sets, (mu, log_beta, theta)


@pytest.mark.parametrize("ties", [False, True], ids=["no-ties", "ties"])
@pytest.mark.parametrize("name", ["max", "gem"])
def test_the_fused_gradient_is_autodiff_and_central_differences(rng, x64, name, ties):
    sets, (mu, log_beta, theta) = _problem(rng, ties, per_prototype=name == "gem")
    pooling = POOLINGS[name]
    packed = sets.bucketed(3)  # blocks of 3 memberships: many blocks, padding, sets that fill one
    args = (mu, log_beta, theta, pooling)

    def fused(mu, log_beta, theta, pooling):
        return packed_log_likelihood(packed, mu, log_beta, theta, pooling)

    reference = _reference_objective(name)
    value, grads = jax.value_and_grad(fused, argnums=(0, 1, 2, 3))(*args)
    ref_value, ref_grads = jax.value_and_grad(reference, argnums=(0, 1, 2, 3))(*args, sets)
    np.testing.assert_allclose(value, ref_value, rtol=1e-10)
    for got, want in zip(jax.tree.leaves(grads), jax.tree.leaves(ref_grads), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-7, atol=1e-10)
    # a central difference along a random direction of every parameter (rho too)
    direction = jax.tree.map(lambda a: jnp.asarray(rng.normal(size=np.shape(a))), args)
    eps = 1e-6

    def along(t):
        moved = jax.tree.map(lambda a, d: a + t * d, args, direction)
        return fused(*moved)

    numeric = (along(eps) - along(-eps)) / (2 * eps)
    analytic = sum(
        jnp.sum(g * d)
        for g, d in zip(jax.tree.leaves(grads), jax.tree.leaves(direction), strict=True)
    )
    np.testing.assert_allclose(analytic, numeric, rtol=1e-6)


def test_at_ties_the_max_splits_its_gradient_equally(x64):
    """Two identical vectors tie for the max: each gets half of dL/dz (a subgradient)."""
    f = jnp.asarray([[0.6, 0.4], [0.6, 0.4], [0.2, 0.8]])
    ids = jnp.zeros(3, jnp.int32)
    grad = jax.grad(lambda f: jnp.sum(segment_pool(MaxPooling(), f, jnp.log(f), ids, 1)
                                      * jnp.asarray([[1.0, 2.0]])))(f)  # fmt: skip
    np.testing.assert_allclose(grad, [[0.5, 0.0], [0.5, 0.0], [0.0, 2.0]])


def test_make_pooling_refuses_unknown_kinds_and_exponents():
    with pytest.raises(ValueError, match="pooling must be one of mean, max, gem, got 'sum'"):
        make_pooling("sum")
    with pytest.raises(ValueError, match="1 < p <= 64"):
        gem_rho(1.0)
    assert float(make_pooling("gem").p()) == pytest.approx(3.0, rel=1e-6)


@pytest.mark.extended  # three compiled fits (about 16 s)
@pytest.mark.parametrize(
    "settings",
    [
        {"pooling": "gem", "mode": "coordinate_ascent"},
        {"pooling": "max", "mode": "joint"},
        {"pooling": "max", "optimizer": "adam", "optimizer_options": {"batch_size": 8}},
    ],
    ids=["gem-coordinate-ascent", "max-joint", "max-adam"],
)
def test_every_fit_mode_learns_with_every_pooling_and_saves_it(rng, settings, tmp_path):
    import dpp

    X = [rng.normal(size=(int(rng.integers(2, 9)), 3)) + (i % 2) for i in range(40)]
    y = np.arange(40) % 2
    est = dpp.DPPClassifier(
        n_prototypes=3, max_rounds=2, validation_fraction=0.0, random_state=0, **settings
    ).fit(X, y)
    history = est.history_
    assert np.all(np.diff(history) >= -1e-6 * np.abs(history[:-1]))  # L never decreases
    assert est.score(X, y) >= 0.75
    if settings["pooling"] == "gem":
        assert 1.0 <= est.fit_report_.prototypes.pooling_p <= GEM_P_MAX
    loaded = dpp.load(est.save(tmp_path / "model.npz"))
    assert loaded.model_.pooling.kind == settings["pooling"]
    np.testing.assert_array_equal(loaded.predict_proba(X), est.predict_proba(X))


def test_every_registered_pooling_holds_its_value_backward_pass_shares_and_rank():
    """Issue 45: one class per pooling, named by the registry: its shares sum to its pooled
    value, its hand-written backward pass is autodiff's, and the ranks order the simple first."""
    import jax
    import jax.numpy as jnp

    from dpp import pooling

    assert tuple(pooling.REGISTRY) == pooling.POOLINGS
    rng = np.random.default_rng(4)
    rows, k, segments = 40, 3, 6
    log_f = jnp.asarray(jax.nn.log_softmax(rng.normal(size=(rows, k)) * 2, axis=1))
    ids = jnp.asarray(np.sort(np.r_[rng.integers(0, segments, rows - 4), [segments] * 4]))
    dz = jnp.asarray(rng.normal(size=(segments, k)))
    with jax.enable_x64(True):
        log_f, dz = log_f.astype(jnp.float64), dz.astype(jnp.float64)
        for name, cls in pooling.REGISTRY.items():
            made = pooling.make_pooling(name, *([0.7] if cls.parameters else []))
            assert isinstance(made, cls) and made.kind == name
            pool = cls(jnp.float64(0.7)) if cls.parameters else cls()
            z = pool.pool(jnp.exp(log_f), log_f, ids, segments)
            shares = pool.shares(jnp.exp(log_f), log_f, ids, segments)
            np.testing.assert_allclose(
                jax.ops.segment_sum(shares, ids, segments + 1)[:segments], z, atol=1e-12
            )

            def loss(log_f, rho, cls=cls):
                p = cls(rho) if cls.parameters else cls()
                return jnp.sum(p.pool(jnp.exp(log_f), log_f, ids, segments) * dz)

            rho = jnp.float64(0.7)
            auto_f, auto_rho = jax.grad(loss, argnums=(0, 1))(log_f, rho)
            by_hand, d_rho = pool.cotangent(jnp.exp(log_f), log_f, ids, z, dz)
            np.testing.assert_allclose(by_hand, auto_f, atol=1e-10, err_msg=name)
            np.testing.assert_allclose(d_rho, auto_rho if cls.parameters else 0.0, atol=1e-10)
    ranks = [pooling.simplicity(name) for name in ("mean", "max", "gem")]
    assert ranks == sorted(ranks, reverse=True) and pooling.simplicity(None) == ranks[0]
    with pytest.raises(ValueError, match="pooling must be one of mean, max, gem"):
        pooling.simplicity("median")


def test_only_the_registry_branches_on_a_pooling():
    """Issue 45's target: one place branches on a pooling's name or class, ``dpp/pooling.py``;
    everything else calls the pooling's methods or reads its properties (``linear``,
    ``parameters``, ``rank``). A fourth pooling is a class in that module."""
    import re
    from pathlib import Path

    from dpp import pooling

    root = Path(pooling.__file__).parent
    branch = re.compile(
        r"isinstance\([^)]*\b(MeanPooling|MaxPooling|GeMPooling)\b"
        r"|\b(pooling|kind)\s*[!=]=\s*[\"'](mean|max|gem)[\"']"
        r"|[\"'](mean|max|gem)[\"']\s*[!=]=\s*\w*(pooling|kind)"
    )
    found = [
        f"{path.relative_to(root)}:{i}: {line.strip()}"
        for path in sorted(root.rglob("*.py"))
        if path.name != "pooling.py" or path.parent != root
        for i, line in enumerate(path.read_text().splitlines(), 1)
        if branch.search(line)
    ]
    assert not found, found
    for name, cls in pooling.REGISTRY.items():  # what the encoder needs of a general pooling
        assert isinstance(cls.linear, bool), name
        if not cls.linear:
            assert all(hasattr(cls, m) for m in ("shared_scores", "shared_terms", "shared_combine"))
