"""Indian Pines windows (shared pool), the InfoLoss baseline and the Table 2 experiment."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import CONFIG_DIR, random_sets
from hydra import compose, initialize_config_dir

from dpp.baselines import infoloss
from dpp.datasets.base import default_data_dir
from dpp.datasets.indian_pines import load_indian_pines, window_members
from dpp.encoding import encode_hard
from dpp.errors import DataError
from dpp.experiment.runner import run
from dpp.experiment.splits import split_indices
from dpp.init import kmeans_centres
from dpp.likelihood import Params, objective
from dpp.sets import RaggedSets
from dpp.solvers import LBFGSSettings

FOLDER = default_data_dir() / "hyperspectral"
needs_data = pytest.mark.skipif(not FOLDER.is_dir(), reason=f"Indian Pines not found in {FOLDER}")


def test_window_members_reflect_at_borders():
    members = window_members((6, 5), np.array([[0, 0], [2, 2], [5, 4]]), 3)
    assert members.shape == (3, 9)
    np.testing.assert_array_equal(members[:, 4], [0, 12, 29])  # the centre is the pixel itself
    # pixel (0, 0): rows -1, 0, 1 -> 1, 0, 1 and the same for columns (mirrored about the edge)
    np.testing.assert_array_equal(members[0], [6, 5, 6, 1, 0, 1, 6, 5, 6])
    with pytest.raises(ValueError, match="odd"):
        window_members((6, 5), np.array([[0, 0]]), 4)


@needs_data
def test_windows_of_real_scene():
    data = load_indian_pines(None, classes=[2, 5, 16], max_per_class=20)
    cube = np.load(FOLDER / "Indian_pines_corrected.npy")
    sets = data.sets
    assert sets.num_sets == 60 and sets.vectors.shape == (145 * 145, 200)
    np.testing.assert_array_equal(sets.set_sizes(), 49)
    members = np.asarray(sets.members).reshape(60, 49)
    rows, cols = np.divmod(data.anchors, 145)
    # the centre spectrum of each set is its own pixel's spectrum
    np.testing.assert_array_equal(np.asarray(sets.vectors)[members[:, 24]], cube[rows, cols])
    np.testing.assert_array_equal(members[:, 24], data.anchors)
    assert data.class_names == ("Corn-notill", "Grass-pasture", "Stone-Steel-Towers")


@needs_data
def test_border_pixel_has_49_members():
    data = load_indian_pines(None, num_classes=16)
    rows, cols = np.divmod(data.anchors, 145)
    border = np.flatnonzero((rows < 3) | (cols < 3) | (rows > 141) | (cols > 141))
    assert border.size == 255  # as the data README counts
    sizes = data.sets.set_sizes()
    np.testing.assert_array_equal(sizes[border], 49)
    window = np.asarray(data.sets.members).reshape(-1, 49)[border[0]]
    assert np.unique(window).size < 49  # reflected pixels repeat


@needs_data
def test_pool_and_disjoint_layouts_agree_on_real_windows(x64):
    data = load_indian_pines(None, classes=[2, 11], max_per_class=5)
    shared = data.sets.astype(jnp.float64)
    disjoint = RaggedSets.from_flat(
        shared.member_vectors(),
        np.asarray(shared.set_ids),
        np.asarray(shared.labels),
        dtype=jnp.float64,
    )
    rng = np.random.default_rng(0)
    mean, std = shared.member_vectors().mean(0), shared.member_vectors().std(0)
    shared, disjoint = (
        s.with_vectors((np.asarray(s.vectors) - mean) / std) for s in (shared, disjoint)
    )
    params = Params(
        jnp.asarray(rng.normal(size=(4, 200))),
        jnp.asarray(-4.0),
        jnp.asarray(rng.normal(size=(4, 2))),
    )
    for a, b in zip(
        jax.tree.leaves(jax.grad(objective)(params, shared, 0.01)),
        jax.tree.leaves(jax.grad(objective)(params, disjoint, 0.01)),
        strict=True,
    ):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-9, atol=1e-12)


@pytest.fixture(scope="module")
def infoloss_problem():
    rng = np.random.default_rng(7)
    sets = random_sets(
        rng, num_sets=30, dim=2, num_classes=3, max_size=8, soft=True, dtype=np.float32
    )
    return sets, kmeans_centres(np.asarray(sets.vectors), 4, seed=0)


def test_infoloss_objective_decreases_and_pi_on_simplex(infoloss_problem):
    sets, centres = infoloss_problem
    settings = infoloss.InfoLossSettings(max_rounds=8, tol=0.0)
    log_beta = jnp.float32(0.0)
    result = infoloss.learn_codebook(jnp.asarray(centres), sets, log_beta, 0.1, settings)
    history = np.asarray(result.history)[: int(result.num_rounds) + 1]
    assert len(history) > 2 and np.all(np.diff(history) <= 0), history
    assert history[-1] < history[0]
    pi = np.asarray(result.pi)
    assert np.all(pi > 0)
    np.testing.assert_allclose(pi.sum(axis=1), 1.0, rtol=1e-5)
    # the pi-update is the exact minimiser: perturbing pi on the simplex does not lower J
    stats = infoloss.label_mass(sets)
    j = infoloss.objective(result.centres, result.pi, sets.vectors, stats, log_beta, 0.1)
    other = 0.9 * result.pi + 0.1 / 3
    assert float(
        infoloss.objective(result.centres, other, sets.vectors, stats, log_beta, 0.1)
    ) >= float(j)


def test_infoloss_pool_statistics_fold_memberships():
    pool = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 2.0]])
    sets = RaggedSets.from_flat(
        pool,
        np.array([0, 0, 1, 1]),
        np.array([[1.0, 0.0], [0.25, 0.75]]),
        members=np.array([0, 1, 1, 2]),
    )
    stats = infoloss.label_mass(sets)
    np.testing.assert_allclose(np.asarray(stats.mass), [[1, 0], [1.25, 0.75], [0.25, 0.75]])
    np.testing.assert_allclose(np.asarray(stats.count), [1, 2, 1])
    expected = 2 * (0.25 * np.log(0.25) + 0.75 * np.log(0.75))
    np.testing.assert_allclose(float(stats.neg_entropy), expected, rtol=1e-6)


@pytest.mark.extended  # about 8 s on the real data: the default tier keeps near 5 minutes
def test_infoloss_model_encodes_with_learned_centres(infoloss_problem):
    sets, centres = infoloss_problem
    model = infoloss.fit_infoloss(
        sets, centres, 1e-2, LBFGSSettings(max_iter=100), infoloss.InfoLossSettings(max_rounds=3)
    )
    assert model.method == "infoloss" and model.log_beta is None
    assert not np.allclose(model.prototypes, centres)  # the centres moved
    learned = jnp.asarray(model.prototypes, sets.vectors.dtype)  # in the units of the features
    np.testing.assert_allclose(
        np.asarray(model.encode(sets)), np.asarray(encode_hard(sets, learned))
    )
    assert np.all(np.diff(model.history) <= 0)


@needs_data
@pytest.mark.extended  # one of the longest end-to-end runs
def test_table2_experiment_runs_on_a_subset(tmp_path):
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = compose(
            config_name="config",
            overrides=[
                "experiment=table2_indian_pines",
                "trials=1",
                "model.n_prototypes=5",
                "model.max_rounds=2",
                "optimizer.max_iter=5",
                "dataset.loader.classes=[2,6,11]",
                "dataset.loader.max_per_class=20",
                "dataset.split.train_per_class=10",
                "l2_selection.folds=2",
                "baselines.infoloss.max_rounds=2",
                # the neural baselines, small and short: the table has them (issue 33)
                "baselines.attention_mil.embedding=[8]",
                "baselines.attention_mil.max_epochs=3",
                "baselines.deep_sets.embedding=[8]",
                "baselines.deep_sets.max_epochs=3",
            ],
        )
    results = run(cfg, output_dir=tmp_path)
    for name in ("table2.md", "figure2b.png", "results.json"):
        assert (tmp_path / name).is_file(), name
    methods = ["dpp", "standard", "pooling", "bag_of_words", "infoloss", "attention_mil",
               "deep_sets"]  # fmt: skip
    assert [r["method"] for r in results["trials"]] == methods
    assert {r["num_train"] for r in results["trials"]} == {30}
    assert {r["num_test"] for r in results["trials"]} == {30}
    table = (tmp_path / "table2.md").read_text()
    assert "81.25 ± 0.72" in table and "Different data sets" in table


def test_unknown_ground_truth_label_is_rejected(tmp_path):
    """Issue 8: loaders reject unknown label values, naming the file."""
    import scipy.io

    folder = tmp_path / "hyperspectral"
    folder.mkdir()
    np.save(folder / "Indian_pines_corrected.npy", np.ones((4, 5, 3), np.uint16))
    gt = np.zeros((4, 5), np.uint8)
    gt[1, 2] = 17
    scipy.io.savemat(folder / "Indian_pines_gt.mat", {"indian_pines_gt": gt})
    with pytest.raises(DataError, match=r"Indian_pines_gt\.mat: unknown class label 17"):
        load_indian_pines(str(tmp_path), window=3, num_classes=1)
    (folder / "Indian_pines_corrected.npy").write_bytes(b"not an array")
    with pytest.raises(DataError, match=r"Indian_pines_corrected\.npy: cannot be read"):
        load_indian_pines(str(tmp_path), window=3, num_classes=1)


@pytest.mark.extended  # one of the longest end-to-end runs
@needs_data
def test_spatially_disjoint_protocol_runs_on_a_subset(tmp_path):
    """Issue 12: training pixels from whole blocks, test pixels beyond the buffer, lambda by
    block-grouped folds; per-class counts are recorded."""
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = compose(
            config_name="config",
            overrides=[
                "experiment=table2_indian_pines_disjoint",
                "trials=1",
                "model.n_prototypes=5",
                "model.max_rounds=2",
                "optimizer.max_iter=5",
                "dataset.loader.classes=[2,11]",
                "dataset.split.train_per_class=20",
                "dataset.split.block_size=29",
                "l2_selection.folds=2",
                "~baselines.infoloss",
                "figures=[partition_map]",
            ],
        )
    results = run(cfg, output_dir=tmp_path)
    for name in ("partition_map.png", "table2_disjoint.md"):
        assert (tmp_path / name).is_file(), name
    assert "uniform guess" in (tmp_path / "table2_disjoint.md").read_text()
    record = results["trials"][0]
    split = record["split"]
    assert split["train_class_counts"] == [20, 20] and sum(split["test_class_counts"]) > 0
    assert record["l2_folds"] == "groups of blocks"
    data = load_indian_pines(None, window=7, classes=[2, 11])
    train_idx, test_idx = split_indices(
        np.asarray(data.sets.labels), "spatial_blocks", 0, train_per_class=20,
        positions=data.positions, block_size=29, buffer=6,
    )  # fmt: skip
    gap = np.abs(data.positions[test_idx][:, None] - data.positions[train_idx][None]).max(axis=2)
    assert gap.min() > 6  # no test window shares a spectrum with a training window
    assert record["num_test"] == test_idx.size
