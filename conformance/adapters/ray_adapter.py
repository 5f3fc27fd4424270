"""Adapter for real Ray Train (`ray[train]==2.60.0`).

One Ray session per test session. Every fit() runs inside a `num_cpus=0` Ray task (as
Ray's own tests do), so the driver thread stays free to add or remove nodes while it runs,
and `ray.get(..., timeout=deadline)` turns a hang into a verdict. After a fit that raised or
hung the session is replaced: Ray 2.60 can leak a failed worker group's resources and then
wait forever for them.

Multi-node clusters use `ray.cluster_utils.Cluster` with one loopback address per node
(127.0.0.2, 127.0.0.3, ...): Ray Train groups ranks by node IP, so nodes sharing an address
would look like one node.
"""

from __future__ import annotations

import contextlib
import faulthandler
import os
import tempfile
import time
from typing import Any, Callable

from conformance.adapters.base import (
    Adapter,
    ClusterHandle,
    FitHandle,
    NodeSpec,
    Outcome,
    journal_dir_of,
)

_ENV = {
    # Reports are drained once per controller poll; Ray's own tests lower the interval too.
    "RAY_TRAIN_HEALTH_CHECK_INTERVAL_S": "0.1",
    "RAY_DEDUP_LOGS": "0",
    "RAY_USAGE_STATS_ENABLED": "0",
}


def _node_id() -> str:
    import ray

    return ray.get_runtime_context().get_node_id()


def _run_fit_body(make_trainer: Callable[[], Any], stack_file: str, dump_after_s: float):
    """Body of the Ray task that drives one fit(); returns ("ok", Result) or ("err", exc)."""
    with open(stack_file, "w") as out:
        faulthandler.dump_traceback_later(dump_after_s, exit=False, file=out)
        try:
            return ("ok", make_trainer().fit())
        except BaseException as exc:  # noqa: BLE001 - carried back to the driver as data
            return ("err", exc)
        finally:
            faulthandler.cancel_dump_traceback_later()


class _RayFit(FitHandle):
    def __init__(self, adapter: RayAdapter, ref, deadline_s: float, stack_file: str,
                 journal_dir: str | None = None):
        self._adapter, self._ref = adapter, ref
        self._deadline_s, self._stack_file = deadline_s, stack_file
        self._journal_dir = journal_dir
        self._start = time.monotonic()

    def wait(self) -> Outcome:
        import ray

        remaining = max(0.1, self._deadline_s - (time.monotonic() - self._start))
        try:
            kind, value = ray.get(self._ref, timeout=remaining)
        except ray.exceptions.GetTimeoutError:
            time.sleep(1.5)  # let the fit task write its stack dump
            stacks = _read(self._stack_file)
            with contextlib.suppress(Exception):
                ray.cancel(self._ref, force=True)
            self._adapter.reset()
            return Outcome(hang=True, elapsed_s=time.monotonic() - self._start, stacks=stacks,
                           journal_dir=self._journal_dir)
        elapsed = time.monotonic() - self._start
        os.unlink(self._stack_file)
        if kind == "ok":
            return Outcome(result=value, elapsed_s=elapsed)
        self._adapter.reset()
        return Outcome(error=value, elapsed_s=elapsed)


def _read(path: str) -> str:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


class _RayCluster(ClusterHandle):
    def __init__(self, cluster):
        self._cluster = cluster
        self.nodes: list = []
        self._next_ip = 2

    def add_node(self, spec: NodeSpec, wait: bool = True):
        node = self._cluster.add_node(
            num_cpus=spec.cpus,
            num_gpus=spec.gpus,
            resources=dict(spec.resources),
            node_ip_address=f"127.0.0.{self._next_ip}",
        )
        self._next_ip += 1
        if wait:
            self._cluster.wait_for_nodes()
        self.nodes.append(node)
        return node

    def remove_node(self, node) -> None:
        self._cluster.remove_node(node, allow_graceful=True)
        self.nodes.remove(node)

    def kill_node(self, node) -> None:
        self._cluster.remove_node(node, allow_graceful=False)
        self.nodes.remove(node)


class RayAdapter(Adapter):
    name = "ray"
    capabilities = frozenset({"multinode", "add_node", "remove_node", "kill_node", "elastic"})
    fit_deadline_s = 120.0
    fit_examples = 2
    num_cpus = 4

    def __init__(self):
        self._cluster = None

    @property
    def train(self):
        import ray.train

        return ray.train

    @property
    def DataParallelTrainer(self):  # noqa: N802
        from ray.train.v2.api.data_parallel_trainer import DataParallelTrainer

        return DataParallelTrainer

    def version(self) -> str:
        import ray

        return ray.__version__

    # ------------------------------------------------------------ session
    def setup(self) -> None:
        os.environ.update(_ENV)
        self._init()

    def _init(self, address: str = "local") -> None:
        import ray

        kwargs = dict(include_dashboard=False, log_to_driver=False, logging_level="ERROR")
        if address == "local":
            kwargs["num_cpus"] = self.num_cpus
        ray.init(address=address, **kwargs)

    def teardown(self) -> None:
        import ray

        ray.shutdown()
        if self._cluster is not None:
            self._cluster.shutdown()
            self._cluster = None

    def reset(self) -> None:
        import ray

        ray.shutdown()
        self._init(self._cluster.address if self._cluster is not None else "local")

    # ------------------------------------------------------------ fit
    def start_fit(self, make_trainer, deadline_s: float) -> FitHandle:
        import ray

        fd, stack_file = tempfile.mkstemp(prefix="trainspec-stacks-", suffix=".txt")
        os.close(fd)
        task = ray.remote(num_cpus=0, max_retries=0)(_run_fit_body)
        ref = task.remote(make_trainer, stack_file, max(1.0, deadline_s - 1.0))
        return _RayFit(self, ref, deadline_s, stack_file, journal_dir_of(make_trainer))

    @contextlib.contextmanager
    def cluster(self, nodes: list[NodeSpec]):
        import ray
        from ray.cluster_utils import Cluster

        ray.shutdown()
        self._cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0})
        handle = _RayCluster(self._cluster)
        try:
            for spec in nodes:
                handle.add_node(spec, wait=False)
            self._cluster.wait_for_nodes()
            self._init(self._cluster.address)
            yield handle
        finally:
            ray.shutdown()
            self._cluster.shutdown()
            self._cluster = None
            self._init("local")

    @staticmethod
    def node_id_function():
        return _node_id
