"""The driver's side of a connected client (`simcluster.connect`): calls, and forwarding.

Design note. A client is one authenticated connection. Its calls (`call` frames) run on a
short-lived thread each, since some block (`place` waits for resources, `start_worker` for
the fork); the reply goes back as a `reply` frame with the call's id. The client owns what it
creates: its workers' messages and exits are forwarded to it as raw payloads (unpickled only
by the client), and when it disconnects its workers are SIGKILLed and its placements
released, as a driver's resources are when a driver goes away. A client opened inside a worker
(SIMCLUSTER_WORKER_ID set; e.g. a Tune trial that runs a Train fit) is owned by that worker:
when the worker exits, the client's workers are killed and its placements released before
the worker's exit is reported, so whoever sees the exit finds the resources free. `send` frames are forwarded to
the worker on the event-loop thread without a reply, so they keep their order; so do calls
with no id (kill_worker, release: they never block), which are thus applied before any call
the client makes after them.
"""

from __future__ import annotations

import signal
import threading

from .._errors import ChannelClosed, RemoteError
from .._wire import CTRL, dumps, loads


class ClientSession:
    def __init__(self, driver, conn, worker_id: str | None = None):
        self.driver = driver
        self.conn = conn
        self.worker_id = worker_id  # the worker this client was opened in, if any
        self.workers: set[str] = set()
        self.placements: set[str] = set()
        self.open = True
        self._lock = threading.Lock()

    def on_frame(self, kind: int, payload: bytes) -> None:
        if kind != CTRL:
            return
        msg = loads(payload)
        if msg["op"] == "send":
            try:
                self.driver.send_to_worker(msg["worker"], msg["payload"])
            except ChannelClosed:
                pass  # the worker is gone; the client hears so from its exit
        elif msg["op"] == "send_many":
            self.driver.send_to_workers(msg["workers"], msg["payload"])
        elif msg["op"] == "call" and msg["id"] is None:
            self._call(msg)  # non-blocking; inline keeps it ordered before later calls
        elif msg["op"] == "call":
            threading.Thread(target=self._call, args=(msg,), daemon=True,
                             name=f"simcluster-rpc-{msg['method']}").start()

    def _call(self, msg: dict) -> None:
        try:
            method = getattr(self, "rpc_" + msg["method"])
            reply = {"op": "reply", "id": msg["id"], "ok": True,
                     "value": method(*msg["args"], **msg["kwargs"])}
        except BaseException as exc:
            reply = {"op": "reply", "id": msg["id"], "ok": False, "error": exc}
        if msg["id"] is None:
            return  # fire-and-forget (kill_worker, release): nobody waits for a reply
        try:
            data = dumps(reply)
        except Exception as exc:
            data = dumps({"op": "reply", "id": msg["id"], "ok": False,
                          "error": RemoteError(f"{msg['method']}: unpicklable reply: {exc!r}")})
        self._push_raw(data)

    def _push_raw(self, data: bytes) -> None:
        try:
            self.conn.send(CTRL, data)
        except ChannelClosed:
            pass  # the client left; closed() cleans up after it

    # -- owner interface (called by the driver on the event-loop thread) ---------------------
    def _on_message(self, worker_id: str, payload: bytes) -> None:
        self._push_raw(dumps({"op": "message", "worker": worker_id, "payload": payload}))

    def _on_exit(self, worker_id: str, info: dict, payload: bytes | None) -> None:
        with self._lock:
            self.workers.discard(worker_id)
        self._push_raw(dumps({"op": "exit", "worker": worker_id, "info": info, "payload": payload}))

    def closed(self) -> None:
        with self._lock:
            self.open = False
            workers, placements = list(self.workers), list(self.placements)
        for worker_id in workers:
            self.driver.kill_worker(worker_id, signal.SIGKILL)
        for placement_id in placements:
            self.driver.release(placement_id)

    def _adopt(self, kind: str, item: str) -> bool:
        """Record something the client now owns; False if the client left meanwhile."""
        with self._lock:
            if self.open:
                (self.workers if kind == "worker" else self.placements).add(item)
            return self.open

    # -- calls ---------------------------------------------------------------------------------
    def rpc_info(self) -> dict:
        return {"address": self.driver.address, "history_path": str(self.driver.history.path)}

    def rpc_nodes(self) -> list:
        with self.driver.lock:
            nodes = [rec.node.snapshot() for rec in self.driver.nodes.values()]
        return sorted(nodes, key=lambda node: node.index)

    def rpc_resources(self, which: str) -> dict:
        with self.driver.lock:
            return self.driver.book.total() if which == "total" else self.driver.book.available()

    def rpc_place(self, bundles, strategy, timeout_s) -> dict:
        info = self.driver.place(bundles, strategy, timeout_s, self)
        if not self._adopt("placement", info["id"]):
            self.driver.release(info["id"])
        return info

    def rpc_release(self, placement_id: str) -> None:
        with self._lock:
            self.placements.discard(placement_id)
        self.driver.release(placement_id)

    def rpc_start_worker(self, node_id, blob, env, bundle, name, timeout_s, tags=None) -> tuple:
        w = self.driver.start_worker(self, node_id, blob, env, bundle, name, timeout_s, tags)
        if not self._adopt("worker", w.id):
            self.driver.kill_worker(w.id, signal.SIGKILL)
        return w.id, w.pid, w.node_id, w.name

    def rpc_start_workers(self, fn, starts, timeout_s) -> list[tuple]:
        out = []
        for w in self.driver.start_workers(self, fn, starts, timeout_s):
            if not self._adopt("worker", w.id):
                self.driver.kill_worker(w.id, signal.SIGKILL)
            out.append((w.id, w.pid, w.node_id, w.name))
        return out

    def rpc_record_event(self, name: str, fields: dict) -> None:
        self.driver.history.record(name, **fields)  # checked by the client

    def rpc_kill_worker(self, worker_id: str, sig: int) -> None:
        self.driver.kill_worker(worker_id, sig)

    def rpc_add_node(self, spec, timeout_s):
        return self.driver.start_nodes([spec], timeout_s)[0].snapshot()

    def rpc_remove_node(self, node_id, graceful, grace_s, timeout_s) -> None:
        self.driver.remove_node(node_id, graceful, grace_s, timeout_s)

    def rpc_kill_node(self, node_id, timeout_s) -> None:
        self.driver.kill_node(node_id, timeout_s)

    def rpc_preload(self, modules, timeout_s) -> dict:
        return self.driver.preload_modules(modules, timeout_s)

    def rpc_pause_node(self, node_id, paused) -> None:
        self.driver.pause_node(node_id, paused)
