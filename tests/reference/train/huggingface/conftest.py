import importlib.util
import os
import sys

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

# Without the transformers extra these modules cannot even be imported: leave them out of
# collection, and let test_transformers_installed.py report one skip that says why.
if importlib.util.find_spec("transformers") is None:
    collect_ignore_glob = ["test_transformers_[!i]*.py", "test_accelerate_*.py"]


@pytest.fixture(scope="module")
def hf_cluster():
    """A one-node cluster whose supervisors imported transformers once."""
    import reference
    import simcluster
    from reference import PRELOAD

    reference.shutdown()
    preload = (*PRELOAD, "torch", "torch.distributed",
               "torch.distributed._functional_collectives", "reference.train.torch",
               "transformers", "transformers.trainer", "accelerate",
               "reference.train.huggingface.transformers", "transformers_fns")
    with simcluster.Cluster(nodes=[simcluster.NodeSpec(cpus=2)], preload=preload) as cluster:
        reference.init(address=cluster.address)
        try:
            yield cluster
        finally:
            reference.shutdown()


LAUNCHER_VARS = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "NODE_RANK",
                 "MASTER_ADDR", "MASTER_PORT")


@pytest.fixture(autouse=True)
def driver_left_as_found():
    """A local-mode fit runs the training function in this process: Accelerate may leave a
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
