"""`simcluster.connect(address)`: use a cluster that another local process runs.

A `ClusterClient` has the `Cluster` methods (nodes, resources, placement, workers, node
faults), done as calls over one authenticated connection. Its workers' messages and exits
are forwarded to it by the driver, so on this side they behave as on a `Cluster`; a message
takes one more hop (driver in between), so expect about twice the round-trip time.
Nodes returned here are snapshots: call `nodes` again to see changes. If the connection
drops, the driver kills this client's workers and releases its placements, and here every
unfinished worker gets an exit with reason "disconnected".
"""

from __future__ import annotations

import itertools
import os
import signal as _signal
import socket
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .._errors import ChannelClosed
from .._history import History
from .._keys import read_key
from .._spec import Node, NodeSpec
from .._wire import (
    CTRL,
    MAX_FRAME,
    FrameReader,
    client_handshake,
    connect_socket,
    dumps,
    loads,
    parse_address,
    send_frame,
)
from .endpoint import Endpoint, Placement, WorkerHandle
from .start_args import (
    blob_for,
    bulk_starts,
    check_env,
    check_event,
    check_modules,
    check_tags,
    resolve_target,
)


def connect(address: str, *, secret: bytes | None = None, timeout_s: float = 10.0):
    """A client of the cluster at `address` ('host:port', e.g. `Cluster.address` or the
    SIMCLUSTER_ADDRESS a worker sees). The secret is read from this user's key file for that
    address unless given."""
    return ClusterClient(address, secret=secret, timeout_s=timeout_s)


