"""Nodes in the driver: starting them through the factory, faults, and going down.

Node lifecycle: `start_nodes` asks the node factory (`driver/factory_client.py`, from the loop thread)
for a supervisor per node and waits, on an event, until each has authenticated ("up") or
failed (the factory reports its exit). "down" comes from one place only, the node's
connection closing, whatever the cause (kill, graceful removal, a crash, shutdown); the
cause is noted beforehand in `down_reason`. A node is `gone` once it is down, all its
workers' exits are final and its processes are dead.
"""

from __future__ import annotations

import os
import signal
import threading
import time

from .. import _proc
from .._errors import NodeDownError, SimclusterError
from .._spec import Node, NodeSpec


class NodeRec:
    def __init__(self, node: Node):
        self.node = node
        self.pid: int | None = None          # the supervisor's, also its process group's
        self.exit: tuple | None = None       # (code, signal) if it died before coming up
        self.settled = threading.Event()     # up, or failed to come up
        self.conn = None
        self.workers: set[str] = set()
        self.up = threading.Event()
        self.gone = threading.Event()
        self.down_reason: str | None = None
        self.spawn_error: str | None = None
        # Held from sending a start to hearing `started`, and by pause: a worker is never
        # frozen before it has armed its parent-death signal (see node.supervisor._start).
        self.start_lock = threading.Lock()
        self.pids: set[int] = set()   # every process of the node, for the final death check
        self.asked: set[str] = set()  # modules its boot imported (at spawn) or it was asked for
        self.preload_errors: dict[str, str] = {}  # module -> why its import failed here


class PreloadCall:
    """One `preload` request: the nodes still to answer."""

    def __init__(self, nodes: set[str]):
        self.left = set(nodes)
        self.done = threading.Event()
        if not self.left:
            self.done.set()

    def settle(self, node_id: str) -> None:
        self.left.discard(node_id)
        if not self.left:
            self.done.set()


