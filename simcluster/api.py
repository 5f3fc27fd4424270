"""simcluster's interface, in one place.

A simulated multi-node cluster on one machine. It knows nothing about training: it offers
nodes with logical resources, placement of resource bundles, running a Python callable in a
worker process on a node, a message channel per worker, node faults and a history.

Cluster (this process runs it)                 ClusterClient (`connect(address)`, elsewhere)
-------------------------------------------    ---------------------------------------------
Cluster(nodes=[NodeSpec, ...], *, provider="process", history_path=None, host="127.0.0.1",
        preload=(), start_timeout_s=60.0, grace_s=5.0)      connect(address, *, secret=None)
Both have (the `ClusterLike` protocol below):
    .address                 "host:port"; a worker sees it as SIMCLUSTER_ADDRESS
    .nodes -> list[Node]     every node so far, by index; Node: id ("node-<i>"), index,
                             address (127.0.0.<i+2>: one loopback address per node), spec,
                             state ("up" | "paused" | "down"), pid (its supervisor)
    .node(node_id), .add_node(spec, *, timeout_s=60) -> Node
    .remove_node(node, graceful=True, *, grace_s=None, timeout_s=10)
    .kill_node(node), .pause_node(node), .resume_node(node)
    .preload(modules, *, timeout_s=60) -> {node id: {module: error}}   every node (and the
                             factory, for nodes to come) imports them now, so workers started
                             after begin with them: `preload=` for a cluster already running
    .total_resources(), .available_resources() -> {"CPU": 4.0, "GPU": 2.0,
                             "accelerator_type:A100": 1.0, <custom>: ...}
    .place(bundles, strategy="PACK", *, timeout_s=30.0) -> Placement
    .start_worker(node_id, fn, args=(), kwargs=None, *, env=None, bundle=None,
                  placement=None, name=None, tags=None, timeout_s=30.0) -> WorkerHandle
    .start_workers(fn, starts, *, timeout_s=30.0) -> list[WorkerHandle]   many at once:
                             each start a dict of start_worker's keywords (node_id, args,
                             kwargs, env, bundle, placement, name, tags); see Workers
    .kill_worker(worker_id, signal=SIGKILL)
    .record_event(name, **fields)   an event of your own in the history ("train.report")
    .send(worker_id, obj), .channel(worker_id) -> Channel
    .send_many(worker_ids, obj)   the same message to each, pickled once, one request
    .on_message(callback(worker_id, obj)), .on_worker_exit(callback(WorkerExit))
    .history -> History, .close(), context manager

Nodes. A node is a supervisor process in its own process group, forked by a warm node
factory process (so `preload=` modules are imported once for all nodes); it forks one child
per worker. Forking is only safe in a single-threaded process: a preloaded module that
starts threads at import (pyarrow starts two) relies on its own fork handling. `kill_node`
SIGKILLs the node's process tree (node loss: every worker exits with reason "node_lost");
`remove_node(graceful=True)` SIGTERMs the workers and SIGKILLs them after `grace_s`;
`pause_node` / `resume_node` SIGSTOP / SIGCONT the group. Resources are logical: a node may
declare more CPUs or GPUs than the machine has. Processes a worker starts (subprocesses,
multiprocessing children, daemons in sessions of their own) end when the worker exits
(before its exit is reported), with its node, with the cluster, and when the driver dies.

Placement. `place` reserves one bundle per dict: PACK (one node if possible, else as few as
the search finds), SPREAD (least-used node first), STRICT_PACK (all on one node or fail),
STRICT_SPREAD (all on distinct nodes or fail). A request that could never fit on the current
nodes, even with everything free, raises `Unschedulable` at once, naming the request and the
nodes; one that only needs resources in use waits, woken by releases and new nodes, and
raises `PlacementTimeout` (an `Unschedulable` and a `TimeoutError`) after `timeout_s`.
`Placement`: id, strategy, bundles, node_ids, gpu_ids, tpu_ids (per bundle), release(),
`placement[i]` -> Bundle (pass as `start_worker(None, fn, bundle=placement[i])`, or
`bundle=i, placement=placement`). Requests above one GPU/TPU must be whole devices; a
fraction below one shares a device. Bundles consume resources, workers do not.

Workers. `start_worker` cloudpickles `fn(*args, **kwargs)` (closures included), returns when
the process runs. The worker's environment is the node's (the driver's environment plus
`NodeSpec.env`) + the visible devices of its bundle (CUDA_VISIBLE_DEVICES, ROCm:
HIP_VISIBLE_DEVICES, TPU: TPU_VISIBLE_CHIPS, TPU_CHIPS_PER_HOST_BOUNDS, TPU_HOST_BOUNDS;
empty on an accelerator node without a bundle) + SIMCLUSTER_NODE_ID, SIMCLUSTER_NODE_ADDRESS,
SIMCLUSTER_ADDRESS, SIMCLUSTER_WORKER_ID + the caller's `env`. Its sys.path and working
directory are the driver's. `WorkerHandle`: id, pid, node_id, name, kill(signal=SIGKILL),
wait(timeout=None) -> WorkerExit, exit (None while running), channel().
`start_workers` pickles `fn` once and asks each node once for all of its workers, which it
forks in one round (a group of 256 costs 64 node commands instead of 256 calls); it returns
when all run, or kills those that started and raises `WorkerStartError` for the first that
could not (all or nothing).
`WorkerExit`: worker_id, node_id, name, pid, code | signal, result (fn's return value),
error (its exception, or `RemoteError` if that could not be pickled), traceback (text),
reason ("exited" | "node_lost" | "shutdown"; clients also "disconnected"), ok.
`on_worker_exit` callbacks run on the cluster's event-loop thread as soon as the exit is
known (no polling interval: the supervisor watches a pidfd per worker).

Tags and events of your own. `start_worker(tags={"rank": 1})` labels a worker with str keys
and scalar values: they are in its `worker_start` event, and fault plans select workers by
them ("worker": "rank=1"). `record_event("train.report", report=3)` appends an event with a
dotted name (simcluster's own have none) to the history, where plan triggers see it. This is
how a layer above (the reference's trainers) makes its own vocabulary (ranks, attempts,
reports) usable in fault plans and pictures without simcluster knowing what it means.

Messages. One persistent, authenticated socket per worker, length-prefixed frames.
Driver side: `send(worker_id, obj)`; incoming messages go (1) to the worker's channel if
`channel(worker_id)` was opened, else (2) to the `on_message` callbacks, else (3) wait in
the channel until opened. `Channel.recv(timeout=None)` raises TimeoutError, and
`ChannelClosed` once the worker exited and its messages were read. Worker side
(`simcluster.worker`): `current()` -> WorkerInfo(worker_id, name, node_id, node_address,
cluster_address, pid, supervisor_pid); `channel()` -> send(obj), recv(timeout=None).
Callbacks must return quickly: they run on the thread that delivers every message.

Security. The driver binds loopback (or `host`). Every peer (node, worker, client) proves
it knows the per-cluster secret with an HMAC challenge-response before anything is
unpickled; garbage, wrong keys, truncated and oversized frames close that connection only.
The secret lives in a 0600 file named after the address in the user's own 0700 folder in the
temp directory, which is how `connect(address)` finds it (pass `secret=` otherwise); a
folder or key file another user could have planted or read is refused (PermissionError).

History. `cluster.history` is an append-only JSON-lines file (`History.read(path)`), events
listed in `simcluster._history`; at `history_path`, else in the per-user state folder
($SIMCLUSTER_STATE_DIR/history or ~/.local/state/simcluster/history, kept within limits:
`simcluster._state`); `simcluster.checkers` turns it into verdicts
(valid / invalid / unknown).

Cleanup. Nothing outlives the cluster: the node factory, supervisors and workers all have
PR_SET_PDEATHSIG towards their parent, supervisors (and workers without a cgroup of their
own) are child subreapers (what a worker starts stays in the node's tree, even after
`setsid`; where cgroup v2 can be written each worker has its own cgroup, ended with
`cgroup.kill`, and the supervisor reaps orphans as they die), a supervisor that loses its driver
kills its whole tree, and close() kills every node's tree and returns once the nodes and
workers are dead. Works after the driver is SIGKILLed too.

Fault plans. `FaultPlan(steps=[(Trigger, Action), ...], seed=0)` is data (`to_json` /
`from_json` round-trip). `Cluster(..., faults=plan)` runs it from the start (event triggers
see the first nodes come up, time triggers count from when they are up);
`cluster.run_plan(plan) -> PlanRun` (wait(timeout), injected, skipped, stop()) from now.
Triggers: `Trigger.after(s)`, `Trigger.on(event, nth=1, per_worker=False, **match)`,
`Trigger.message(worker_glob, nth)`, `Trigger.node_up(node)`, `Trigger.worker_exit(worker,
signal="*")`. Actions (`action(kind, **params)`, kinds in `ACTIONS`): kill_worker,
raise_in_worker (raised at the worker's next channel call, `check_faults()` or
`before_upload()`), kill_node, pause_node (seconds: resume after), resume_node, remove_node,
add_node, preempt_node (workers see `simcluster.worker.preemption()` -> deadline; the node
is killed with reason "preempted" at the deadline), fail_upload / slow_upload (the next
`simcluster.worker.before_upload(path)` of a matching worker raises / sleeps: a runtime
must call it before each checkpoint upload), partition / heal (netns only; elsewhere a
ValueError when the plan starts). Every injected fault is a `fault` event with its `step`.
`simcluster.strategies.fault_plans(...)` draws plans with Hypothesis.

Providers. `provider="process"` (default), "netns" (a network namespace and 10.213.k.i
address per node, the driver on the bridge; needs root and iproute2; partitions), "docker"
(a container per node; needs a Docker engine, else SimclusterError), or a `Provider`
instance (`RecordingProvider` records partitions instead of enforcing them).

CLI. `simcluster run --nodes 2x4cpu,1x2gpu --faults plan.json script.py [args]` (also
`python -m simcluster`): SIMCLUSTER_ADDRESS is set for the script, the exit code is the
script's; `simcluster history FILE` prints a timeline.

Threads. Every method is thread-safe. Callbacks run on the delivery thread, so methods that
wait for it (start_worker, place, add/remove/kill/pause/resume_node) raise RuntimeError
there; send, kill_worker and Placement.release are fine.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from ._history import History
from ._spec import Node, NodeSpec
from .frontend.endpoint import Channel, Placement, WorkerExit, WorkerHandle


@runtime_checkable
class ClusterLike(Protocol):
    """What `Cluster` and `ClusterClient` both offer; code on top should need no more."""

    address: str

    @property
    def nodes(self) -> list[Node]: ...
    @property
    def history(self) -> History: ...
    def node(self, node_id: str) -> Node: ...
    def add_node(self, spec: NodeSpec, *, timeout_s: float = ...) -> Node: ...
    def remove_node(self, node: Node | str, graceful: bool = ..., *,
                    grace_s: float | None = ..., timeout_s: float = ...) -> None: ...
    def kill_node(self, node: Node | str, *, timeout_s: float = ...) -> None: ...
    def pause_node(self, node: Node | str) -> None: ...
    def resume_node(self, node: Node | str) -> None: ...
    def preload(self, modules: Sequence[str], *, timeout_s: float = ...) -> dict: ...
    def total_resources(self) -> dict[str, float]: ...
    def available_resources(self) -> dict[str, float]: ...
    def place(self, bundles: Sequence[Mapping[str, float]], strategy: str = ..., *,
              timeout_s: float | None = ...) -> Placement: ...
    def start_worker(self, node_id: str | Node | None, fn: Callable, args: Sequence = ...,
                     kwargs: Mapping[str, Any] | None = ..., *, env: Mapping[str, str] | None = ...,
                     bundle: Any = ..., placement: Placement | None = ..., name: str | None = ...,
                     tags: Mapping[str, Any] | None = ...,
                     timeout_s: float = ...) -> WorkerHandle: ...
    def start_workers(self, fn: Callable, starts: Sequence[Mapping[str, Any]], *,
                      timeout_s: float = ...) -> list[WorkerHandle]: ...
    def kill_worker(self, worker_id: str, signal: int = ...) -> None: ...
    def record_event(self, name: str, **fields: Any) -> None: ...
    def send(self, worker_id: str, obj: object) -> None: ...
    def send_many(self, worker_ids: Sequence[str], obj: object) -> None: ...
    def channel(self, worker_id: str) -> Channel: ...
    def on_message(self, callback: Callable[[str, Any], Any]) -> Callable: ...
    def on_worker_exit(self, callback: Callable[[WorkerExit], Any]) -> Callable: ...
    def close(self) -> None: ...


__all__ = ["ClusterLike"]
