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
the error meant for the thread running the worker's code. `recv(background=True)` (the
thread serving calls) reads only while no other thread waits, nor waited in the last
BACKGROUND_GRACE_S: a thread that starts waiting while it reads wakes it (a byte on a pipe
it polls beside the socket) and reads the socket itself, so the reply it waits for wakes it
directly, not through the background thread (a thread switch more per reply, on the path
of every report). Meanwhile the background thread sleeps on a condition of its own, woken
by a frame it accepts, when the last waiting thread leaves, and at the end of the grace: a
loop of reports wakes it about once per grace, a long wait not at all. A frame for it that
arrives while nobody reads waits at most the grace.
"""

from __future__ import annotations

import builtins
import collections
import importlib
import itertools
import os
import select
import socket
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
#: how long after a thread's last wait a background reader leaves the socket to it
BACKGROUND_GRACE_S = 0.005


def _any(type_name: str) -> bool:
    return True


class WorkerChannel:
    """The worker's end of its channel to the driver: `send(obj)`, `recv(timeout=None)`."""

    def __init__(self, sock):
        self._sock = sock
        self._send_lock = threading.Lock()
        lock = threading.RLock()
        self._cv = threading.Condition(lock)
        self._reading = False
        self._reader = FrameReader(MAX_FRAME)
        self._frames: collections.deque = collections.deque()
        self._replies: dict[int, object] = {}
        self._ids = itertools.count()
        self._injected: list[BaseException] = []
        self.preempt_deadline: float | None = None
        self._cv_waiters = 0  # threads waiting on _cv (nobody to notify: no notify call)
        self._foreground = 0  # threads waiting in a call that is not background
        self._yield_until = 0.0  # monotonic time until which a background thread leaves it
        self._background = threading.Condition(lock)  # where a background thread waits
        self._background_accept: Callable[[str], bool] | None = None  # ... for these frames
        self._background_untimed = False  # ... until the waiting threads leave
        self._background_reads = False  # the thread reading now is a background one
        self._woken = False  # ... and was asked to leave the socket
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._poll = select.poll()
        self._poll.register(sock, select.POLLIN)
        self._poll.register(self._wake_r, select.POLLIN)

    def send(self, obj: object, *, faults: bool = True) -> None:
        if faults:
            self.check_faults()
        payload = pack_message(obj)
        with self._send_lock:
            send_frame(self._sock, MSG, payload)

    def recv(self, timeout: float | None = None, *, accept: Callable[[str], bool] | None = None,
             faults: bool = True, background: bool = False) -> object:
        """The next message from the driver; TimeoutError after `timeout` seconds,
        ChannelClosed once the driver has gone. `accept(type name)`: the first message whose
        type it accepts (the others stay for other readers). `faults=False`: an injected
        error is not raised here (it stays for the next call that raises it).
        `background=True`: leave the socket to any other thread that waits (module note)."""
        def take():
            for i, payload in enumerate(self._frames):
                if accept is None or accept(message_type(payload)):
                    del self._frames[i]
                    return payload
            return _NONE

        return unpack_message(self._wait(take, timeout, "message", faults, background, accept))

    # -- faults ----------------------------------------------------------------------------
    def check_faults(self) -> None:
        """Read what the driver sent so far without blocking; raise an injected error."""
        with self._cv:
            while not self._reading:  # non-blocking reads, the condition held meanwhile
                try:
                    data = self._sock.recv(1 << 18, socket.MSG_DONTWAIT)
                except (BlockingIOError, InterruptedError):
                    break
                except OSError as exc:
                    raise ChannelClosed(f"the driver connection broke: {exc}") from exc
                self._file(data)
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
    def _wait(self, take, timeout: float | None, what: str, faults: bool = True,
              background: bool = False, accept: Callable[[str], bool] | None = None):
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cv:
            self._foreground += not background
            try:
                while True:
                    if faults:
                        self._raise_injected()
                    item = take()
                    if item is not _NONE:
                        return item
                    now = time.monotonic()
                    remaining = None if deadline is None else deadline - now
                    if remaining is not None and remaining <= 0:
                        raise TimeoutError(f"no {what} from the driver within {timeout} s")
                    if background:
                        self._background_wait(remaining, now, accept)
                    elif self._reading:
                        if self._background_reads and not self._woken:
                            self._woken = True
                            os.write(self._wake_w, b"\0")
                        self._cv_waiters += 1
                        try:
                            self._cv.wait(remaining)
                        finally:
                            self._cv_waiters -= 1
                    else:
                        self._read(remaining)
            finally:
                if not background:
                    self._foreground -= 1
                    self._yield_until = time.monotonic() + BACKGROUND_GRACE_S
                    if not self._foreground and self._background_untimed:
                        self._background.notify()  # to start its grace

    def _background_wait(self, remaining: float | None, now: float, accept) -> None:
        """Read, unless another thread reads or waits, or waited less than
        BACKGROUND_GRACE_S ago (it may be back at once: a loop of reports). Otherwise wait
        for a frame it accepts, and until the grace is over; or, past the grace while
        another thread still waits, until that thread leaves (no timer: a long wait costs
        no wake-ups). A loop of reports wakes it once per grace, its exits wake nobody."""
        if not (self._reading or self._foreground or now < self._yield_until):
            self._read(remaining, background=True)
            return
        pause = self._yield_until - now if now < self._yield_until else None
        if pause is None or (remaining is not None and remaining < pause):
            pause = remaining
        self._background_accept = accept or _any
        self._background_untimed = now >= self._yield_until
        try:
            self._background.wait(pause)
        finally:
            self._background_accept = None
            self._background_untimed = False

    def _read(self, timeout: float | None, background: bool = False) -> bool:
        """Read once (condition held on entry and exit, released while reading); False if
        nothing came within `timeout` (or, `background`, another thread asked for the
        socket)."""
        self._reading, self._background_reads = True, background
        self._cv.release()
        try:
            data = None
            ready = True
            if background:
                ready = False
                for fd, _ in self._poll.poll(None if timeout is None else
                                             max(0.0, timeout) * 1000):
                    if fd == self._wake_r:
                        _drain(fd)
                    else:
                        ready = True
            elif timeout is not None:
                ready = bool(select.select([self._sock], [], [], max(0.0, timeout))[0])
            if ready:
                try:
                    data = self._sock.recv(1 << 18)
                except OSError as exc:
                    raise ChannelClosed(f"the driver connection broke: {exc}") from exc
        finally:
            self._cv.acquire()
            self._reading = self._background_reads = self._woken = False
            if self._cv_waiters:
                self._cv.notify_all()
        if data is None:
            return False
        self._file(data)
        return True

    def _file(self, data: bytes) -> None:
        """File what a read brought (condition held): frames for whoever waits for them."""
        if not data:
            raise ChannelClosed("the driver closed the channel")
        wanted = self._background_accept
        for kind, payload in self._reader.feed(data):
            if kind == FAULT:
                self._on_fault(loads(payload))
            else:
                self._frames.append(payload)
                if wanted is not None and wanted(message_type(payload)):
                    self._background.notify()
        if self._cv_waiters:
            self._cv.notify_all()

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


def _drain(fd: int) -> None:
    try:
        while os.read(fd, 64):
            pass
    except BlockingIOError:
        pass


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
