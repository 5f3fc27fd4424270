"""The cluster's core in the driver process: nodes, the resource ledger, the event loop.

Design note. One `RLock` (with a Condition for placement waiters) guards nodes, workers and
the ledger; the event-loop thread takes it briefly, user threads take it for a call. Every
state change that could let a waiting placement through (a release, a node up) or make it
impossible (a node down) notifies the waiters, so `place` waits on events, not a clock.

Nodes are handled in `driver/node_ops.py`, workers in `driver/worker_ops.py` (both mixed in here); this module
holds the state they share, placements, the event-loop handlers and shutdown.
"""

from __future__ import annotations

import itertools
import os
import socket
import threading
import time
import warnings

from .. import _proc
from .._errors import NodeDownError, PlacementTimeout, SimclusterError
from .._history import History
from .._keys import write_key
from .._wire import CTRL, loads
from .factory_client import NodeFactory
from .loop import Loop
from .node_ops import NodeOps, NodeRec, PreloadCall
from .placement import describe_bundles, from_units
from .resources import ResourceBook
from .rpc import ClientSession
from .worker_ops import WorkerOps

HISTORY_FLUSH_S = 0.1


class Driver(NodeOps, WorkerOps):
    def __init__(self, *, host: str, history: History, preload: tuple[str, ...], grace_s: float,
                 provider):
        self.provider = provider
        self.secret = os.urandom(32)
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            self.listener.bind((host, 0))
            self.listener.listen(1024)
            self.address = f"{host}:{self.listener.getsockname()[1]}"
            self.key_path = write_key(self.address, self.secret)
        except BaseException:
            self.listener.close()
            raise
        self.history, self.preload, self.grace_s = history, preload, grace_s
        self.requested: tuple[str, ...] = ()  # `preload()` requests: imported where they can be
        self.lock = threading.RLock()
        self.cond = threading.Condition(self.lock)
        self.book = ResourceBook()
        self.nodes: dict[str, NodeRec] = {}
        self.starting: dict[str, NodeRec] = {}
        self.workers: dict = {}
        self.owners: dict[str, object] = {}       # placement id -> owner
        self.worker_clients: dict[str, list] = {}  # worker id -> clients opened inside it
        self._node_ids, self._worker_ids = itertools.count(), itertools.count()
        self._preload_ids = itertools.count()
        self.preloads: dict[int, PreloadCall] = {}  # preload calls waiting for nodes
        self.closed = False
        self.loop = Loop(self.listener, self.secret, on_auth=self._on_auth,
                         on_frame=self._on_frame, on_close=self._on_close)
        self.factory = NodeFactory(self.loop, {"address": self.address,
                                               "secret": self.secret.hex(),
                                               "driver_pid": os.getpid(),
                                               "preload": list(preload)}, self._factory_event)
        self.by_pid: dict[int, NodeRec] = {}
        self.plan_runs: list = []                 # running fault plans (`faults/runner.py`)
        self.cut_nodes: set[str] = set()          # nodes a plan's partition cut off
        self.loop.call_soon(self._flush_history)
        self.loop.start()
        history.record("cluster_start", address=self.address, wall=time.time(), pid=os.getpid())

    def _flush_history(self) -> None:
        """Batched message events reach the file within HISTORY_FLUSH_S (loop thread)."""
        self.history.flush()
        self.loop.call_later(HISTORY_FLUSH_S, self._flush_history)

    def _check_open(self, call: str | None = None) -> None:
        if self.closed:
            raise SimclusterError("the cluster is closed")
        if call and threading.current_thread() is self.loop:
            raise RuntimeError(
                f"{call}() was called from an on_message/on_worker_exit callback; it waits for "
                "the event loop that is running the callback. Hand the work to another thread "
                "(send, kill_worker and Placement.release are fine in a callback)")

    def up_ids(self) -> list[str]:
        return [i for i, r in self.nodes.items() if r.node.state != "down"]

    def node_rec(self, node) -> NodeRec:
        node_id = getattr(node, "id", node)
        rec = self.nodes.get(node_id)
        if rec is None:
            raise NodeDownError(f"node={node_id!r} is not a node of this cluster; "
                                f"nodes: {list(self.nodes)}")
        return rec

    # -- placements ----------------------------------------------------------------------
    def place(self, bundles, strategy: str, timeout_s: float | None, owner) -> dict:
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        with self.cond:
            while True:
                self._check_open("place")
                units = self.book.check(bundles, strategy)  # re-checked: nodes may have gone
                held = self.book.try_place(units, strategy)
                if held is not None:
                    break
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise PlacementTimeout(
                        f"place(bundles={describe_bundles(bundles)}, strategy={strategy!r}) found "
                        f"no free resources within timeout_s={timeout_s}; available now: "
                        f"{self.book.available()}; release placements or add nodes")
                self.cond.wait(remaining)
            self.owners[held.id] = owner
            info = {"id": held.id, "strategy": held.strategy,
                    "bundles": [{k: from_units(v) for k, v in b.items()} for b in held.bundles],
                    "node_ids": [a.node_id for a in held.assignments],
                    "gpu_ids": [a.device_ids("GPU") for a in held.assignments],
                    "tpu_ids": [a.device_ids("TPU") for a in held.assignments]}
            self.history.record("placement", placement=held.id, strategy=held.strategy,
                                bundles=info["bundles"], nodes=info["node_ids"])
        return info

    def release(self, placement_id: str) -> None:
        with self.cond:
            if self.book.release(placement_id):
                self.owners.pop(placement_id, None)
                self.history.record("placement_released", placement=placement_id)
                self.cond.notify_all()

    # -- event loop handlers -------------------------------------------------------------
    def _on_auth(self, conn) -> bool:
        if conn.role == "worker":
            return self._worker_authenticated(conn)
        if conn.role == "client":
            conn.data = ClientSession(self, conn, conn.ident.partition(" ")[2] or None)
            if conn.data.worker_id:
                with self.lock:
                    self.worker_clients.setdefault(conn.data.worker_id, []).append(conn.data)
            return True
        node_id, _, pid = conn.ident.partition(" ")
        with self.cond:
            rec = self.starting.pop(node_id, None)
            if rec is None or not pid.isdigit():
                return False
            rec.conn, conn.data = conn, rec
            # The node's own word: the factory's `pid` event may still be in its pipe.
            rec.pid = rec.node.pid = int(pid)
            self.nodes[rec.node.id] = rec
            rec.pids.add(rec.pid)
            self.book.add_node(rec.node.id, rec.node.spec.total_resources(), rec.node.index)
            self.history.record("node_up", node=rec.node.id, address=rec.node.address,
                                pid=rec.pid, resources=rec.node.spec.total_resources(),
                                labels=dict(rec.node.spec.labels))
            self.cond.notify_all()
            late = [m for m in self.requested if m not in rec.asked]
            rec.asked.update(late)
        if late:  # a preload request came while it was starting: unwaited, like a paused one
            self._tell_node(rec, {"op": "preload", "id": None, "modules": late})
        rec.up.set()
        rec.settled.set()
        return True

    def _on_frame(self, conn, kind: int, payload: bytes) -> None:
        if conn.role == "worker":
            self._worker_frame(conn.data, kind, payload)
        elif conn.role == "client":
            conn.data.on_frame(kind, payload)
        elif kind == CTRL:
            msg = loads(payload)
            if msg["op"] == "preloaded":
                self._preloaded(conn.data, msg)
            else:
                self._node_says(msg)

    def _on_close(self, conn) -> None:
        if conn.data is None:
            return
        if conn.role == "worker":
            conn.data.eof = True
            self._finalize(conn.data)
        elif conn.role == "client":
            conn.data.closed()
            if conn.data.worker_id:
                with self.lock:
                    clients = self.worker_clients.get(conn.data.worker_id, [])
                    if conn.data in clients:
                        clients.remove(conn.data)
                    if not clients:
                        self.worker_clients.pop(conn.data.worker_id, None)
        else:
            self._node_down(conn.data)

    # -- shutdown --------------------------------------------------------------------------
    def close(self) -> None:
        undelivered = None
        with self.cond:
            if self.closed:
                return
            self.closed = True
            self.cond.notify_all()
            for call in self.preloads.values():
                call.done.set()
            live = [r for r in self.nodes.values() if r.node.state != "down"]
            for rec in [*live, *self.starting.values()]:
                rec.down_reason = "shutdown"
            # Every node's tree at once: what its workers started dies with it.
            try:
                self.provider.kill({rec.node.id: rec.pid
                                    for rec in [*live, *self.starting.values()]})
            except SimclusterError as exc:  # the rest of the shutdown still runs
                undelivered = exc
        # close() may be called from a callback, i.e. on the loop thread: nothing to wait for
        # there (the loop delivers the exits after the callback returns), and no self-join.
        on_loop = threading.current_thread() is self.loop
        deadline = time.monotonic() + (0.0 if on_loop else 5.0)
        for rec in live:
            rec.gone.wait(max(0.0, deadline - time.monotonic()))
        self.loop.stop()
        if not on_loop:
            self.loop.join(5.0)
        self.factory.close()  # the loop has stopped (or this is it): no reader to race
        if not on_loop:
            _proc.wait_dead([p for rec in live for p in rec.pids],
                            max(0.0, deadline - time.monotonic()))
        self.history.record("cluster_stop")
        self.listener.close()
        if undelivered is not None:  # the provider's close() ends its nodes its own way
            warnings.warn(f"Cluster.close(): {undelivered}", RuntimeWarning, stacklevel=3)
        try:
            self.key_path.unlink()
        except FileNotFoundError:
            pass
        self.history.close()
