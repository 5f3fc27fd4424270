import contextlib
import faulthandler
import importlib.util
import signal
import threading

import pytest

# Without the lightgbm extra these modules cannot even be imported: leave them out of
# collection, and let test_lightgbm_installed.py report one skip that says why.
if importlib.util.find_spec("lightgbm") is None:
    collect_ignore_glob = ["test_lightgbm_[!i]*.py"]

#: the most seconds one test of this folder may take (a module may set LIMIT_S)
LIMIT_S = 120


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


@pytest.fixture(scope="module")
def lightgbm_cluster():
    """Three CPUs whose workers fork with LightGBM and this folder's training functions."""
    with gbdt_cluster("lightgbm", "reference.train.lightgbm", "lightgbm_fns"):
        yield


@pytest.fixture(autouse=True)
def _bounded(request):
    """Fails a test that runs past its module's LIMIT_S (a hung collective, a fit that never
    returns) with every thread's stack, instead of hanging the run; the cluster fixture's
    teardown then stops the workers."""
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