class ClusterClient(Endpoint):
    def __init__(self, address: str, *, secret: bytes | None = None, timeout_s: float = 10.0):
        super().__init__()
        parse_address(address)
        self.address = address
        secret = read_key(address) if secret is None else secret
        self._sock = connect_socket(address, timeout=timeout_s)
        try:
            self._sock.settimeout(timeout_s)
            # A client opened inside a worker names that worker: it is owned by it (see rpc.py).
            ident = f"client-{id(self):x}"
            if os.environ.get("SIMCLUSTER_WORKER_ID"):
                ident += f" {os.environ['SIMCLUSTER_WORKER_ID']}"
            client_handshake(self._sock, secret, "client", ident)
            self._sock.settimeout(None)
        except BaseException:
            self._sock.close()
            raise
        self._send_lock = threading.Lock()
        self._calls_lock = threading.Lock()
        self._calls: dict[int, tuple[threading.Event, list]] = {}
        self._ids = itertools.count()
        self._closed = False
        #: what each started worker was named, so that a worker lost with the connection is
        #: reported as itself (its owner may route exits by name); guarded by _slots_lock
        self._started: dict[str, dict] = {}
        self._reported_lost: set[str] = set()
        self._reader = threading.Thread(target=self._read, name="simcluster-client", daemon=True)
        self._reader.start()
        self._history_path = self._call("info")["history_path"]

    # -- the Cluster interface ---------------------------------------------------------------
    @property
    def nodes(self) -> list[Node]:
        return self._call("nodes")

    def node(self, node_id: str) -> Node:
        for node in self.nodes:
            if node.id == node_id:
                return node
        raise KeyError(f"node_id={node_id!r} is not a node of the cluster at {self.address}")

    def add_node(self, spec: NodeSpec, *, timeout_s: float = 60.0) -> Node:
        return self._call("add_node", spec, timeout_s)

    def remove_node(self, node, graceful: bool = True, *, grace_s: float | None = None,
                    timeout_s: float = 10.0) -> None:
        self._call("remove_node", getattr(node, "id", node), graceful, grace_s, timeout_s)

    def kill_node(self, node, *, timeout_s: float = 10.0) -> None:
        self._call("kill_node", getattr(node, "id", node), timeout_s)

    def pause_node(self, node) -> None:
        self._call("pause_node", getattr(node, "id", node), True)

    def resume_node(self, node) -> None:
        self._call("pause_node", getattr(node, "id", node), False)

    def preload(self, modules: Sequence[str], *, timeout_s: float = 60.0) -> dict:
        """See `Cluster.preload`."""
        return self._call("preload", check_modules(modules), timeout_s)

    def total_resources(self) -> dict[str, float]:
        return self._call("resources", "total")

    def available_resources(self) -> dict[str, float]:
        return self._call("resources", "available")

    def place(self, bundles: Sequence[Mapping[str, float]], strategy: str = "PACK", *,
              timeout_s: float | None = 30.0) -> Placement:
        return Placement(self, self._call("place", [dict(b) for b in bundles], strategy,
                                          timeout_s))

    def start_worker(self, node_id, fn: Callable, args: Sequence = (),
                     kwargs: Mapping[str, Any] | None = None, *,
                     env: Mapping[str, str] | None = None, bundle=None,
                     placement: Placement | None = None, name: str | None = None,
                     tags: Mapping[str, Any] | None = None,
                     timeout_s: float = 30.0) -> WorkerHandle:
        node_id, bundle = resolve_target(node_id, bundle, placement)
        blob = blob_for(fn, args, kwargs or {})
        wid, pid, node_id, name = self._call("start_worker", node_id, blob, check_env(env),
                                             bundle, name, timeout_s, check_tags(tags))
        with self._slots_lock:  # before the handle makes its slot: a loss then has the name
            self._started[wid] = dict(worker_id=wid, node_id=node_id, name=name, pid=pid)
        handle = WorkerHandle(self, wid, pid, node_id, name)
        if self._closed:  # the connection dropped after the reply: no one else reports it
            self._report_lost()
        return handle

    def start_workers(self, fn: Callable, starts: Sequence[Mapping[str, Any]], *,
                      timeout_s: float = 30.0) -> list[WorkerHandle]:
        """See `Cluster.start_workers`: one call for all of them."""
        fn_blob, checked = bulk_starts(fn, starts)
        started = self._call("start_workers", fn_blob, checked, timeout_s)
        handles = []
        with self._slots_lock:  # before the handles make their slots (see start_worker)
            for wid, pid, node_id, name in started:
                self._started[wid] = dict(worker_id=wid, node_id=node_id, name=name, pid=pid)
        for wid, pid, node_id, name in started:
            handles.append(WorkerHandle(self, wid, pid, node_id, name))
        if self._closed:
            self._report_lost()
        return handles

    def kill_worker(self, worker_id: str, signal: int = _signal.SIGKILL) -> None:
        self._kill_worker(worker_id, int(signal))

    def record_event(self, name: str, **fields) -> None:
        """Add an event of your own to the cluster's history (see `Cluster.record_event`).
        Not awaited: it is recorded before any later call of this client is handled."""
        check_event(name, fields)
        self._push({"op": "call", "id": None, "method": "record_event",
                    "args": (name, fields), "kwargs": {}})

    @property
    def history(self) -> History:
        """The cluster's history file, read-only from here."""
        return History(self._history_path, writable=False)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            try:
                self._sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self._reader.join(5.0)
            self._sock.close()

    @property
    def closed(self) -> bool:
        return self._closed

    def __repr__(self) -> str:
        return f"ClusterClient(address={self.address!r})"

    # -- transport ---------------------------------------------------------------------------
    def _send_payload(self, worker_id: str, payload: bytes) -> None:
        self._push({"op": "send", "worker": worker_id, "payload": payload})

    def _send_payloads(self, worker_ids: list[str], payload: bytes) -> None:
        self._push({"op": "send_many", "workers": worker_ids, "payload": payload})

    # Fire-and-forget (no reply awaited), so that callbacks may kill and release too.
    def _kill_worker(self, worker_id: str, sig: int) -> None:
        self._push({"op": "call", "id": None, "method": "kill_worker", "args": (worker_id, sig),
                    "kwargs": {}})

    def _release_placement(self, placement_id: str) -> None:
        self._push({"op": "call", "id": None, "method": "release", "args": (placement_id,),
                    "kwargs": {}})

    def _push(self, msg: dict) -> None:
        if self._closed:
            raise ChannelClosed(f"the client of {self.address} is closed")
        with self._send_lock:
            send_frame(self._sock, CTRL, dumps(msg))

    def _call(self, method: str, *args, **kwargs):
        if threading.current_thread() is self._reader:
            raise RuntimeError(f"{method}() was called from an on_message/on_worker_exit "
                               "callback; it waits for the thread that is running the callback. "
                               "Hand the work to another thread (send is fine in a callback)")
        done, box = threading.Event(), []
        call_id = next(self._ids)
        with self._calls_lock:
            if self._closed:
                raise ChannelClosed(f"the client of {self.address} is closed")
            self._calls[call_id] = (done, box)
        self._push({"op": "call", "id": call_id, "method": method, "args": args,
                    "kwargs": kwargs})
        done.wait()
        reply = box[0]
        if not reply["ok"]:
            raise reply["error"]
        return reply["value"]

    def _read(self) -> None:
        reader = FrameReader(MAX_FRAME)
        try:
            while True:
                try:
                    data = self._sock.recv(1 << 18)
                except OSError:
                    break
                if not data:
                    break
                for _, payload in reader.feed(data):
                    self._dispatch(loads(payload))
        finally:
            self._disconnected()

    def _dispatch(self, msg: dict) -> None:
        op = msg["op"]
        if op == "reply":
            with self._calls_lock:
                done, box = self._calls.pop(msg["id"])
            box.append(msg)
            done.set()
        elif op == "message":
            self._on_message(msg["worker"], msg["payload"])
        elif op == "exit":
            self._on_exit(msg["worker"], msg["info"], msg["payload"])

    def _disconnected(self) -> None:
        with self._calls_lock:
            self._closed = True
            pending, self._calls = list(self._calls.values()), {}
        lost = ChannelClosed(f"the connection to the cluster at {self.address} closed")
        for done, box in pending:
            box.append({"ok": False, "error": lost})
            done.set()
        self._report_lost()

    def _report_lost(self) -> None:
        """Every unfinished worker gets an exit with reason "disconnected", once, named and
        placed as it was started (the driver has killed it, or is gone with its nodes)."""
        with self._slots_lock:
            lost = [wid for wid, slot in self._slots.items()
                    if not slot.done.is_set() and wid not in self._reported_lost]
            self._reported_lost.update(lost)
            known = {wid: self._started.get(wid) for wid in lost}
        for wid in lost:
            info = known[wid] or dict(worker_id=wid, node_id="", name=wid, pid=None)
            self._on_exit(wid, dict(info, code=None, signal=None, reason="disconnected"), None)
