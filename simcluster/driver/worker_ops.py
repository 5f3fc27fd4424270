"""Worker records in the driver: start, messages, signals, and the join that makes an exit.

Design note. Two sockets speak for a worker: its node's (which says `started` with the pid,
and `exited` with the wait status) and its own (messages, then one RESULT frame carrying
the outcome, then EOF when the process is gone). The exit is final when both have spoken:
the status is known AND the worker's socket reached EOF, so the outcome (written before the
process exited) has been read. The driver waits `FORCE_AFTER_S` for that EOF: a process the
worker forked may keep the socket open, so it may never come. Then it drains the socket before
closing it, because what the worker wrote may still sit in the kernel's buffers (megabytes,
behind a loop that a callback slowed): frames are dispatched as usual until the socket has
been quiet for `DRAIN_STEP_S`; one that keeps delivering (a live process writes to it) is
closed `DRAIN_MAX_S` after the drain began. A frame still incomplete then, or at EOF, can
never be completed: it is dropped, and the exit's history event says so (`dropped`: the
bytes held, and why).

Ordering hazards. `worker_start` is recorded at the first of (`started`, the worker's socket
authenticating), so in the history it precedes every message and the exit. A node that goes
down first turns its unfinished workers into `node_lost` exits (signal SIGKILL). Owners are
called outside the lock, in the event-loop thread.
"""

from __future__ import annotations

import os
import signal
import threading
import time

from .._errors import ChannelClosed, NodeDownError, WorkerStartError
from .._wire import CTRL, FAULT, MSG, UPLOAD, dumps, loads, message_type
from ..frontend.endpoint import Bundle
from .accelerators import visible_devices_env

FORCE_AFTER_S = 0.5   # how long an exited worker's socket may stay open before it is drained
DRAIN_STEP_S = 0.05   # a drain reads at most this long at a time; this quiet, it is done
DRAIN_MAX_S = 1.0     # a socket that keeps delivering is closed this long after the drain began


class WorkerRec:
    def __init__(self, worker_id: str, node_id: str, name: str, owner):
        self.id, self.node_id, self.name, self.owner = worker_id, node_id, name, owner
        self.tags: dict = {}
        self.pid: int | None = None
        self.conn = None
        self.pending: list[tuple] = []         # (kind, payload) sent before its socket connected
        self.started = threading.Event()
        self.start_error: str | None = None
        self.announced = False
        self.status: tuple[int | None, int | None] | None = None
        self.reason = "exited"
        self.result: bytes | None = None
        self.eof = False
        self.final = False
        self.forcing = False
        self.drain_until: float | None = None


