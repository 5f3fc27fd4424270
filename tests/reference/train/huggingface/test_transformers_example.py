"""docs/examples/transformers_gpt2.py and accelerate_classifier.py run on the reference."""

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), *[os.pardir] * 4))


def _run(example: str, *args: str) -> str:
    out = subprocess.run(
        [sys.executable, os.path.join(ROOT, "docs", "examples", example), *args],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
        env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


def test_transformers_example(tmp_path):
    stdout = _run("transformers_gpt2.py", "--epochs", "1", "--samples", "128",
                  "--storage", str(tmp_path))
    assert "final metrics: step 4, epoch 1.0" in stdout


def test_accelerate_example(tmp_path):
    stdout = _run("accelerate_classifier.py", "--epochs", "1", "--samples", "256",
                  "--storage", str(tmp_path))
    assert "'processes': 2" in stdout
    assert "checkpoint holds ['0.bias', '0.weight', '2.bias', '2.weight']" in stdout
