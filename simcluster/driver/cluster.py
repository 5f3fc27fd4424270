"""`Cluster`: a simulated multi-node cluster run by this process (see `api.py`)."""

from __future__ import annotations

import signal as _signal
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from .._history import History
from .._spec import Node, NodeSpec
from ..faults.plan import FaultPlan
from ..faults.runner import PlanRun
from ..frontend.endpoint import Endpoint, Placement, WorkerHandle
from ..frontend.start_args import (
    blob_for,
    bulk_starts,
    check_env,
    check_event,
    check_modules,
    check_tags,
    resolve_target,
)
from ..providers.base import Provider
from ..providers.registry import make_provider
from .driver import Driver


def _index(node: Node) -> int:
    return node.index


class Cluster(Endpoint):
    """Nodes (supervisor processes) on this machine, started now and stopped by `close()`
    (or the end of a `with` block). Every method is thread-safe.

    `preload`: modules the node factory imports once, so that every node and worker starts
    with them (e.g. a heavy framework). `grace_s`: default grace of `remove_node`.
    `history_path`: the history file (None: a new file in the per-user state folder,
    `$SIMCLUSTER_STATE_DIR/history` or `~/.local/state/simcluster/history`, kept after close;
    that folder is bounded, see `simcluster._state`).
    `provider`: "process", "netns", "docker" or a `Provider` (see `providers/base.py`).
    `faults`: a `FaultPlan` to run from the start: its event triggers see the first nodes come
    up, its time triggers count from when they are; `run_plan` starts one later."""

    def __init__(self, nodes: Iterable[NodeSpec] = (), *, provider: str | Provider = "process",
                 history_path: str | None = None, host: str = "127.0.0.1",
                 preload: Sequence[str] = (), start_timeout_s: float = 60.0,
                 grace_s: float = 5.0, faults: FaultPlan | None = None):
        super().__init__()
        self._provider = make_provider(provider)
        specs = list(nodes)
        self._plan_runs: list[PlanRun] = []
        if faults is not None:
            PlanRun.check(faults, self._provider)
        self._history = History(history_path)
        try:
            bind = self._provider.open(host)
            self._driver = Driver(host=bind, history=self._history, preload=tuple(preload),
                                  grace_s=grace_s, provider=self._provider)
        except BaseException:
            self._provider.close()
            self._history.close()
            raise
        # Runs at close() or, if the caller forgets, at garbage collection / interpreter exit.
        self._finalizer = weakref.finalize(self, _shutdown, self._driver, self._provider,
                                           self._plan_runs)
        try:
            if faults is not None:
                self._start_plan(faults)
            self._driver.start_nodes(specs, start_timeout_s)
            for run in self._plan_runs:
                run.start_clock()
        except BaseException:
            self.close()
            raise

    @property
    def provider(self) -> Provider:
        return self._provider

    def run_plan(self, plan: FaultPlan) -> PlanRun:
        """Start executing a fault plan now (its time triggers count from now, its event
        triggers see events from now on); returns its `PlanRun` (wait(), injected, skipped,
        stop()). Partition steps need provider='netns' (a ValueError here otherwise)."""
        if not isinstance(plan, FaultPlan):
            raise TypeError(f"run_plan(plan={plan!r}): expected a simcluster.FaultPlan")
        run = self._start_plan(plan)
        run.start_clock()
        return run

    def _start_plan(self, plan: FaultPlan) -> PlanRun:
        PlanRun.check(plan, self._provider)
        self._driver._check_open()
        run = PlanRun(self._driver, plan)
        self._plan_runs.append(run)
        run.start()
        return run

    @property
    def plan_runs(self) -> list[PlanRun]:
        """The fault plans started on this cluster (`faults=` first)."""
        return list(self._plan_runs)

    # -- nodes ---------------------------------------------------------------------------
    @property
    def history(self) -> History:
        """The append-only event history (see `simcluster._history` for the events)."""
        return self._history

    @property
    def address(self) -> str:
        """'host:port' that `simcluster.connect` (in any local process of this user) takes."""
        return self._driver.address

    @property
    def nodes(self) -> list[Node]:
        """Every node this cluster has had, in order, down ones included (see `Node.state`)."""
        with self._driver.lock:
            return sorted((rec.node for rec in self._driver.nodes.values()), key=_index)

    def node(self, node_id: str) -> Node:
        return self._driver.node_rec(node_id).node

    def add_node(self, spec: NodeSpec, *, timeout_s: float = 60.0) -> Node:
        return self._driver.start_nodes([spec], timeout_s)[0]

    def remove_node(self, node: Node | str, graceful: bool = True, *,
                    grace_s: float | None = None, timeout_s: float = 10.0) -> None:
        """Take a node away. graceful: its workers get SIGTERM, and SIGKILL after `grace_s`
        (default: the cluster's `grace_s`); otherwise everything is SIGKILLed at once."""
        self._driver.remove_node(node, graceful, grace_s, timeout_s)

    def kill_node(self, node: Node | str, *, timeout_s: float = 10.0) -> None:
        """Node loss: SIGKILL the supervisor and its workers at once; returns once the node is
        down and every one of its workers' exits has been delivered."""
        self._driver.kill_node(node, timeout_s)

    def pause_node(self, node: Node | str) -> None:
        """SIGSTOP the node's process group (the node and its workers freeze)."""
        self._driver.pause_node(node)

    def resume_node(self, node: Node | str) -> None:
        self._driver.resume_node(node)

    def preload(self, modules: Sequence[str], *, timeout_s: float = 60.0) -> dict:
        """Import `modules` in every node's supervisor now, and in the node factory, so
        that every worker started from now on begins with them imported (a worker otherwise
        imports what its function needs itself, once per worker). For a cluster started
        without `preload=`, by whoever connects to it: e.g. a training library asks for its
        runtime once. Waits for the nodes that are up; returns {node id: {module: error}}
        for nodes where an import failed or that did not answer within `timeout_s`, empty
        when every node has them. The imports run in single-threaded processes that fork:
        the same caveat as `preload=` (a module that starts threads at import relies on
        its own fork handling)."""
        return self._driver.preload_modules(check_modules(modules), timeout_s)

    def total_resources(self) -> dict[str, float]:
        with self._driver.lock:
            return self._driver.book.total()

    def available_resources(self) -> dict[str, float]:
        with self._driver.lock:
            return self._driver.book.available()

    # -- placements and workers ------------------------------------------------------------
    def place(self, bundles: Sequence[Mapping[str, float]], strategy: str = "PACK", *,
              timeout_s: float | None = 30.0) -> Placement:
        """Reserve one bundle of resources per entry (see api.py for the strategies)."""
        return Placement(self, self._driver.place(bundles, strategy, timeout_s, self))

    def start_worker(self, node_id: str | Node | None, fn: Callable, args: Sequence = (),
                     kwargs: Mapping[str, Any] | None = None, *,
                     env: Mapping[str, str] | None = None, bundle=None,
                     placement: Placement | None = None, name: str | None = None,
                     tags: Mapping[str, Any] | None = None,
                     timeout_s: float = 30.0) -> WorkerHandle:
        """Run `fn(*args, **kwargs)` in a new process on a node; returns once it runs."""
        node_id, bundle = resolve_target(node_id, bundle, placement)
        blob = blob_for(fn, args, kwargs or {})
        w = self._driver.start_worker(self, node_id, blob, check_env(env), bundle, name,
                                      timeout_s, check_tags(tags))
        return WorkerHandle(self, w.id, w.pid, w.node_id, w.name)

    def start_workers(self, fn: Callable, starts: Sequence[Mapping[str, Any]], *,
                      timeout_s: float = 30.0) -> list[WorkerHandle]:
        """Run `fn(*start["args"], **start["kwargs"])` for each start (the keyword arguments
        of `start_worker`: node_id, args, kwargs, env, bundle, placement, name, tags) in a
        new process, `fn` pickled once and each node asked once for all of its workers;
        returns once all of them run (all or nothing: see `api.py`)."""
        fn_blob, checked = bulk_starts(fn, starts)
        recs = self._driver.start_workers(self, fn_blob, checked, timeout_s)
        return [WorkerHandle(self, w.id, w.pid, w.node_id, w.name) for w in recs]

    def kill_worker(self, worker_id: str, signal: int = _signal.SIGKILL) -> None:
        self._driver.kill_worker(worker_id, int(signal))

    def record_event(self, name: str, **fields) -> None:
        """Add an event of your own to the history (a dotted name, e.g. "train.report");
        fault-plan triggers can fire on it like on any other event."""
        check_event(name, fields)
        self._driver.history.record(name, **fields)

    # -- lifecycle -------------------------------------------------------------------------
    def close(self) -> None:
        """Stop every node and worker (SIGKILL) and the event loop, any fault plan, and the
        provider's namespaces or containers; idempotent."""
        self._finalizer()

    @property
    def closed(self) -> bool:
        return not self._finalizer.alive

    def __repr__(self) -> str:
        return f"Cluster(address={self.address!r}, nodes={[n.id for n in self.nodes]})"

    # -- Endpoint transport ------------------------------------------------------------------
    def _send_payload(self, worker_id: str, payload: bytes) -> None:
        self._driver.send_to_worker(worker_id, payload)

    def _send_payloads(self, worker_ids: list[str], payload: bytes) -> None:
        self._driver.send_to_workers(worker_ids, payload)

    def _kill_worker(self, worker_id: str, sig: int) -> None:
        self._driver.kill_worker(worker_id, sig)

    def _release_placement(self, placement_id: str) -> None:
        self._driver.release(placement_id)


def _shutdown(driver: Driver, provider: Provider, plan_runs: list) -> None:
    for run in plan_runs:
        run.stop()
    try:
        driver.close()
    finally:
        provider.close()
