"""docs/examples/lightning_regression.py runs on the reference (a worker killed, resumed), on
a running cluster whose node supervisors imported Lightning once (SIMCLUSTER_ADDRESS, as
`simcluster run` sets it): each of the four workers of the two attempts forks with it
loaded instead of importing it (several seconds of CPU each)."""

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), *[os.pardir] * 4))


def test_example_runs_and_resumes(tmp_path, lightning_cluster):
    env = dict(os.environ, SIMCLUSTER_ADDRESS=lightning_cluster.address)
    out = subprocess.run(
        [sys.executable, os.path.join(ROOT, "docs", "examples", "lightning_regression.py"),
         "--epochs", "3", "--samples", "256", "--storage", str(tmp_path)],
        capture_output=True, text=True, timeout=300, cwd=ROOT, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "worker killed once: True" in out.stdout
    assert "checkpoint of epoch 2: held-out mse" in out.stdout
