"""Checks that need 4 devices; tests/test_sharding.py runs them in a subprocess with
XLA_FLAGS=--xla_force_host_platform_device_count=4 (JAX reads it once, at start-up).

Run by hand: XLA_FLAGS=--xla_force_host_platform_device_count=4 python -m pytest \
tests/multidevice_checks.py
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_experiment import _compose

from dpp.datasets.generated import make_generated
from dpp.datasets.synthetic import make_synthetic
from dpp.experiment.runner import run
from dpp.init import kmeans_centres
from dpp.likelihood import Params, objective
from dpp.model import fit_dpp
from dpp.sharding import device_mesh, shard_sets
from dpp.solvers.coordinate_ascent import FitSettings

pytestmark = pytest.mark.skipif(jax.device_count() < 4, reason="needs 4 devices")


@pytest.mark.parametrize(
    "dim, max_size, scale, offset, per_prototype",
    [(2, 20, 1.0, 0.0, False), (7, 40, 1e-3, 5.0, True), (20, 3, 1e3, -1e3, False)],
)
def test_likelihood_and_gradients_on_4_devices_equal_one_device(
    dim, max_size, scale, offset, per_prototype
):
    sets = make_generated(
        num_sets=57, dim=dim, max_size=max_size, scale=scale, offset=offset, seed=dim
    ).sets
    k = 5
    rng = np.random.default_rng(dim)
    mu = kmeans_centres(np.asarray(sets.vectors), k, 0, 1, 50)
    spread = np.median(np.sum((np.asarray(sets.vectors) - mu[0]) ** 2, axis=1))
    log_beta = np.log(1.0 / spread) + rng.normal(size=k if per_prototype else ()) * 0.3
    params = Params(
        jnp.asarray(mu, jnp.float32),
        jnp.asarray(log_beta, jnp.float32),
        jnp.asarray(rng.normal(size=(k, 2)), jnp.float32),
    )
    value_and_grad = jax.jit(jax.value_and_grad(lambda p, s: objective(p, s, 0.1)))
    one = value_and_grad(params, sets.bucketed())
    sharded = shard_sets(sets, device_mesh(4))
    assert len(sharded.sets_per_device) == 4 and sum(sharded.sets_per_device) == 57
    four = value_and_grad(params, sharded)
    np.testing.assert_allclose(four[0], one[0], rtol=2e-6)
    for name, g4, g1 in zip(Params._fields[:3], four[1][:3], one[1][:3], strict=True):
        g1 = np.asarray(g1)
        np.testing.assert_allclose(g4, g1, rtol=1e-4, atol=1e-5 * np.abs(g1).max(), err_msg=name)


def test_fit_on_4_devices_equals_one_device():
    sets = make_synthetic(num_sets=100, min_size=1, max_size=20, seed=0).sets
    centres = kmeans_centres(np.asarray(sets.vectors), 2, 0, 1, 300)
    settings = FitSettings()
    one = fit_dpp(sets, centres, settings, jax.random.key(0))
    four = fit_dpp(sets, centres, settings, jax.random.key(0), devices="all")
    assert four.report.rounds == one.report.rounds > 5
    np.testing.assert_allclose(four.history, one.history, rtol=2e-5)
    np.testing.assert_allclose(four.prototypes, one.prototypes, rtol=1e-3, atol=1e-3)
    p1, p4 = np.asarray(one.log_predictive(sets)), np.asarray(four.log_predictive(sets))
    np.testing.assert_array_equal(p4.argmax(1), p1.argmax(1))
    np.testing.assert_allclose(p4, p1, atol=1e-3)


def test_early_stopping_on_4_devices_picks_the_one_device_round():
    sets = make_synthetic(num_sets=100, min_size=1, max_size=20, seed=0).sets
    centres = kmeans_centres(np.asarray(sets.vectors), 2, 0, 1, 300)
    settings = FitSettings(max_rounds=4)
    kwargs = {"validation_fraction": 0.3}
    one = fit_dpp(sets, centres, settings, jax.random.key(0), **kwargs)
    four = fit_dpp(sets, centres, settings, jax.random.key(0), devices=4, **kwargs)
    assert four.report.early_stopping.best == one.report.early_stopping.best
    np.testing.assert_allclose(
        four.report.early_stopping.validation_history,
        one.report.early_stopping.validation_history,
        rtol=1e-4,
    )
    np.testing.assert_allclose(four.history, one.history, rtol=2e-5)


def test_cli_devices_key_gives_the_one_device_results(tmp_path):
    """With the CLI defaults (verbose round log on, figures): was an ordered-effect error on
    more than one device, when the round log was a callback inside the program."""
    one = run(_compose([]), output_dir=tmp_path / "one")["trials"][0]
    four = run(_compose(["devices=4"]), output_dir=tmp_path / "four")["trials"][0]
    assert four["info"]["prototypes"]["devices"] == 4
    assert (tmp_path / "four" / "figure1.png").is_file()
    assert four["accuracy"] == one["accuracy"]
    assert four["test_log_likelihood"] == pytest.approx(one["test_log_likelihood"], abs=1e-4)
    assert four["final_objective"] == pytest.approx(one["final_objective"], rel=2e-5)


def test_devices_beyond_the_machine_are_refused():
    with pytest.raises(ValueError, match="devices=5 but JAX sees 4"):
        device_mesh(5)


def test_shared_pool_sets_fit_on_one_device_and_say_so(caplog):
    rng = np.random.default_rng(0)
    pool = rng.normal(size=(40, 3)).astype(np.float32)
    members = np.concatenate([np.arange(i, i + 5) for i in range(0, 35, 3)])  # overlapping
    set_ids = np.repeat(np.arange(12), 5)
    labels = np.eye(2, dtype=np.float32)[np.arange(12) % 2]
    from dpp.sets import RaggedSets

    sets = RaggedSets.from_flat(pool, set_ids, labels, members=members)
    centres = kmeans_centres(pool, 3, 0, 1, 50)
    model = fit_dpp(sets, centres, FitSettings(max_rounds=2), jax.random.key(0), devices=4)
    assert model.report.prototypes.devices == 1
    assert "cannot be split by set" in caplog.text


def test_another_split_of_the_same_padded_shape_reuses_the_compiled_program():
    from dpp.experiment.compilation import CompileCounter

    sets = make_generated(num_sets=80, dim=3, max_size=10, seed=5).sets
    mesh = device_mesh(4)
    first = shard_sets(sets.subset(np.arange(40)), mesh)
    second = shard_sets(sets.subset(np.arange(40, 80)), mesh)
    assert jax.tree.map(jnp.shape, first) == jax.tree.map(jnp.shape, second)
    mu = jnp.asarray(kmeans_centres(np.asarray(sets.vectors), 4, 0, 1, 50), jnp.float32)
    params = Params(mu, jnp.asarray(0.0, jnp.float32), jnp.zeros((4, 2), jnp.float32))
    value_and_grad = jax.jit(jax.value_and_grad(lambda p, s: objective(p, s, 0.1)))
    jax.block_until_ready(value_and_grad(params, first))
    with CompileCounter() as counter:
        jax.block_until_ready(value_and_grad(params, second))
    assert counter.compiles == 0, counter.names
