"""Issue 11, items 3 and 4: fits over 4 devices and over 2 processes equal one device.

JAX fixes its device count and its distributed runtime at start-up, so the checks run in
subprocesses: tests/multidevice_checks.py with 4 host-platform devices, and two processes of
tests/distributed_fit.py talking over localhost (gloo CPU collectives).
"""

import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from dpp.sets import RaggedSets
from dpp.sharding import device_mesh, shard_sets, split_points

REPO = Path(__file__).resolve().parents[1]


def _multidevice_checks(select: str, passed: int) -> None:
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=4")
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "0",
         "tests/multidevice_checks.py", "-k", select],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert f"{passed} passed" in proc.stdout, proc.stdout[-2000:]


@pytest.mark.extended
def test_four_device_fits_equal_one_device():
    _multidevice_checks("not cli_devices and not early_stopping", 7)


@pytest.mark.slow  # two CLI runs with figures and an early-stopping fit (about 50 s)
def test_four_device_cli_run_and_early_stopping_equal_one_device():
    _multidevice_checks("cli_devices or early_stopping", 2)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


@pytest.mark.slow  # three processes that each import and compile (about 50 s)
def test_two_process_fit_equals_single_process(tmp_path):
    script = [sys.executable, "tests/distributed_fit.py"]
    subprocess.run([*script, str(tmp_path / "one.npz")], cwd=REPO, check=True, timeout=300)
    address = f"localhost:{_free_port()}"
    procs = [
        subprocess.Popen(
            [*script, str(tmp_path / f"two{i}.npz"), address, "2", str(i)],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )  # fmt: skip
        for i in range(2)
    ]
    logs = [p.communicate(timeout=300)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], "\n".join(logs)[-4000:]
    one, two = np.load(tmp_path / "one.npz"), np.load(tmp_path / "two0.npz")
    assert int(two["processes"]) == 2 and int(two["devices"]) == 2
    assert not (tmp_path / "two1.npz").exists()  # process 0 writes
    np.testing.assert_allclose(two["history"], one["history"], rtol=2e-5)
    np.testing.assert_allclose(two["mu"], one["mu"], rtol=1e-3, atol=1e-3)
    np.testing.assert_array_equal(two["log_probs"].argmax(1), one["log_probs"].argmax(1))
    np.testing.assert_allclose(two["log_probs"], one["log_probs"], atol=1e-3)


@pytest.mark.parametrize("parts", [1, 2, 3, 4, 7])
def test_split_points_cut_whole_sets_into_balanced_nonempty_parts(rng, parts):
    sizes = rng.integers(1, 50, size=23)
    sizes[5] = 400  # one large set
    bounds = split_points(sizes, parts)
    assert bounds[0] == 0 and bounds[-1] == len(sizes) and len(bounds) == parts + 1
    assert np.all(np.diff(bounds) >= 1)
    loads = [sizes[a:b].sum() for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
    # each cut lies at the set crossing the target, so no part exceeds T/parts by more than a set
    assert max(loads) <= sizes.sum() / parts + sizes.max()


def test_split_refuses_more_devices_than_sets():
    with pytest.raises(ValueError, match="3 sets cannot be split across 4 devices"):
        split_points(np.array([1, 2, 3]), 4)


def test_one_device_mesh_and_shared_pool_refusal():
    # two sets sharing vector 1 of a pool of 3 (the Indian Pines window layout)
    sets = RaggedSets.from_flat(
        np.arange(6, dtype=np.float32).reshape(3, 2),
        np.array([0, 0, 1, 1]),
        np.eye(2, dtype=np.float32),
        members=np.array([0, 1, 1, 2]),
    )
    mesh = device_mesh(1)
    assert mesh.size == 1
    with pytest.raises(ValueError, match="multi-device fits need the disjoint layout"):
        shard_sets(sets, mesh)
    with pytest.raises(ValueError, match="positive integer or 'all'"):
        device_mesh(0)


def test_adam_with_several_devices_is_refused_before_the_run(tmp_path):
    from test_experiment import _compose

    from dpp.errors import ConfigError
    from dpp.experiment.runner import run

    with pytest.raises(ConfigError, match="devices=2 needs a full-batch optimizer"):
        run(_compose(["optimizer=adam", "devices=2"]), output_dir=tmp_path)
