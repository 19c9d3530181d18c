"""Issue 81: k-means on the device (``dpp.init.device_kmeans``) against scikit-learn's."""

import numpy as np
import pytest

from dpp.init import device_kmeans, kmeans_centres


def _inertia(x, centres):
    return float(((x[:, None] - centres[None]) ** 2).sum(-1).min(1).sum())


def _blobs(offset=50.0, n=40, seed=0):
    rng = np.random.default_rng(seed)
    means = np.array([[10, 10], [10, -10], [-10, 10], [-10, -10.0]]) + offset
    return means, np.concatenate([m + 0.1 * rng.normal(size=(n, 2)) for m in means])


def test_it_finds_separated_blobs_far_from_the_padding_rows_origin():
    """The padding rows (zeros) are masked out: blobs far from the origin keep every centre."""
    means, x = _blobs()
    centres = device_kmeans(x, 4, seed=0, n_init=3)
    assert centres.shape == (4, 2) and centres.dtype == np.float64
    order = np.lexsort(centres.T)
    np.testing.assert_allclose(centres[order], means[np.lexsort(means.T)], atol=0.05)


def test_its_inertia_is_scikit_learns_on_data_nobody_tuned_for():
    rng = np.random.default_rng(1)
    x = rng.standard_t(3, size=(700, 6)) * np.array([1, 2, 5, 0.1, 1, 30]) + 1e3
    ours = min(_inertia(x, device_kmeans(x, 8, seed=s)) for s in range(3))
    theirs = min(_inertia(x, kmeans_centres(x, 8, seed=s)) for s in range(3))
    assert ours <= 1.05 * theirs, (ours, theirs)


def test_few_distinct_vectors_give_those_vectors_and_a_run_repeats():
    x = np.repeat(np.array([[0.0, 1.0], [5.0, 5.0], [-3.0, 2.0]]), [5, 1, 7], axis=0)
    centres = device_kmeans(x, 3, seed=4)
    np.testing.assert_allclose(centres[np.lexsort(centres.T)], x[np.lexsort(x.T)][[0, 5, 12]])
    np.testing.assert_array_equal(device_kmeans(x, 3, seed=4), centres)


def test_bad_requests_name_the_problem():
    with pytest.raises(ValueError, match="at least K = 5"):
        device_kmeans(np.zeros((3, 2)), 5, seed=0)
    with pytest.raises(ValueError, match="n_init and max_iter"):
        device_kmeans(np.zeros((9, 2)), 2, seed=0, n_init=0)
    with pytest.raises(ValueError, match="finite"):
        device_kmeans(np.array([[0.0, 1.0], [np.nan, 2.0], [3.0, 3.0]]), 2, seed=0)


def test_sizes_in_one_bucket_share_one_program():
    from dpp.experiment.compilation import CompileCounter

    rng = np.random.default_rng(5)
    device_kmeans(rng.normal(size=(1000, 4)), 3, seed=0)
    with CompileCounter() as counter:
        device_kmeans(rng.normal(size=(1001, 4)), 3, seed=0)
        device_kmeans(rng.normal(size=(1003, 4)), 3, seed=1)
    assert counter.compiles == 0, counter.names


def test_auto_chooses_by_the_problems_shape_and_unknown_solvers_are_named():
    from dpp.init import DEVICE_KMEANS_DIM, DEVICE_KMEANS_WORK, kmeans_solver_for

    t = DEVICE_KMEANS_WORK // (256 * 16)
    assert kmeans_solver_for(t, 256, 16, "auto") == "jax"
    assert kmeans_solver_for(t - 1, 256, 16, "auto") == "scikit-learn"
    # low-dimensional starts stay on scikit-learn's, however large (MPEG-7's shape)
    assert kmeans_solver_for(10**7, DEVICE_KMEANS_DIM - 1, 200, "auto") == "scikit-learn"
    assert kmeans_solver_for(10, 2, 2, "jax") == "jax"
    assert kmeans_solver_for(10**9, 256, 16, "scikit-learn") == "scikit-learn"
    with pytest.raises(ValueError, match="kmeans_solver must be one of"):
        kmeans_solver_for(10, 2, 2, "cuda")


def test_the_estimators_start_runs_the_solver_they_name():
    """``kmeans_solver`` reaches k-means: ``jax`` gives device_kmeans' centres, the default
    (``auto`` on a small problem) scikit-learn's, to the bit; a bad value is a clear error."""
    import dpp
    from dpp.init import kmeans_solver_for

    rng = np.random.default_rng(3)
    X = [rng.normal(size=(rng.integers(3, 9), 4)) + (i % 2) for i in range(30)]
    y = np.arange(30) % 2
    starts = {}
    for solver in ("scikit-learn", "jax", "auto"):
        est = dpp.DPPClassifier(n_prototypes=3, kmeans_solver=solver)
        sets, seed = est.prepare_sets(X, y, None)
        starts[solver] = est.initial_centres(sets, seed)
    vectors = np.asarray(sets.vectors)
    assert kmeans_solver_for(*vectors.shape, 3, "auto") == "scikit-learn"
    np.testing.assert_array_equal(starts["auto"], starts["scikit-learn"])
    np.testing.assert_array_equal(starts["jax"], device_kmeans(vectors, 3, seed))
    assert not np.array_equal(starts["jax"], starts["scikit-learn"])
    with pytest.raises(ValueError, match="kmeans_solver"):
        dpp.DPPClassifier(kmeans_solver="gpu").fit(X, y)


def test_the_paper_experiments_pin_scikit_learns_start_and_the_rest_take_the_default():
    from conftest import CONFIG_DIR
    from hydra import compose, initialize_config_dir

    import dpp.experiment.config_store  # noqa: F401  (registers the defaults' config groups)
    from dpp.init import KMEANS_SOLVER

    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        for experiment in ("table1_mpeg7", "table2_indian_pines", "table2_indian_pines_disjoint",
                           "adult"):  # fmt: skip
            assert compose("config", [f"experiment={experiment}"]).kmeans.solver == "scikit-learn"
        assert compose("config", ["experiment=synthetic"]).kmeans.solver == KMEANS_SOLVER
