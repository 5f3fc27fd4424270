"""What the framework test folders (lightning/, huggingface/, xgboost/, lightgbm/) share: a
cluster whose node supervisors preload the framework, a driver process left as a local-mode
fit found it, and a per-test deadline that dumps every thread's stack."""

from __future__ import annotations

import contextlib
import faulthandler
import os
import signal
import sys
import threading

import pytest

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


@contextlib.contextmanager
def gbdt_cluster(*modules: str, cpus: int = 3):
    """A one-node cluster (`cpus` CPUs: up to that many 1-CPU workers) whose supervisors
    imported `modules` once, with reference.init() connected to it."""
    import reference

    reference.shutdown()
    reference.init(num_cpus=cpus, preload=modules)
    try:
        yield
    finally:
        reference.shutdown()


#: the most seconds one test of a folder using `bounded` may take (a module may set LIMIT_S)
LIMIT_S = 120


@pytest.fixture(autouse=True)
def bounded(request):
    """Fails a test that runs past its module's LIMIT_S (a hung collective, a fit that never
    returns) with every thread's stack, instead of hanging the run; the cluster fixture's
    teardown then stops the workers. A folder's conftest imports it to apply it."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    limit = getattr(request.module, "LIMIT_S", LIMIT_S)

    def expire(signum, frame):
        faulthandler.dump_traceback(all_threads=True)
        raise TimeoutError(f"{request.node.nodeid} ran past {limit} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(limit)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
