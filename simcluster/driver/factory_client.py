"""The driver's side of the node factory process (`node/factory_process.py`).

Started lazily from the event-loop thread (the factory's parent-death signal is tied to that
thread), restarted on the next node start if it died. Its events arrive on a pipe the loop
watches; each is handed to `on_event` on the loop thread.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
from collections.abc import Callable

from .. import _proc


class NodeFactory:
    def __init__(self, loop, boot: dict, on_event: Callable[[dict], None]):
        self._loop = loop
        self._boot = boot
        self._on_event = on_event
        self._lock = threading.Lock()
        self._proc = None
        self._events_r: int | None = None
        self._buffer = b""

    def spawn(self, node: dict) -> None:
        """Ask for one node (loop thread only): {"node_id", "node_address", "env"}."""
        if self._proc is None:
            self._start()
        try:
            with self._lock:
                self._proc.stdin.write((json.dumps(node) + "\n").encode())
                self._proc.stdin.flush()
        except OSError:
            self._gone()

    def preload(self, modules: list[str]) -> None:
        """Loop thread only: the factory imports `modules` (a factory started later imports
        them at boot), so that every node forked from now on starts with them."""
        requested = self._boot.setdefault("requested", [])
        requested.extend(m for m in modules if m not in requested)
        if self._proc is None:
            return
        try:
            with self._lock:
                self._proc.stdin.write((json.dumps({"op": "preload", "modules": modules}) + "\n").encode())
                self._proc.stdin.flush()
        except OSError:
            self._gone()

    def _start(self) -> None:
        events_r, events_w = os.pipe()
        try:
            self._proc = _proc.spawn_factory(events_w)
        finally:
            os.close(events_w)
        self._events_r = events_r
        boot = {**self._boot, "sys_path": [os.path.abspath(p or os.curdir) for p in sys.path],
                "events_fd": events_w}
        self._proc.stdin.write((json.dumps(boot) + "\n").encode())
        self._proc.stdin.flush()
        self._loop.add_reader(events_r, self._readable)

    def _readable(self) -> None:
        data = os.read(self._events_r, 1 << 16)
        if not data:
            self._gone()
            return
        self._buffer += data
        while b"\n" in self._buffer:
            line, self._buffer = self._buffer.split(b"\n", 1)
            self._on_event(json.loads(line))

    def _gone(self) -> None:
        """The factory died (or was closed): forget it; the next spawn starts a new one."""
        if self._proc is None:
            return
        self._loop.remove_reader(self._events_r)
        os.close(self._events_r)
        proc, self._proc, self._buffer = self._proc, None, b""
        proc.stdin.close()
        _proc.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        self._on_event({"factory_gone": True})

    def close(self) -> None:
        """Loop thread only (or once the loop has stopped)."""
        self._gone()
