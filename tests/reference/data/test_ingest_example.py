"""docs/examples/torch_parquet_ingest.py runs on the reference (a worker killed, resumed)."""

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), *[os.pardir] * 3))


def test_example_reads_disjoint_shards_and_resumes(tmp_path):
    out = subprocess.run(
        [sys.executable, os.path.join(ROOT, "docs", "examples", "torch_parquet_ingest.py"),
         "--epochs", "3", "--rows", "8000", "--storage", str(tmp_path)],
        capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "rows per worker and epoch: 3600 (train rows 7200, 2 workers)" in out.stdout
    assert "a worker was killed in epoch 1: True" in out.stdout
    assert "'epoch': 2" in out.stdout
