import numpy as np
import pytest

from dpp.sets import LABEL_SUM_ATOL, RaggedSets, one_hot


def _labels(n, c=2):
    return one_hot(np.arange(n) % c, c)


def test_from_list_builds_sorted_flat_layout(rng):
    vectors = [rng.normal(size=(m, 3)) for m in (2, 1, 4)]
    sets = RaggedSets.from_list(vectors, _labels(3))
    assert sets.num_sets == 3 and sets.dim == 3 and sets.num_memberships == 7
    np.testing.assert_array_equal(np.asarray(sets.set_ids), [0, 0, 1, 2, 2, 2, 2])
    np.testing.assert_allclose(np.asarray(sets.vectors), np.concatenate(vectors), rtol=1e-6)
    np.testing.assert_array_equal(sets.set_sizes(), [2, 1, 4])
    assert sets.vectors.dtype == np.float32 and sets.set_ids.dtype == np.int32
    np.testing.assert_array_equal(np.asarray(sets.weights), np.ones(3))


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda r: ([r.normal(size=(2, 3)), np.zeros((0, 3))], _labels(2)), "set 1 is empty"),
        (
            lambda r: ([r.normal(size=(2, 3)), r.normal(size=(2, 4))], _labels(2)),
            "mismatched dimensions",
        ),
        (lambda r: ([np.array([[0.0, np.nan]]), np.ones((1, 2))], _labels(2)), "NaN or inf"),
        (lambda r: ([np.array([[np.inf, 0.0]])], _labels(1)), "NaN or inf"),
        (  # finite in float64, inf in float32: named as a range, not as NaN or inf
            lambda r: ([np.array([[1e300, 0.0]]), np.ones((1, 2))], _labels(2)),
            "up to 1e.300 in magnitude, beyond float32.s range",
        ),
        (  # issue 56: the row within its set, not among all sets joined
            lambda r: (
                [np.ones((5, 2))] * 3 + [np.array([[0, 0], [1, 1], [np.nan, 0]])],
                _labels(4),
            ),
            "first at vector row 17 .row 2 of set 3.",
        ),
        (lambda r: ([np.ones((1, 2))] * 2, np.array([[0.5, 0.4], [1, 0]])), "sum to 0.9"),
        (lambda r: ([np.ones((1, 2))] * 2, np.array([[1.5, -0.5], [1, 0]])), "outside [0, 1]"),
        (lambda r: ([np.ones((1, 2))] * 2, _labels(3)), "labels has 3 rows but there are 2 sets"),
        (lambda r: ([np.ones((1, 2))], np.array([1])), "labels must be a [N, C] array"),
        (lambda r: ([], _labels(1)), "no sets"),
        (lambda r: ([np.ones(3)], _labels(1)), "each set must be a [M_n, D] array"),
    ],
)
def test_from_list_rejects_bad_input(rng, make, message):
    vectors, labels = make(rng)
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        RaggedSets.from_list(vectors, labels)


def test_from_flat_rejects_unsorted_and_mismatched():
    x = np.ones((4, 2))
    with pytest.raises(ValueError, match="sorted ascending; first decrease at position 2"):
        RaggedSets.from_flat(x, np.array([0, 1, 0, 1]), _labels(2))
    with pytest.raises(ValueError, match="4 vectors but 3 set ids"):
        RaggedSets.from_flat(x, np.array([0, 0, 1]), _labels(2))
    with pytest.raises(ValueError, match="set 1 is empty"):
        RaggedSets.from_flat(x, np.array([0, 0, 2, 2]), _labels(3))
    with pytest.raises(ValueError, match="weights must have shape"):
        RaggedSets.from_flat(x, np.array([0, 0, 1, 1]), _labels(2), weights=np.ones(3))
    with pytest.raises(ValueError, match="non-negative"):
        RaggedSets.from_flat(x, np.array([0, 0, 1, 1]), _labels(2), weights=np.array([1.0, -1]))
    with pytest.raises(ValueError, match="members must index the pool"):
        RaggedSets.from_flat(x, np.array([0, 0, 1, 1]), _labels(2), members=np.array([0, 1, 2, 9]))


def test_label_tolerance_is_stated_and_applied():
    x = np.ones((2, 2))
    ok = np.array([[0.5, 0.5 + LABEL_SUM_ATOL / 2], [1.0, 0.0]])
    RaggedSets.from_flat(x, np.array([0, 1]), ok)
    bad = np.array([[0.5, 0.5 + 3 * LABEL_SUM_ATOL], [1.0, 0.0]])
    with pytest.raises(ValueError, match="not 1"):
        RaggedSets.from_flat(x, np.array([0, 1]), bad)


def test_subset_reorders_and_renumbers(rng):
    vectors = [rng.normal(size=(m, 2)) for m in (1, 3, 2, 2)]
    sets = RaggedSets.from_list(vectors, _labels(4), weights=np.arange(1.0, 5.0))
    sub = sets.subset(np.array([2, 0]))
    np.testing.assert_array_equal(np.asarray(sub.set_ids), [0, 0, 1])
    np.testing.assert_allclose(
        np.asarray(sub.vectors), np.concatenate([vectors[2], vectors[0]]), rtol=1e-6
    )
    np.testing.assert_array_equal(np.asarray(sub.weights), [3.0, 1.0])
    np.testing.assert_array_equal(np.asarray(sub.labels), _labels(4)[[2, 0]])
    with pytest.raises(ValueError, match="distinct"):
        sets.subset(np.array([1, 1]))


def test_subset_of_shared_pool_compacts_pool(rng):
    pool = rng.normal(size=(5, 2))
    members = np.array([0, 1, 1, 2, 3, 4])
    sets = RaggedSets.from_flat(pool, np.array([0, 0, 1, 1, 2, 2]), _labels(3), members=members)
    sub = sets.subset(np.array([1]))
    assert sub.vectors.shape == (2, 2)
    np.testing.assert_allclose(sub.member_vectors(), pool[[1, 2]], rtol=1e-6)


def test_device_arrays_never_share_the_callers_buffers():
    """On the CPU ``jax.device_put`` of a writeable NumPy array shares its buffer (JAX 0.10):
    the sets' device arrays are private copies, so writing into the arrays a caller passed
    changes nothing the fits read."""
    from dpp.sets import to_device

    vectors = np.arange(60, dtype=np.float32).reshape(20, 3)
    set_ids = np.repeat(np.arange(5), 4).astype(np.int32)
    labels = one_hot(np.arange(5) % 2, 2).astype(np.float32)
    weights = np.ones(5, np.float32)
    sets = RaggedSets.from_flat(vectors, set_ids, labels, weights=weights)
    reweighted = sets.with_weights(np.full(5, 2.0, np.float32))
    host = np.arange(100, dtype=np.float32)
    device = to_device(host)
    for array in (vectors, labels, weights, host):
        array[...] = -1.0
    np.testing.assert_array_equal(np.asarray(sets.vectors)[:, 0], np.arange(0, 60, 3))
    assert np.all(np.asarray(sets.labels).sum(axis=1) == 1)
    assert np.all(np.asarray(sets.weights) == 1) and np.all(np.asarray(reweighted.weights) == 2)
    np.testing.assert_array_equal(np.asarray(device), np.arange(100))
