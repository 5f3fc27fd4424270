"""docs/examples/transformers_gpt2.py and accelerate_classifier.py run on the reference, on
a running cluster whose node supervisors imported transformers and accelerate once
(SIMCLUSTER_ADDRESS, as `simcluster run` sets it), shared by both: the workers fork with
them loaded instead of importing them (seconds of CPU each)."""

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), *[os.pardir] * 4))


def _run(cluster, example: str, *args: str) -> str:
    out = subprocess.run(
        [sys.executable, os.path.join(ROOT, "docs", "examples", example), *args],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "SIMCLUSTER_ADDRESS": cluster.address})
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


def test_transformers_example(tmp_path, hf_cluster):
    stdout = _run(hf_cluster, "transformers_gpt2.py", "--epochs", "1", "--samples", "128",
                  "--storage", str(tmp_path))
    assert "final metrics: step 4, epoch 1.0" in stdout


def test_accelerate_example(tmp_path, hf_cluster):
    stdout = _run(hf_cluster, "accelerate_classifier.py", "--epochs", "1", "--samples", "256",
                  "--storage", str(tmp_path))
    assert "'processes': 2" in stdout
    assert "checkpoint holds ['0.bias', '0.weight', '2.bias', '2.weight']" in stdout
