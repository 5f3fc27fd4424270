"""Adapter for real Ray Train (`ray[train]==2.60.0`).

One Ray session per test session. Every fit() runs inside a `num_cpus=0` Ray task (as
Ray's own tests do), so the driver thread stays free to add or remove nodes while it runs,
and `ray.get(..., timeout=deadline)` turns a hang into a verdict. After a fit that raised,
the job's actors and placement groups still alive are removed and every resource must come
back free within seconds, else the session is replaced (Ray 2.60 can leak a failed worker
group's resources and then wait forever for them; `ray_jobs`); after a hang it is replaced.

Multi-node clusters use `ray.cluster_utils.Cluster` with one loopback address per node
(127.0.0.2, 127.0.0.3, ...): Ray Train groups ranks by node IP, so nodes sharing an address
would look like one node.

With `--ray-address ADDR` (or $TRAINSPEC_RAY_ADDRESS) the suite runs against a Ray cluster
someone else runs instead (`ray start --head`, KubeRay, SLURM): it connects as one driver
(Ray's token authentication reads RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token,
as any driver does), never starts or stops a Ray session of its own, and sizes itself from
the cluster's inventory. A fresh session after a failed fit is not possible there, so the
fit's task is cancelled and every actor and placement group of this driver's job that is
still alive is removed explicitly (`ray_jobs.release_job`). The checks that build clusters skip:
the suite adds and removes no nodes on a cluster it does not own.
"""

from __future__ import annotations

import contextlib
import faulthandler
import os
import signal
import tempfile
import threading
import time
from typing import Any, Callable

from conformance.adapters.base import (
    Adapter,
    ClusterHandle,
    FitHandle,
    NodeSpec,
    Outcome,
    SetupError,
    Unsupported,
    journal_dir_of,
)
from conformance.adapters.ray_jobs import inventory, release_job, released

_ENV = {
    # Reports are drained once per controller poll; Ray's own tests lower the interval too.
    "RAY_TRAIN_HEALTH_CHECK_INTERVAL_S": "0.1",
    # Ray 2.60 starts a PreemptionWatcher actor (a process of its own) with every worker
    # group, to poll Ray for node drains; the suite drains no node on Ray (this adapter has
    # no preempt_node), so the watcher would only cost a process per attempt (0.5-1.5 of
    # 11-14 CPU-s per no-op 2-worker fit, measured on a noisy machine). A check that drains
    # a node must turn it back on.
    "RAY_TRAIN_ENABLE_PREEMPTION_WATCHER": "0",
    "RAY_DEDUP_LOGS": "0",
    "RAY_USAGE_STATS_ENABLED": "0",
}


def _node_id() -> str:
    import ray

    return ray.get_runtime_context().get_node_id()


