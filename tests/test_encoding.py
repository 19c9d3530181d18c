import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import random_sets

from dpp.encoding import (
    encode_hard,
    encode_soft,
    hard_assignment,
    pool,
    soft_assignment,
    squared_distances,
)
from dpp.sets import RaggedSets


def _naive_soft_codes(sets, mu, beta):
    """Per-set loop straight from eqs. (2) and (3)."""
    x, ids = np.asarray(sets.vectors), np.asarray(sets.set_ids)
    beta = np.broadcast_to(beta, (mu.shape[0],))
    z = np.zeros((sets.num_sets, mu.shape[0]))
    for n in range(sets.num_sets):
        for v in x[ids == n]:
            logits = -beta * np.sum((mu - v) ** 2, axis=1)
            f = np.exp(logits - logits.max())
            z[n] += f / f.sum()
        z[n] /= np.sum(ids == n)
    return z


@pytest.mark.parametrize("per_prototype", [False, True])
def test_segment_sum_encoding_matches_naive_loop(rng, x64, block_size, per_prototype):
    sets = random_sets(rng, num_sets=9, dim=3)
    mu = rng.normal(size=(4, 3))
    log_beta = rng.normal(size=4) if per_prototype else np.float64(0.3)
    z = encode_soft(sets, jnp.asarray(mu), jnp.asarray(log_beta))
    np.testing.assert_allclose(
        np.asarray(z), _naive_soft_codes(sets, mu, np.exp(log_beta)), rtol=1e-12
    )
    np.testing.assert_allclose(np.asarray(z).sum(axis=1), 1.0, rtol=1e-12)


def test_encoding_is_invariant_to_vector_and_set_order(rng, x64):
    vectors = [rng.normal(size=(m, 2)) for m in (1, 4, 3, 1, 6)]
    labels = np.eye(2)[[0, 1, 0, 1, 0]]
    mu, log_beta = jnp.asarray(rng.normal(size=(3, 2))), jnp.asarray(0.5)
    base = encode_soft(RaggedSets.from_list(vectors, labels, dtype=jnp.float64), mu, log_beta)
    shuffled_within = [v[rng.permutation(len(v))] for v in vectors]
    z_within = encode_soft(
        RaggedSets.from_list(shuffled_within, labels, dtype=jnp.float64), mu, log_beta
    )
    np.testing.assert_allclose(np.asarray(z_within), np.asarray(base), rtol=1e-12)
    perm = rng.permutation(len(vectors))
    permuted = RaggedSets.from_list([vectors[i] for i in perm], labels[perm], dtype=jnp.float64)
    np.testing.assert_allclose(
        np.asarray(encode_soft(permuted, mu, log_beta)), np.asarray(base)[perm], rtol=1e-12
    )
    hard = encode_hard(permuted, mu)
    np.testing.assert_allclose(
        np.asarray(hard), np.asarray(encode_hard(RaggedSets.from_list(vectors, labels), mu))[perm]
    )


def test_large_beta_gives_hard_assignment_eq1(rng):
    x = jnp.asarray(rng.normal(size=(50, 3)), dtype=jnp.float32)
    mu = jnp.asarray(rng.normal(size=(5, 3)), dtype=jnp.float32)
    log_beta = jnp.log(jnp.float32(1e6))
    soft = soft_assignment(x, mu, log_beta)
    assert np.all(np.isfinite(np.asarray(soft)))
    np.testing.assert_array_equal(np.asarray(soft), np.asarray(hard_assignment(x, mu)))
    # and the gradient through the saturated softmax stays finite
    grad = jax.grad(lambda m: jnp.sum(soft_assignment(x, m, log_beta)[:, 0]))(mu)
    assert np.all(np.isfinite(np.asarray(grad)))


def test_soft_tends_to_hard_as_beta_grows(rng, x64):
    x = jnp.asarray(rng.normal(size=(40, 2)))
    mu = jnp.asarray(rng.normal(size=(4, 2)))
    gaps = [
        float(jnp.max(jnp.abs(soft_assignment(x, mu, jnp.log(b)) - hard_assignment(x, mu))))
        for b in (1.0, 10.0, 1e2, 1e4)
    ]
    assert all(a > b for a, b in zip(gaps, gaps[1:], strict=False))
    assert gaps[-1] < 1e-6


def test_squared_distances_nonnegative_for_coincident_points():
    x = jnp.asarray([[1e3, 1e3 + 1e-3]], dtype=jnp.float32)
    d = squared_distances(x, x)
    assert float(d[0, 0]) >= 0.0


def test_shared_pool_layout_matches_disjoint(rng, x64, block_size):
    pool_vectors = rng.normal(size=(6, 3))
    members = np.array([0, 1, 2, 1, 2, 3, 3, 4, 5, 0])
    set_ids = np.array([0, 0, 0, 1, 1, 1, 2, 2, 2, 3])
    labels = np.eye(2)[[0, 1, 1, 0]]
    shared = RaggedSets.from_flat(pool_vectors, set_ids, labels, members=members, dtype=jnp.float64)
    disjoint = RaggedSets.from_flat(pool_vectors[members], set_ids, labels, dtype=jnp.float64)
    mu, log_beta = jnp.asarray(rng.normal(size=(3, 3))), jnp.asarray(-0.2)
    np.testing.assert_allclose(
        np.asarray(encode_soft(shared, mu, log_beta)),
        np.asarray(encode_soft(disjoint, mu, log_beta)),
        rtol=1e-12,
    )
    f = soft_assignment(shared.vectors, mu, log_beta)
    assert f.shape == (6, 3)  # one code per distinct vector
    np.testing.assert_allclose(
        np.asarray(pool(f, shared)), np.asarray(encode_soft(disjoint, mu, log_beta))
    )


def test_hard_encoding_is_pooled_eq1(rng, block_size):
    sets = random_sets(rng, num_sets=8, dim=3, dtype=np.float32)
    mu = jnp.asarray(rng.normal(size=(5, 3)), dtype=jnp.float32)
    expected = pool(hard_assignment(sets.vectors, mu), sets)
    np.testing.assert_allclose(np.asarray(encode_hard(sets, mu)), np.asarray(expected), rtol=1e-6)


@pytest.mark.parametrize("per_prototype", [False, True])
def test_shared_pool_gradients_match_disjoint(rng, x64, block_size, per_prototype):
    from dpp.likelihood import Params, objective

    pool_vectors = rng.normal(size=(6, 2))
    members = np.array([0, 1, 2, 1, 2, 3, 3, 4, 5, 0, 5])
    set_ids = np.array([0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3])
    labels = np.eye(3)[[0, 1, 2, 0]]
    shared = RaggedSets.from_flat(pool_vectors, set_ids, labels, members=members, dtype=jnp.float64)
    disjoint = RaggedSets.from_flat(pool_vectors[members], set_ids, labels, dtype=jnp.float64)
    params = Params(
        jnp.asarray(rng.normal(size=(4, 2))),
        jnp.asarray(rng.normal(size=4) * 0.2 if per_prototype else 0.1),
        jnp.asarray(rng.normal(size=(4, 3))),
    )
    g_shared = jax.grad(objective)(params, shared, 0.1)
    g_disjoint = jax.grad(objective)(params, disjoint, 0.1)
    for a, b in zip(jax.tree.leaves(g_shared), jax.tree.leaves(g_disjoint), strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-10, atol=1e-12)