class WorkerOps:
    """Mixed into `Driver`; uses its lock, nodes, history, loop and address."""

    def start_worker(self, owner, node_id: str, blob: bytes, env: dict[str, str],
                     bundle: Bundle | None, name: str | None, timeout_s: float,
                     tags: dict | None = None) -> WorkerRec:
        return self.start_workers(owner, None, [(node_id, blob, env, bundle, name, tags)],
                                  timeout_s)[0]

    def start_workers(self, owner, fn: bytes | None, starts: list[tuple],
                      timeout_s: float) -> list[WorkerRec]:
        """Start workers, one command per node for all of its workers; returns once every
        one runs. `starts`: (node id, blob, env, bundle, name, tags) each; with `fn` (a
        pickled callable shared by all), a blob is the pickled (args, kwargs) of one call,
        else the whole call. All or nothing: should one fail, the others are killed (their
        exits reported as usual) and WorkerStartError names the first failure."""
        with self.lock:
            self._check_open("start_worker")
            made: list[tuple] = []
            try:
                for start in starts:
                    made.append(self._new_worker(owner, *start))
            except BaseException:
                for w, _ in made:  # none of them was asked for yet
                    self._forget(w)
                raise
        by_node: dict[str, list] = {}
        for w, command in made:
            by_node.setdefault(w.node_id, []).append((w, command))
        recs = {nid: self.nodes[nid] for nid in sorted(by_node)}
        deadline = time.monotonic() + timeout_s
        # Held from the start command to `started` (see NodeRec.start_lock); in one order
        # (sorted node ids), so that two bulk starts never wait for each other's lock.
        for rec in recs.values():
            rec.start_lock.acquire()
        try:
            for nid, rec in recs.items():
                if fn is None and len(by_node[nid]) == 1:
                    command = by_node[nid][0][1]
                else:
                    command = {"op": "start_many", "fn": fn,
                               "workers": [c for _, c in by_node[nid]]}
                try:
                    rec.conn.send(CTRL, dumps(command))
                except ChannelClosed:
                    pass  # the node is going down; its down handler fails these starts
            late = [w for w, _ in made
                    if not w.started.wait(max(0.0, deadline - time.monotonic()))]
        finally:
            for rec in recs.values():
                rec.start_lock.release()
        failed = [w for w, _ in made if w.start_error]
        if late or failed:
            # Cancel: should a node start one later (a paused node resumed), the kill follows
            # the start on the same socket, and its start and exit are recorded as usual.
            for w, _ in made:
                if not w.start_error:
                    self._tell_node(self.nodes[w.node_id], {"op": "kill", "worker": w.id,
                                                             "signal": signal.SIGKILL})
            if late:
                w = late[0]
                paused = self.nodes[w.node_id].node.state == "paused"
                raise WorkerStartError(f"node {w.node_id} did not start worker {w.id} within "
                                       f"{timeout_s} s" + (" (the node is paused)" if paused
                                                           else ""))
            w = failed[0]
            raise WorkerStartError(f"node {w.node_id} could not start worker {w.id}: "
                                   f"{w.start_error}")
        return [w for w, _ in made]

    def _new_worker(self, owner, node_id: str, blob: bytes, env: dict[str, str],
                    bundle: Bundle | None, name: str | None, tags: dict | None):
        """A worker's record and its node's start command (lock held)."""
        rec = self.nodes.get(node_id)
        if rec is None or rec.node.state == "down":
            raise NodeDownError(f"start_worker(node_id={node_id!r}): the node is "
                                f"{'down' if rec else 'unknown'}; nodes up: {self.up_ids()}")
        spec = rec.node.spec
        device_ids: list[int] = []
        if bundle is not None:
            if not self.book.holds(bundle.placement_id):
                raise ValueError(f"start_worker(bundle={bundle!r}): placement "
                                 f"{bundle.placement_id} was released")
            device_ids = bundle.tpu_ids if spec.device_resource == "TPU" else bundle.gpu_ids
        wid = f"worker-{next(self._worker_ids)}"
        full_env = {**visible_devices_env(spec, device_ids),
                    "SIMCLUSTER_NODE_ID": node_id,
                    "SIMCLUSTER_NODE_ADDRESS": rec.node.address,
                    "SIMCLUSTER_ADDRESS": self.address,
                    "SIMCLUSTER_WORKER_ID": wid, **env}
        w = WorkerRec(wid, node_id, name or wid, owner)
        w.tags = dict(tags or {})
        self.workers[wid] = w
        rec.workers.add(wid)
        return w, {"op": "start", "worker": wid, "name": w.name, "env": full_env, "blob": blob}

    def _deliver(self, worker_id: str, kind: int, payload: bytes) -> None:
        """Send a frame to a worker now, or queue it until the worker has connected."""
        with self.lock:
            w = self.workers.get(worker_id)
            if w is None or w.final:
                raise ChannelClosed(f"worker {worker_id} has exited (or never existed)")
            conn = w.conn
            if conn is None:
                w.pending.append((kind, payload))
        if conn is not None:
            conn.send(kind, payload)

    def send_to_worker(self, worker_id: str, payload: bytes) -> None:
        self._deliver(worker_id, MSG, payload)
        self.history.record_message(worker_id, "to_worker", message_type(payload), len(payload))

    def send_to_workers(self, worker_ids: list[str], payload: bytes) -> None:
        """`send_to_worker` for each; one that is gone is skipped (its exit tells)."""
        for worker_id in worker_ids:
            try:
                self.send_to_worker(worker_id, payload)
            except ChannelClosed:
                pass

    def send_fault(self, worker_id: str, msg: tuple) -> None:
        """A fault plan's FAULT frame to a worker (see `node/worker_channel.py`); not a message."""
        self._deliver(worker_id, FAULT, dumps(msg))

    def kill_worker(self, worker_id: str, sig: int) -> None:
        with self.lock:
            w = self.workers.get(worker_id)
            if w is None or w.status is not None:
                return
            self.history.record("worker_signal", worker=worker_id, node=w.node_id, signal=sig)
            pid, rec = w.pid, self.nodes[w.node_id]
        if pid is None:
            self._tell_node(rec, {"op": "kill", "worker": worker_id, "signal": sig})
            return
        try:
            os.kill(pid, sig)  # directly: works on a paused node too, as a real kill would
        except ProcessLookupError:
            pass

    def _tell_node(self, rec, msg: dict) -> None:
        try:
            rec.conn.send(CTRL, dumps(msg))
        except (ChannelClosed, AttributeError):
            pass

    # -- event-loop side -----------------------------------------------------------------
    def _worker_authenticated(self, conn) -> bool:
        worker_id, _, pid = conn.ident.partition(" ")
        with self.lock:
            w = self.workers.get(worker_id)
            if w is None or w.conn is not None or w.final or not pid.isdigit():
                return False
            w.conn, conn.data = conn, w
            self._announce(w, int(pid))
            for kind, payload in w.pending:
                conn.send(kind, payload)
            w.pending.clear()
        return True

    def _worker_frame(self, w: WorkerRec, kind: int, payload: bytes) -> None:
        if kind == MSG:
            self.history.record_message(w.id, "from_worker", message_type(payload), len(payload))
            w.owner._on_message(w.id, payload)
        elif kind == UPLOAD:
            self._upload_request(w, *loads(payload))
        else:
            w.result = payload

    def _upload_request(self, w: WorkerRec, request: int, path: str) -> None:
        """`before_upload` in a worker: the first running plan with an armed upload fault
        for it decides; the reply is the verdict (None: go ahead)."""
        verdict, step = None, None
        for plan_run in list(self.plan_runs):
            found = plan_run.upload_verdict(w.id, w.name, path)
            if found is not None:
                (verdict, step) = found
                break
        self.history.record("upload", worker=w.id, node=w.node_id, path=path, fault=step)
        try:
            w.conn.send(FAULT, dumps(("upload", request, verdict)))
        except ChannelClosed:
            pass

    def _node_says(self, msg: dict) -> None:
        op = msg["op"]
        if op == "started_many":
            for worker, pid in msg["started"]:
                self._node_says({"op": "started", "worker": worker, "pid": pid})
            for worker, error in msg["failed"]:
                self._node_says({"op": "start_failed", "worker": worker, "error": error})
            return
        w = self.workers.get(msg.get("worker"))
        if w is None:
            return
        if op == "started":
            with self.lock:
                self._announce(w, msg["pid"])
            w.started.set()
        elif op == "start_failed":
            w.start_error = msg["error"]
            self._forget(w)
            w.started.set()
        elif op == "exited":
            w.status = (msg["code"], msg["signal"])
            self._finalize(w)

    def _announce(self, w: WorkerRec, pid: int) -> None:
        if not w.announced:
            w.announced, w.pid = True, pid
            self.nodes[w.node_id].pids.add(pid)
            extra = {"tags": w.tags} if w.tags else {}
            self.history.record("worker_start", worker=w.id, node=w.node_id, name=w.name,
                                pid=pid, **extra)

    def _lose_workers(self, worker_ids, reason: str, node_id: str) -> None:
        """The node went down: finish its workers (status unknown: SIGKILL)."""
        for worker_id in worker_ids:
            w = self.workers.get(worker_id)
            if w is None:
                continue
            if not w.announced:
                w.start_error = f"node {node_id} went down"
                self._forget(w)
                w.started.set()
                continue
            if w.status is None:
                w.status = (None, signal.SIGKILL)
                w.reason = reason if reason in ("shutdown", "preempted") else "node_lost"
            self._finalize(w)

    def _finalize(self, w: WorkerRec, force: bool = False) -> None:
        if w.final or w.status is None:
            return
        still = False
        if w.conn is not None and not w.eof:
            if not force:
                if not w.forcing:
                    w.forcing = True
                    self.loop.call_later(FORCE_AFTER_S, self._finalize, w, True)
                return
            still = self._drain(w)
            if still is None:
                return
        dropped = _dropped(w, still)
        with self.lock:
            w.final = True
            code, sig = w.status
            info = dict(worker_id=w.id, node_id=w.node_id, name=w.name, pid=w.pid,
                        code=code, signal=sig, reason=w.reason)
            self.history.record("worker_exit", worker=w.id, node=w.node_id, pid=w.pid,
                                code=code, signal=sig, reason=w.reason,
                                outcome=message_type(w.result) if w.result else None, **dropped)
            if w.reason == "exited":  # reaped by its supervisor: the pid may be reused now
                self.nodes[w.node_id].pids.discard(w.pid)
            self._forget(w)
        with self.lock:
            clients = self.worker_clients.pop(w.id, [])
        for client in clients:  # what the worker's own clients hold goes with it
            client.closed()
        w.owner._on_exit(w.id, info, w.result)
        if w.conn is not None and not w.conn.closed:
            self.loop.close(w.conn)

    def _drain(self, w: WorkerRec) -> bool | None:
        """The exited worker's socket stayed open: read what it holds. None while not done
        (a later call goes on; also once EOF came meanwhile, which finished the worker),
        False once the socket is quiet, True if it still delivers at `drain_until`."""
        conn, now = w.conn, time.monotonic()
        if w.drain_until is None:
            w.drain_until = now + DRAIN_MAX_S
        emptied = self.loop.drain(conn, min(w.drain_until, now + DRAIN_STEP_S))
        if w.final:
            return None
        now = time.monotonic()
        quiet_s = now - conn.last_read if emptied else 0.0
        if quiet_s >= DRAIN_STEP_S:
            return False
        if now >= w.drain_until:
            return True
        self.loop.call_later(DRAIN_STEP_S - quiet_s, self._finalize, w, True)
        return None

    def _forget(self, w: WorkerRec) -> None:
        with self.lock:
            self.workers.pop(w.id, None)
            rec = self.nodes.get(w.node_id)
            if rec is not None:
                rec.workers.discard(w.id)
                if rec.node.state == "down" and not rec.workers:
                    rec.gone.set()


def _dropped(w: WorkerRec, still: bool) -> dict:
    """The `dropped` field of a worker's exit event, when the driver had to leave data."""
    held = w.conn.reader.pending if w.conn is not None else 0
    if still:
        why = (f"its socket still delivered {DRAIN_MAX_S} s after the drain began (a process "
               "that outlived the worker writes to it); closed")
    elif held:
        why = "an incomplete frame: " + ("the socket ended inside it" if w.eof else
                                         "its writer exited mid-frame and nothing more came")
    else:
        return {}
    return {"dropped": {"bytes": held, "why": why}}
