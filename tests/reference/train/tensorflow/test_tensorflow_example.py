"""docs/examples/keras_quickstart.py runs on the reference (2 workers, synthetic data)."""

import os
import subprocess
import sys

import pytest

pytest.importorskip("tensorflow")
pytest.importorskip("tf_keras")
pytestmark = pytest.mark.slow
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), *[os.pardir] * 4))


def test_keras_quickstart_trains_on_two_workers():
    out = subprocess.run(
        [sys.executable, os.path.join(ROOT, "docs", "examples", "keras_quickstart.py"),
         "--epochs", "3"], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-3000:]
    line = next(line for line in out.stdout.splitlines() if line.startswith("final metrics"))
    metrics = eval(line.split(": ", 1)[1])  # noqa: S307 - the example's own printed dict
    assert metrics["loss"] < 0.5 and "mean_absolute_error" in metrics
    assert "checkpoint files: ['.metadata.json', 'model.keras']" in out.stdout
