"""The cluster's history: an append-only JSON-lines file of events.

Every line is one event: `{"t": <time.monotonic()>, "seq": n, "event": "<name>", ...fields}`.
Lines are written with one `os.write` on an `O_APPEND` descriptor under a lock, so the
file holds whole lines in `seq` order and survives a SIGKILLed driver up to its last event
(a reader skips a torn last line). Message events are the exception: they are batched (a
write per message costs more than the message) and reach the file with the next other
event, on `flush()` (a cluster flushes every 0.1 s), or every 256 messages.
`time.monotonic` is system-wide on Linux, so timestamps from several processes compare.

Events recorded by a cluster (extra fields in brackets):

    cluster_start   [address, wall, pid]         cluster_stop
    node_up         [node, address, pid, resources, labels]
    node_down       [node, reason: removed | killed | lost | shutdown]
    node_paused     [node]                       node_resumed  [node]
    worker_start    [worker, node, name, pid, tags (if the worker has any)]
    worker_exit     [worker, node, code, signal, reason, error]
                    [dropped: {bytes, why}] when what its socket held could not all be read
    message         [worker, direction: to_worker | from_worker, type, size]
    placement       [placement, strategy, bundles, nodes]
    placement_released [placement]
    preload         [modules, nodes]             (`preload(modules)`: the nodes asked)
    fault           [action, node | worker, ...]   (kill_node, pause_node, kill_worker, ...)
                    a fault plan's faults also carry [step, trigger]
    worker_signal   [worker, node, signal]
    upload          [worker, path, fault: step | None]   (`simcluster.worker.before_upload`)
    plan_start      [plan, seed]     plan_done     plan_skipped  [step, action, why]
    heal            [nodes, step]    (a plan's partition ended)
    plan_unfired    [step, action, trigger, optional]   (at close: a step that never acted)
    <ns>.<name>     [your fields]    (`record_event`: events of a layer above, e.g. train.*)

`subscribe(callback)` calls `callback(event_dict)` after each event is recorded, on the
thread that recorded it (often the cluster's event loop, sometimes holding the driver's
lock): a listener must be quick and must not wait for the cluster.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

from ._state import create_history, open_history

_MESSAGE_BATCH = 256
#: the events a cluster records (the list above); a layer above adds dotted names of its own
EVENTS = ("cluster_start", "cluster_stop", "node_up", "node_down", "node_paused",
          "node_resumed", "worker_start", "worker_exit", "message", "placement",
          "placement_released", "fault", "worker_signal", "upload", "plan_start", "plan_done",
          "plan_skipped", "plan_unfired", "heal", "preload")


class History:
    """Writer of a cluster's history, and reader of any history file."""

    def __init__(self, path: str | os.PathLike | None = None, *, writable: bool = True):
        """`path` None: a new file in the per-user state folder (see `simcluster._state`).
        Nothing is written through a symlink (`simcluster._state`)."""
        fd = None
        if path is None:
            path, fd = create_history()
            if not writable:
                os.close(fd)
                fd = None
        elif writable:
            fd = open_history(Path(path))
        self.path = Path(path)
        self._lock = threading.Lock()
        self._seq = 0
        self._pending: list[str] = []
        self._fd: int | None = fd
        self._listeners: tuple = ()

    def record(self, event: str, **fields) -> dict | None:
        """Append one event; a no-op once the history is closed (late exits at shutdown)."""
        with self._lock:
            if self._fd is None:
                return None
            self._seq += 1
            entry = {"t": time.monotonic(), "seq": self._seq, "event": event, **fields}
            self._pending.append(json.dumps(entry, default=repr) + "\n")
            self._write()
        for listener in self._listeners:
            listener(entry)
        return entry

    def record_message(self, worker: str, direction: str, type_name: str, size: int) -> None:
        """`record("message", ...)` on the hot path: formatted by hand and buffered (written
        with the next other event, by `flush`, or every `_MESSAGE_BATCH` messages)."""
        with self._lock:
            if self._fd is None:
                return
            self._seq += 1
            t, seq = time.monotonic(), self._seq
            self._pending.append(
                f'{{"t": {t!r}, "seq": {seq}, "event": "message", '
                f'"worker": {json.dumps(worker)}, "direction": "{direction}", '
                f'"type": {json.dumps(type_name)}, "size": {size}}}\n')
            if len(self._pending) >= _MESSAGE_BATCH:
                self._write()
        if self._listeners:
            entry = {"t": t, "seq": seq, "event": "message", "worker": worker,
                     "direction": direction, "type": type_name, "size": size}
            for listener in self._listeners:
                listener(entry)

    def subscribe(self, callback) -> None:
        """Call `callback(event)` after every event from now on (see the module note)."""
        with self._lock:
            self._listeners = (*self._listeners, callback)

    def unsubscribe(self, callback) -> None:
        with self._lock:
            self._listeners = tuple(c for c in self._listeners if c is not callback)

    def flush(self) -> None:
        with self._lock:
            if self._fd is not None and self._pending:
                self._write()

    def _write(self) -> None:
        os.write(self._fd, "".join(self._pending).encode())
        self._pending.clear()

    def events(self, event: str | None = None) -> list[dict]:
        """All events so far (optionally only those named `event`)."""
        self.flush()
        found = History.read(self.path)
        return found if event is None else [e for e in found if e["event"] == event]

    @staticmethod
    def read(path: str | os.PathLike) -> list[dict]:
        out = []
        with open(path, encoding="utf-8") as f:
            for line in f:
                if not line.endswith("\n"):
                    break  # torn last line of a writer that died mid-write
                out.append(json.loads(line))
        return out

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                if self._pending:
                    self._write()
                os.close(self._fd)
                self._fd = None

    def __repr__(self) -> str:
        return f"History({str(self.path)!r})"
