"""`reference.init()` / `shutdown()` / `is_initialized()`: the cluster fit() runs on.

Mirrors `ray.init`'s common arguments. With no address it starts an embedded single-node
simcluster sized to this machine (or to num_cpus/num_gpus/resources); with an address
(or SIMCLUSTER_ADDRESS, which `simcluster run` sets) it connects to a running cluster.
`fit()` calls `ensure_cluster()`, so like `ray.init()` this happens on first use. The
cluster stays up (warm node supervisors) until `shutdown()` or interpreter exit.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading

#: modules node supervisors import once, so every forked worker starts with them loaded
PRELOAD = ("reference.train._internal.worker_group.worker", "simcluster.worker",
           "reference.train", "pyarrow.fs", "cloudpickle", "reference.data", "reference.tune")

#: how long a fit waits for the nodes to import what it asked for (they import in parallel)
PRELOAD_TIMEOUT_S = 300.0

_lock = threading.RLock()
_cluster = None
_owned = False
_preloaded: set = set()  # modules every node of the current cluster has (or was asked for)
logger = logging.getLogger(__name__)


def init(address: str | None = None, *, num_cpus: int | None = None,
         num_gpus: int | None = None, resources: dict | None = None,
         ignore_reinit_error: bool = False, preload: tuple = (), **kwargs):
    """Start an embedded cluster, or connect to the one at `address` ("auto", or None while
    the SIMCLUSTER_ADDRESS environment variable is set, as `ray.init()` reads RAY_ADDRESS:
    the cluster of `simcluster run`). Returns the cluster handle."""
    global _cluster, _owned
    unknown = sorted(set(kwargs) - {"namespace", "runtime_env", "logging_level",
                                    "log_to_driver", "include_dashboard"})
    if unknown:
        raise TypeError(f"init() got unexpected keyword arguments {unknown}")
    with _lock:
        if _cluster is not None:
            if ignore_reinit_error:
                return _cluster
            raise RuntimeError("reference.init() was already called; call "
                               "reference.shutdown() first or pass ignore_reinit_error=True.")
        import simcluster

        if address is None:
            address = os.environ.get("SIMCLUSTER_ADDRESS") or None
        if address == "auto":
            address = os.environ.get("SIMCLUSTER_ADDRESS")
            if not address:
                raise ConnectionError("init(address='auto'): SIMCLUSTER_ADDRESS is not set; "
                                      "start a cluster with `simcluster run` or pass an address.")
        if address is not None:
            if num_cpus is not None or num_gpus is not None:
                raise ValueError("When connecting to an existing cluster, num_cpus and "
                                 "num_gpus must not be provided.")
            _cluster, _owned = simcluster.connect(address), False
            # A cluster someone else started may not have preloaded the runtime: ask its
            # nodes to import it once, or every worker would (a third of a second each).
            # Frameworks are asked for by the fits that use them (`ensure_cluster`): a node
            # already running imports into its own memory, ~100 MB with torch, so asking
            # 256 nodes for torch because the script imported it would cost 25 GB.
            _request_preload(PRELOAD + tuple(preload))
            return _cluster
        _check_count("num_cpus", num_cpus)
        _check_count("num_gpus", num_gpus)
        spec = simcluster.NodeSpec(
            cpus=(os.cpu_count() or 1) if num_cpus is None else num_cpus,
            gpus=num_gpus or 0, resources=dict(resources or {}),
            accelerator="CUDA" if num_gpus else None)
        preload = tuple(preload) + tuple(m for m in imported_frameworks() if m not in preload)
        _cluster = simcluster.Cluster(nodes=[spec], preload=PRELOAD + preload)
        _cluster.__enter__()
        _owned = True
        _preloaded.update(PRELOAD + preload)
        return _cluster


def imported_frameworks() -> tuple:
    """The modules of every Train backend this process has imported (the frameworks the
    script imported, e.g. `from reference.train.torch import TorchTrainer`): an embedded
    cluster's node supervisors import them once, so no worker or Tune trial pays for it."""
    import sys

    backend = sys.modules.get("reference.train.backend")  # never imported from here
    if backend is None:
        return ()
    found, todo = [], list(backend.Backend.__subclasses__())
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        found.extend(m for m in cls.preload_modules if m not in found)
    return tuple(found)


def _check_count(name: str, value) -> None:
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
        raise ValueError(f"{name}={value!r}: expected a non-negative int or None.")


def shutdown() -> None:
    """Stop the embedded cluster (or disconnect); idempotent."""
    global _cluster, _owned
    with _lock:
        cluster, owned = _cluster, _owned
        _cluster, _owned = None, False
        _preloaded.clear()
    if cluster is not None:
        if owned:
            cluster.__exit__(None, None, None)
        else:
            getattr(cluster, "close", lambda: None)()


def is_initialized() -> bool:
    return _cluster is not None


def ensure_cluster(preload: tuple = ()):
    """The current cluster, starting the embedded default one on first use. Its nodes
    import `preload` (e.g. the trainer's framework) once: at the start of an embedded
    cluster, else by a preload request, so no worker pays for it."""
    with _lock:
        if _cluster is None:
            address = os.environ.get("SIMCLUSTER_ADDRESS")
            init(address=address, preload=() if address else preload)
        _request_preload(preload)
        return _cluster


def _request_preload(modules: tuple) -> None:
    """Ask every node of the cluster to import `modules` it was not asked for yet (under
    `_lock`). A failure only costs speed: the workers import what they need themselves."""
    missing = [m for m in dict.fromkeys(modules) if m not in _preloaded]
    ask = getattr(_cluster, "preload", None)
    if not missing or ask is None:
        return
    _preloaded.update(missing)
    try:
        failed = ask(missing, timeout_s=PRELOAD_TIMEOUT_S)
    except Exception as exc:  # noqa: BLE001 - an optimization, never a reason to fail
        logger.warning("Preloading %s on the cluster's nodes failed (%s); each worker "
                       "imports them itself.", missing, exc)
        return
    if failed:
        logger.warning("Some nodes could not preload modules (each worker imports them "
                       "itself there): %s", failed)


atexit.register(shutdown)