def _run_fit_body(make_trainer: Callable[[], Any], stack_file: str, dump_after_s: float):
    """Body of the Ray task that drives one fit(); returns ("ok", Result) or ("err", exc).
    The task runs on its worker's main thread, where Ray 2.60's fit() installs a SIGINT
    handler holding the fit's TrainController: the handler the worker had is put back after
    the fit, so that the controller (and the DatasetManager it owns) ends with its last
    handle rather than living on in this reused worker until the next fit."""
    handler = signal.getsignal(signal.SIGINT)
    with open(stack_file, "w") as out:
        faulthandler.dump_traceback_later(dump_after_s, exit=False, file=out)
        try:
            return ("ok", make_trainer().fit())
        except BaseException as exc:  # noqa: BLE001 - carried back to the driver as data
            return ("err", exc)
        finally:
            faulthandler.cancel_dump_traceback_later()
            if threading.current_thread() is threading.main_thread():
                signal.signal(signal.SIGINT, handler)


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
        self._adapter.after_failed_fit()
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
        if spec.accelerator not in (None, "CUDA"):
            raise Unsupported(f"a local Ray cluster cannot declare {spec.accelerator} GPUs "
                              "(Ray detects the GPU kind from the hardware; num_gpus means "
                              "NVIDIA)")
        node = self._cluster.add_node(
            num_cpus=spec.cpus,
            num_gpus=spec.gpus,
            resources=spec.custom_resources(),
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


#: where the suite's `--ray-address` option reaches the adapter (xdist workers, matrix)
RAY_ADDRESS_ENV = "TRAINSPEC_RAY_ADDRESS"
#: where `--allow-node-faults` reaches it ("1")
ALLOW_NODE_FAULTS_ENV = "TRAINSPEC_ALLOW_NODE_FAULTS"


class RayAdapter(Adapter):
    name = "ray"
    capabilities = frozenset({"multinode", "add_node", "remove_node", "kill_node", "elastic"})
    fit_deadline_s = 120.0
    fit_examples = 2
    num_cpus = 4

    def __init__(self, address: str | None = None, allow_node_faults: bool | None = None):
        self._cluster = None
        #: the label value of the nodes this suite added to a joined cluster, while up
        self._pinned_to: str | None = None
        #: an existing cluster to run against (None: a local session of the suite's own)
        self.address = address or os.environ.get(RAY_ADDRESS_ENV) or None
        if allow_node_faults is None:
            allow_node_faults = os.environ.get(ALLOW_NODE_FAULTS_ENV, "") == "1"
        #: on a joined cluster: add nodes of the suite's own there, and remove and kill them
        self.allow_node_faults = bool(self.address and allow_node_faults)
        if self.allow_node_faults:
            self.capabilities = frozenset({"multinode", "add_node", "remove_node", "kill_node"})
            where = f"--ray-address {self.address} --allow-node-faults"
            self.capabilities_note = {
                "elastic": f"{where}: the fits run on the nodes the suite adds through a "
                           "label selector, and Ray 2.60 sizes an elastic group from every "
                           "node's resources, the selector not counted (elastic.py "
                           "_count_possible_workers), so the group waits for a placement "
                           "the suite's nodes cannot hold",
                "tpu_slices": f"{where}: the suite declares no TPU slices on a cluster it "
                              "does not own"}
        elif self.address:
            self.capabilities = frozenset()
            self.capabilities_note = (f"--ray-address {self.address}: the suite does not own "
                                      "this cluster, so it adds, removes and kills no nodes "
                                      "(--allow-node-faults: on nodes of its own it adds)")

    def describe(self) -> str:
        where = f"cluster at {self.address}" if self.address else "local session"
        return f"{super().describe()} ({where})"

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
        if self.address:
            self._connect()

    def ensure_session(self) -> None:
        """The local session starts at the first check (or fit) that needs it, and again
        after a cluster check replaced it: a run of cluster checks alone starts none."""
        import ray

        if not self.address and not ray.is_initialized():
            self._init()

    def _init(self, address: str = "local") -> None:
        import ray

        kwargs = dict(include_dashboard=False, log_to_driver=False, logging_level="ERROR")
        if address == "local":
            kwargs["num_cpus"] = self.num_cpus
        ray.init(address=address, **kwargs)

    def _connect(self) -> None:
        """Join the existing cluster as a driver; size the suite from its inventory."""
        import ray

        _check_reachable(self.address)  # ray.init retries an unanswered address for minutes
        try:
            # the job's own workers (its Train controllers among them) poll as in a local
            # session; nothing else on the cluster sees this environment
            ray.init(address=self.address, log_to_driver=False, logging_level="ERROR",
                     runtime_env={"env_vars": dict(_ENV)})
        except Exception as exc:  # noqa: BLE001 - ConnectionError, AuthenticationError, ...
            raise ExternalClusterError(_why_not_connected(self.address, exc)) from exc
        self.num_cpus = int(ray.cluster_resources().get("CPU", 0))
        self.inventory = inventory()

    def teardown(self) -> None:
        import ray

        if self.address:
            with contextlib.suppress(Exception):
                release_job()
        ray.shutdown()  # with an address: this driver disconnects, the cluster stays
        if self._cluster is not None:
            self._cluster.shutdown()
            self._cluster = None

    def reset(self) -> None:
        import ray

        if self.address:
            release_job()
            return
        ray.shutdown()
        if self._cluster is not None:
            self._init(self._cluster.address)

    def after_failed_fit(self) -> None:
        """A fit raised: its leftovers are released; a session whose resources do not all
        come back is replaced."""
        if self.address or not released():
            self.reset()

    # ------------------------------------------------------------ fit
    def start_fit(self, make_trainer, deadline_s: float) -> FitHandle:
        import ray

        if self._pinned_to:
            from conformance.adapters.ray_nodes import pin

            make_trainer = pin(make_trainer, self._pinned_to)
        self.ensure_session()
        fd, stack_file = tempfile.mkstemp(prefix="trainspec-stacks-", suffix=".txt")
        os.close(fd)
        # On a cluster the suite does not own, the fit's worker process exits after the
        # fit (max_calls=1): the actors it owned (TrainController, DatasetManager, the
        # worker group) end with it, where a reused worker kept them alive.
        options = {}
        if self.address:
            # and it runs on the driver's node, where a user's `trainer.fit()` runs (the
            # TrainController follows it there), never on a node the suite may kill
            options = {"max_calls": 1, "label_selector": {
                "ray.io/node-id": ray.get_runtime_context().get_node_id()}}
        task = ray.remote(num_cpus=0, max_retries=0, **options)(_run_fit_body)
        ref = task.remote(make_trainer, stack_file, max(1.0, deadline_s - 1.0))
        return _RayFit(self, ref, deadline_s, stack_file, journal_dir_of(make_trainer))

    @contextlib.contextmanager
    def cluster(self, nodes: list[NodeSpec]):
        import ray
        from ray.cluster_utils import Cluster

        if self.address:
            if not self.allow_node_faults:
                raise Unsupported(f"--ray-address {self.address}: the suite does not own this "
                                  "cluster, so it builds no clusters there (it adds and "
                                  "removes no nodes; --allow-node-faults: nodes of its own)")
            yield from self._joined_cluster(nodes)
            return

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

    def _joined_cluster(self, nodes: list[NodeSpec]):
        """The body of cluster() on a joined cluster with --allow-node-faults: `nodes` added
        there as nodes of the suite's own, every fit pinned to them until they are gone."""
        from conformance.adapters.ray_nodes import JoinedNodes

        handle = JoinedNodes(self.address)
        try:
            for spec in nodes:  # one at a time: `ray start`s side by side time out
                handle.add_node(spec)
            self._pinned_to = handle.label_value
            yield handle
        finally:
            self._pinned_to = None
            handle.close()

    @contextlib.contextmanager
    def accelerator_cluster(self, nodes: list[NodeSpec]):
        if not self.address:
            with self.cluster(nodes) as handle:
                yield handle
            return
        from conformance.adapters.ray_nodes import ExistingNodes, matching_nodes

        yield ExistingNodes(self.address, matching_nodes(self.address, nodes))

    @staticmethod
    def node_id_function():
        return _node_id


class ExternalClusterError(SetupError):
    """`--ray-address` names a cluster this process cannot join (the message says why)."""


def _why_not_connected(address: str, exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip()
    first = text.splitlines()[0][:300]
    if "auth" in text.lower() or "token" in text.lower():
        fix = ("the cluster uses token authentication: set RAY_AUTH_TOKEN (the token) or "
               "RAY_AUTH_TOKEN_PATH (its file; `ray get-auth-token` prints it on the head "
               "node), or put it in ~/.ray/auth_token")
    else:
        fix = ("is a Ray head listening there (`ray status --address ADDR`)? use the GCS "
               "address HOST:PORT (6379 by default) or ray://HOST:10001 for Ray Client")
    return f"--ray-address {address!r}: cannot connect ({first}); {fix}"


def _check_reachable(address: str, timeout_s: float = 5.0) -> None:
    """A TCP connection to the address's host and port, or an ExternalClusterError."""
    import socket

    where = address.split("://", 1)[-1]
    host, _, port = where.rpartition(":")
    if not host or not port.isdigit():
        raise ExternalClusterError(f"--ray-address {address!r}: expected HOST:PORT (the head's "
                                   "GCS address, 6379 by default) or ray://HOST:10001")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s).close()
    except OSError as exc:
        raise ExternalClusterError(_why_not_connected(address, exc)) from None
