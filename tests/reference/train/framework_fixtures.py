"""What the framework test folders (lightning/, huggingface/) share: a cluster whose node
supervisors preload the framework, and a driver process left as a local-mode fit found it."""

from __future__ import annotations

import contextlib
import os
import sys

LAUNCHER_VARS = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "NODE_RANK",
                 "MASTER_ADDR", "MASTER_PORT")
TORCH_PRELOAD = ("torch", "torch.distributed", "torch.distributed._functional_collectives",
                 "reference.train.torch")


@contextlib.contextmanager
def preloaded_cluster(*modules: str):
    """A one-node cluster whose supervisors imported `modules` once (workers fork with them),
    with reference.init() connected to it."""
    import reference
    import simcluster
    from reference import PRELOAD

    reference.shutdown()
    preload = (*PRELOAD, *TORCH_PRELOAD, *modules)
    with simcluster.Cluster(nodes=[simcluster.NodeSpec(cpus=2)], preload=preload) as cluster:
        reference.init(address=cluster.address)
        try:
            yield cluster
        finally:
            reference.shutdown()


@contextlib.contextmanager
def driver_left_as_found():
    """A local-mode fit runs the training function in this process: a framework may leave a
    process group and launcher variables behind, which the next local fit would pick up."""
    before = {k: os.environ.get(k) for k in LAUNCHER_VARS}
    yield
    dist = sys.modules.get("torch.distributed")  # nothing to undo if torch never loaded
    if dist is not None and dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
    for key, value in before.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
