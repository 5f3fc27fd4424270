"""docs/examples/torch_parquet_ingest.py runs on the reference (a worker killed, resumed), on
a running cluster sized as the embedded one would be (SIMCLUSTER_ADDRESS, as `simcluster
run` sets it) whose node supervisors imported, besides the runtime and torch, what each
worker of this example would import on its own: torch._dynamo (DistributedDataParallel's
first use) and pandas (pyarrow's to_numpy). Each of the four workers of the two attempts
forks with them loaded instead of importing them (seconds of CPU each)."""

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), *[os.pardir] * 3))
PRELOAD = ("torch", "torch.distributed", "torch.distributed._functional_collectives",
           "torch._dynamo", "reference.train.torch", "pandas", "pyarrow.parquet")


@pytest.fixture
def warm_cluster():
    import reference
    import simcluster

    spec = simcluster.NodeSpec(cpus=os.cpu_count() or 1)
    with simcluster.Cluster(nodes=[spec], preload=(*reference.PRELOAD, *PRELOAD)) as cluster:
        yield cluster


def test_example_reads_disjoint_shards_and_resumes(tmp_path, warm_cluster):
    out = subprocess.run(
        [sys.executable, os.path.join(ROOT, "docs", "examples", "torch_parquet_ingest.py"),
         "--epochs", "3", "--rows", "8000", "--storage", str(tmp_path)],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
        env=dict(os.environ, SIMCLUSTER_ADDRESS=warm_cluster.address))
    assert out.returncode == 0, out.stderr[-3000:]
    assert "rows per worker and epoch: 3600 (train rows 7200, 2 workers)" in out.stdout
    assert "a worker was killed in epoch 1: True" in out.stdout
    assert "'epoch': 2" in out.stdout
