"""docs/examples/lightning_regression.py runs on the reference (a worker killed, resumed)."""

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), *[os.pardir] * 4))


def test_example_runs_and_resumes(tmp_path):
    out = subprocess.run(
        [sys.executable, os.path.join(ROOT, "docs", "examples", "lightning_regression.py"),
         "--epochs", "3", "--samples", "256", "--storage", str(tmp_path)],
        capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "worker killed once: True" in out.stdout
    assert "checkpoint of epoch 2: held-out mse" in out.stdout