class NodeOps:
    """Mixed into `Driver`; uses its lock, factory, loop, book and history."""

    def start_nodes(self, specs: list[NodeSpec], timeout_s: float) -> list[Node]:
        recs = []
        with self.lock:
            self._check_open("add_node")
            for spec in specs:
                if not isinstance(spec, NodeSpec):
                    raise TypeError(f"nodes: expected NodeSpec objects, got {spec!r}")
                index = next(self._node_ids)
                rec = NodeRec(Node(f"node-{index}", index, self.provider.node_address(index),
                                   spec))
                recs.append(rec)
        fields = [self.provider.prepare(rec.node) for rec in recs]  # may block, may raise
        with self.lock:
            for rec in recs:
                self.starting[rec.node.id] = rec
        for rec, extra in zip(recs, fields, strict=True):
            self.loop.call_soon(self._spawn, rec, extra)
        deadline = time.monotonic() + timeout_s
        for rec in recs:
            self._await_up(rec, deadline)
        return [rec.node for rec in recs]

    def _spawn(self, rec: NodeRec, extra: dict) -> None:
        """Loop thread only (the factory's parent-death signal is tied to this thread)."""
        if self.closed:
            rec.spawn_error = "the cluster closed"
            rec.settled.set()
            return
        rec.asked = {*self.preload, *self.requested}
        self.provider.spawn(rec.node, {"node_id": rec.node.id, "node_address": rec.node.address,
                                       "address": self.address, "preload": list(self.preload),
                                       "requested": list(self.requested),
                                       "env": {**os.environ, **rec.node.spec.env}, **extra},
                            self.factory, lambda msg: self.loop.call_soon(self._factory_event, msg))

    def _factory_event(self, msg: dict) -> None:
        if "factory_gone" in msg:
            for rec in list(self.starting.values()):
                rec.spawn_error = "the node factory died (see its stderr)"
                rec.settled.set()
        elif "node_id" in msg:
            rec = self.starting.get(msg["node_id"])
            if rec is not None and "error" in msg:
                rec.spawn_error = msg["error"]
                rec.settled.set()
            elif rec is not None:
                rec.pid = msg["pid"]
                self.by_pid[rec.pid] = rec
        else:
            rec = self.by_pid.pop(msg["pid"], None)
            if rec is not None:
                rec.exit = (msg["code"], msg["signal"])
                rec.settled.set()

    def preload_modules(self, modules: list[str], timeout_s: float) -> dict[str, dict[str, str]]:
        """Every node imports `modules` in its supervisor, so that the workers it forks from
        now on start with them; nodes started later get them from the factory (or at boot).
        A node is asked for a module once: asking again costs nothing. Waits for the nodes
        that are up (a paused node imports when resumed, unwaited); returns {node id:
        {module: error}} for the nodes where an import of `modules` failed or that did not
        answer within `timeout_s` ({"*": ...}); empty when every node has them."""
        with self.lock:
            self._check_open("preload")
            new = [m for m in modules if m not in self.requested and m not in self.preload]
            self.requested = (*self.requested, *new)
            live = {i: r for i, r in self.nodes.items() if r.node.state != "down"}
            todo = {i: [m for m in modules if m not in r.asked] for i, r in live.items()}
            todo = {i: ms for i, ms in todo.items() if ms}
            call_id = next(self._preload_ids)
            call = self.preloads[call_id] = PreloadCall(
                {i for i in todo if live[i].node.state == "up"})
            for node_id, missing in todo.items():
                live[node_id].asked.update(missing)
            if todo:
                self.history.record("preload", modules=list(modules), nodes=sorted(todo))
        if new:
            self.loop.call_soon(self.factory.preload, new)
        for node_id, missing in todo.items():
            self._tell_node(live[node_id], {"op": "preload", "id": call_id, "modules": missing})
        finished = call.done.wait(timeout_s)
        with self.lock:
            self.preloads.pop(call_id, None)
            errors = {i: {m: e for m, e in r.preload_errors.items() if m in modules}
                      for i, r in live.items()}
            if not finished:
                for node_id in call.left:
                    errors[node_id] = {"*": f"no answer within timeout_s={timeout_s}"}
        return {i: e for i, e in errors.items() if e}

    def _preloaded(self, rec: NodeRec, msg: dict) -> None:
        """Loop thread: a node's answer to a preload request."""
        with self.lock:
            rec.preload_errors.update(msg["errors"])
            call = self.preloads.get(msg["id"])
            if call is not None:
                call.settle(rec.node.id)

    def _await_up(self, rec: NodeRec, deadline: float) -> None:
        rec.settled.wait(max(0.0, deadline - time.monotonic()))
        with self.lock:
            if self.starting.pop(rec.node.id, None) is None:
                return  # it came up (authenticated) in time
        _proc.killpg(rec.pid, signal.SIGKILL)
        why = rec.spawn_error or (f"its supervisor exited (code, signal) = {rec.exit}; see "
                                  "its stderr" if rec.exit else "it did not connect in time")
        raise SimclusterError(f"node {rec.node.id} ({rec.node.spec}) did not come up: {why}")

    def kill_node(self, node, timeout_s: float = 10.0, *, reason: str = "killed",
                  cause: dict | None = None) -> None:
        """`cause`: a fault plan's fields for the `fault` event (step, trigger)."""
        rec = self.node_rec(node)
        self._check_open("kill_node")
        if self.start_kill(rec, reason, cause):
            self._await_gone(rec, timeout_s)

    def start_kill(self, rec: NodeRec, reason: str = "killed", cause: dict | None = None,
                   action: str | None = "kill_node") -> bool:
        """SIGKILL a node without waiting (safe on the event-loop thread); False if down.
        `action`: the `fault` event to record (None: none, e.g. a preemption's deadline)."""
        with self.lock:
            if rec.node.state == "down":
                return False
            # A kill that cannot be delivered raises here, before the history says it happened.
            self.provider.check_kill({rec.node.id: rec.pid})
            rec.down_reason = reason
            if action:
                self.history.record("fault", action=action, node=rec.node.id, **(cause or {}))
            self.provider.kill({rec.node.id: rec.pid})
        return True

    def remove_node(self, node, graceful: bool, grace_s: float | None, timeout_s: float) -> None:
        rec = self.node_rec(node)
        self._check_open("remove_node")
        with self.lock:
            if rec.node.state == "down":
                return
            rec.down_reason = "removed"
            if not graceful:
                self.provider.kill({rec.node.id: rec.pid})
        if graceful:
            grace = self.grace_s if grace_s is None else grace_s
            self.resume_node(rec.node)
            self._tell_node(rec, {"op": "stop", "grace_s": grace})
            if rec.gone.wait(grace + timeout_s):
                return
            self.provider.kill({rec.node.id: rec.pid})
        self._await_gone(rec, timeout_s)

    def _await_gone(self, rec: NodeRec, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        if not rec.gone.wait(timeout_s) or not _proc.wait_dead(
                list(rec.pids), max(0.0, deadline - time.monotonic())):
            raise TimeoutError(f"node {rec.node.id} is not down after {timeout_s} s")

    def pause_node(self, node, paused: bool = True, *, cause: dict | None = None) -> bool:
        """Pause (or resume) a node; False when it already was in that state."""
        rec = self.node_rec(node)
        self._check_open("pause_node" if paused else "resume_node")
        if paused:
            with rec.start_lock:
                return self._pause(rec, True, cause)
        return self._pause(rec, False, cause)

    def _pause(self, rec: NodeRec, paused: bool, cause: dict | None) -> bool:
        with self.lock:
            if rec.node.state == "down":
                raise NodeDownError(f"node {rec.node.id} is down")
            if (rec.node.state == "paused") == paused:
                return False
            action = "pause_node" if paused else "resume_node"
            self.history.record("fault", action=action, node=rec.node.id, **(cause or {}))
            pids = [rec.pid] + [self.workers[w].pid for w in rec.workers
                                if w in self.workers and self.workers[w].pid]
        self.provider.pause(rec.node, pids, paused)  # it may wait: not under the lock
        with self.lock:
            if rec.node.state != "down":
                rec.node.state = "paused" if paused else "up"
                self.history.record("node_paused" if paused else "node_resumed", node=rec.node.id)
        return True

    def resume_node(self, node) -> None:
        self.pause_node(node, paused=False)

    # -- event-loop side -----------------------------------------------------------------
    def _node_down(self, rec: NodeRec) -> None:
        with self.cond:
            if rec.node.state == "down":
                return
            reason = rec.down_reason or "lost"
            rec.node.state = "down"
            self.book.remove_node(rec.node.id)
            self.history.record("node_down", node=rec.node.id, reason=reason)
            self.cond.notify_all()
            for call in self.preloads.values():
                call.settle(rec.node.id)  # nothing to wait for: a node that comes back is new
            pending = list(rec.workers)
            if not pending:
                rec.gone.set()
        self._lose_workers(pending, reason, rec.node.id)
