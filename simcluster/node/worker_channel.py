"""The worker's end of its channel: messages, plus the fault plan's messages to the worker.

Design note. One socket carries, from the driver, MSG frames (the user's messages) and
FAULT frames (a fault plan talking to this worker: an error to raise, a preemption notice,
the verdict on an upload). Whoever reads the socket dispatches both, so a FAULT frame is
seen by whichever call reads next: `recv`, the non-blocking drain that `send`,
`check_faults`, `preemption` and `before_upload` do first, or the wait for an upload verdict.

Raise in worker. An injected error is raised by the worker's next channel call (or
`simcluster.worker.check_faults()` / `before_upload()`), in the thread making it; a worker
that never touches its channel never sees it (kill it instead). This keeps the fault at a
well-defined point of the worker's code, which is what makes a replayed plan reproduce it.

Threads. Several threads may use the channel: one at a time reads the socket (`_reading`)
with the condition released, the others wait on the condition and re-check what they wait
for after each dispatch, so no frame is read by one thread and lost to another; sends are
serialized by a lock. `recv(accept=...)` lets two threads split the messages by type (one
serving calls while the other waits for replies); `recv(faults=False)` leaves an injected
error to the worker's other channel calls, so a thread that only serves calls never takes
the error meant for the thread running the worker's code.
"""

from __future__ import annotations

import builtins
import collections
import importlib
import itertools
import select
import threading
import time
from typing import Callable

from .._errors import ChannelClosed
from .._wire import (
    FAULT,
    MAX_FRAME,
    MSG,
    RESULT,
    UPLOAD,
    FrameReader,
    dumps,
    loads,
    message_type,
    pack_message,
    send_frame,
    unpack_message,
)

_NONE = object()


class WorkerChannel:
    """The worker's end of its channel to the driver: `send(obj)`, `recv(timeout=None)`."""

    def __init__(self, sock):
        self._sock = sock
        self._send_lock = threading.Lock()
        self._cv = threading.Condition()
        self._reading = False
        self._reader = FrameReader(MAX_FRAME)
        self._frames: collections.deque = collections.deque()
        self._replies: dict[int, object] = {}
        self._ids = itertools.count()
        self._injected: list[BaseException] = []
        self.preempt_deadline: float | None = None

    def send(self, obj: object, *, faults: bool = True) -> None:
        if faults:
            self.check_faults()
        payload = pack_message(obj)
        with self._send_lock:
            send_frame(self._sock, MSG, payload)

    def recv(self, timeout: float | None = None, *, accept: Callable[[str], bool] | None = None,
             faults: bool = True) -> object:
        """The next message from the driver; TimeoutError after `timeout` seconds,
        ChannelClosed once the driver has gone. `accept(type name)`: the first message whose
        type it accepts (the others stay for other readers). `faults=False`: an injected
        error is not raised here (it stays for the next call that raises it)."""
        def take():
            for i, payload in enumerate(self._frames):
                if accept is None or accept(message_type(payload)):
                    del self._frames[i]
                    return payload
            return _NONE

        return unpack_message(self._wait(take, timeout, "message", faults))

    # -- faults ----------------------------------------------------------------------------
    def check_faults(self) -> None:
        """Read what the driver sent so far without blocking; raise an injected error."""
        with self._cv:
            while not self._reading and self._read(0.0):
                pass
            self._raise_injected()

    def before_upload(self, path: str) -> None:
        """Ask the driver whether this upload is to fail or be slow (one round trip)."""
        self.check_faults()
        request = next(self._ids)
        with self._send_lock:
            send_frame(self._sock, UPLOAD, dumps((request, str(path))))
        verdict = self._wait(lambda: self._replies.pop(request, _NONE), None, "upload verdict")
        if verdict is None:
            return
        if verdict[0] == "slow":
            time.sleep(verdict[1])
        else:
            raise build_error(verdict[1], f"{verdict[2]} (uploading {path})")

    # -- reading ---------------------------------------------------------------------------
    def _wait(self, take, timeout: float | None, what: str, faults: bool = True):
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cv:
            while True:
                if faults:
                    self._raise_injected()
                item = take()
                if item is not _NONE:
                    return item
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise TimeoutError(f"no {what} from the driver within {timeout} s")
                if self._reading:
                    self._cv.wait(remaining)
                else:
                    self._read(remaining)

    def _read(self, timeout: float | None) -> bool:
        """Read once (condition held on entry and exit, released while reading); False if
        nothing came within `timeout`."""
        self._reading = True
        self._cv.release()
        try:
            data = None
            ready = True
            if timeout is not None:
                ready = bool(select.select([self._sock], [], [], max(0.0, timeout))[0])
            if ready:
                try:
                    data = self._sock.recv(1 << 18)
                except OSError as exc:
                    raise ChannelClosed(f"the driver connection broke: {exc}") from exc
        finally:
            self._cv.acquire()
            self._reading = False
            self._cv.notify_all()
        if data is None:
            return False
        if not data:
            raise ChannelClosed("the driver closed the channel")
        for kind, payload in self._reader.feed(data):
            if kind == FAULT:
                self._on_fault(loads(payload))
            else:
                self._frames.append(payload)
        return True

    def _on_fault(self, msg: tuple) -> None:
        if msg[0] == "raise":
            self._injected.append(build_error(msg[1], msg[2]))
        elif msg[0] == "preempt":
            self.preempt_deadline = msg[1]
        elif msg[0] == "upload":
            self._replies[msg[1]] = msg[2]

    def _raise_injected(self) -> None:
        if self._injected:
            raise self._injected.pop(0)

    def _send_result(self, payload: bytes) -> None:
        with self._send_lock:
            send_frame(self._sock, RESULT, payload)


def build_error(name: str, message: str) -> BaseException:
    """An instance of the exception class named `name` (a builtin such as "OSError", or
    "package.module.Class"); a RuntimeError saying so if it cannot be found or built."""
    cls = getattr(builtins, name, None)
    if "." in name:
        module, _, attr = name.rpartition(".")
        try:
            cls = getattr(importlib.import_module(module), attr, None)
        except Exception:
            cls = None
    if isinstance(cls, type) and issubclass(cls, BaseException):
        try:
            return cls(message)
        except Exception:
            pass
    return RuntimeError(f"{message} (error type {name!r} could not be built here)")
