"""The driver's event loop: one thread that owns the listening socket and every connection.

Design note. All reads happen here (epoll via `selectors`), so a node, a worker or a client
costs no thread. Writes may come from any thread: `Connection.send` tries a non-blocking
`send` in the caller's thread (the fast path: one syscall, no thread hop) and hands any
remainder to the loop, which flushes it when the socket is writable. Nobody ever blocks on a
slow or paused peer, and bytes leave in the order `send` was called.

Hazards: the selector is touched only by the loop thread (others go through `call_soon`);
sockets are closed only by the loop thread, so a frame handler never sees a socket vanish
under it; a handler that raises is reported and its connection closed, the loop goes on.
`drain` reads one connection at once, out of the selector's turn and for a bounded time (an
exited worker's socket, before the driver closes it).

Peers that have not authenticated cost the loop little and cannot starve it: each gets
`HANDSHAKE_TIMEOUT_S` to finish the handshake; at most `max_unauthenticated` of them are
held (a quarter of the descriptor limit, at most `MAX_UNAUTHENTICATED`), and a new one
closes the oldest, so a flood of idle connections cannot use up the descriptors and a peer
that knows the secret still gets through. When accepting fails for want of descriptors
(EMFILE, ENFILE) or memory, the listener rests `ACCEPT_BACKOFF_S` instead of waking the loop
again at once (it stays readable: that was a busy loop), the oldest unauthenticated peer is
closed to free a descriptor, and pending peers wait in the backlog.
One readiness event accepts at most `ACCEPT_BATCH` peers, so a flood cannot hold the loop.
"""

from __future__ import annotations

import collections
import errno
import heapq
import itertools
import os
import resource
import selectors
import socket
import sys
import threading
import time
import traceback
from collections.abc import Callable

from .._errors import ChannelClosed
from .._wire import MAX_FRAME, FrameReader, ProtocolError, ServerHandshake, frame

HANDSHAKE_TIMEOUT_S = 10.0
MAX_UNAUTHENTICATED = 256
ACCEPT_BACKOFF_S = 0.1
ACCEPT_BATCH = 64
_OUT_OF_RESOURCES = {errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM}
_READ = selectors.EVENT_READ
_WRITE = selectors.EVENT_WRITE


class Connection:
    """One peer of the driver. `role`/`ident` are set once it has authenticated;
    `data` is whatever the cluster attaches (a node record, a worker record, a session)."""

    def __init__(self, loop: Loop, sock: socket.socket, secret: bytes):
        self.loop = loop
        self.sock = sock
        self.reader = FrameReader()
        self.handshake: ServerHandshake | None = ServerHandshake(secret)
        self.role = ""
        self.ident = ""
        self.data: object = None
        self.closed = False
        self.last_read = 0.0  # monotonic time of the last read that brought bytes
        self._out: collections.deque = collections.deque()
        self._wlock = threading.Lock()

    def send(self, kind: int, payload: bytes = b"") -> None:
        self.send_raw(frame(kind, payload))

    def send_raw(self, data: bytes) -> None:
        with self._wlock:
            if self.closed:
                raise ChannelClosed(f"connection to {self.role} {self.ident} is closed")
            if not self._out:
                try:
                    sent = self.sock.send(data)
                except BlockingIOError:
                    sent = 0
                except OSError as exc:
                    self.loop.call_soon(self.loop.close, self)
                    raise ChannelClosed(f"connection to {self.role} {self.ident} broke: {exc}") \
                        from exc
                if sent == len(data):
                    return
                data = memoryview(data)[sent:]
            self._out.append(data)
            backlog_was_empty = len(self._out) == 1
        if backlog_was_empty:
            self.loop.call_soon(self.loop.want_write, self)

    def _flush(self) -> bool:
        """Write what is pending; True once nothing is left. Loop thread only."""
        with self._wlock:
            while self._out:
                chunk = self._out[0]
                try:
                    sent = self.sock.send(chunk)
                except BlockingIOError:
                    return False
                if sent < len(chunk):
                    self._out[0] = memoryview(chunk)[sent:]
                    return False
                self._out.popleft()
            return True


class Loop(threading.Thread):
    """Handlers (called in the loop thread):
    on_auth(conn) -> bool (False refuses), on_frame(conn, kind, payload), on_close(conn)."""

    def __init__(self, listener: socket.socket, secret: bytes, *, on_auth, on_frame, on_close):
        super().__init__(name="simcluster-loop", daemon=True)
        self._listener = listener
        self._secret = secret
        self._on_auth, self._on_frame, self._on_close = on_auth, on_frame, on_close
        self._sel = selectors.DefaultSelector()
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        self._calls: collections.deque = collections.deque()
        self._timers: list = []
        self._tick = itertools.count()
        self._stopping = False
        self.conns: set[Connection] = set()
        self._unauthenticated: dict[Connection, None] = {}  # in accept order, oldest first
        self.max_unauthenticated = _unauthenticated_cap()
        self._accepting = True
        listener.setblocking(False)
        self._sel.register(listener, _READ, "listener")
        self._sel.register(self._wake_r, _READ, "wake")

    # -- thread-safe scheduling ----------------------------------------------------------
    def call_soon(self, fn: Callable, *args) -> None:
        self._calls.append((fn, args))
        try:
            os.write(self._wake_w, b"x")
        except OSError:
            pass  # the loop has stopped; nothing left to wake

    def call_later(self, delay: float, fn: Callable, *args) -> None:
        """Loop thread only."""
        heapq.heappush(self._timers, (time.monotonic() + delay, next(self._tick), fn, args))

    def add_reader(self, fd: int, callback: Callable[[], None]) -> None:
        """Call `callback()` whenever `fd` is readable (loop thread only)."""
        self._sel.register(fd, _READ, callback)

    def remove_reader(self, fd: int) -> None:
        try:
            self._sel.unregister(fd)
        except (KeyError, ValueError):
            pass

    def stop(self) -> None:
        self._stopping = True
        self.call_soon(lambda: None)

    # -- loop thread ---------------------------------------------------------------------
    def run(self) -> None:
        try:
            while not self._stopping:
                timeout = None
                if self._timers:
                    timeout = max(0.0, self._timers[0][0] - time.monotonic())
                for key, events in self._sel.select(timeout):
                    if isinstance(key.data, Connection):
                        self._service(key.data, events)
                    elif key.data == "listener":
                        self._accept()
                    elif key.data == "wake":
                        self._drain_wake()
                    else:
                        self._guarded(key.data)
                self._run_calls()
                now = time.monotonic()
                while self._timers and self._timers[0][0] <= now:
                    _, _, fn, args = heapq.heappop(self._timers)
                    self._guarded(fn, *args)
        finally:
            for conn in list(self.conns):
                self.close(conn)
            self._sel.close()
            os.close(self._wake_r)
            os.close(self._wake_w)

    def _drain_wake(self) -> None:
        try:
            while os.read(self._wake_r, 4096):
                pass
        except BlockingIOError:
            pass

    def _run_calls(self) -> None:
        while self._calls:
            fn, args = self._calls.popleft()
            self._guarded(fn, *args)

    def _guarded(self, fn: Callable, *args) -> None:
        try:
            fn(*args)
        except Exception:
            print("simcluster: error in the event loop:", file=sys.stderr)
            traceback.print_exc()

    def _accept(self) -> None:
        for _ in range(ACCEPT_BATCH):
            try:
                sock, _ = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                if exc.errno == errno.ECONNABORTED:
                    continue  # that peer left while queued; the next may be there
                if exc.errno in _OUT_OF_RESOURCES:
                    self._rest_listener()
                return
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if len(self._unauthenticated) >= self.max_unauthenticated:
                self.close(next(iter(self._unauthenticated)))
            conn = Connection(self, sock, self._secret)
            self.conns.add(conn)
            self._unauthenticated[conn] = None
            self._sel.register(sock, _READ, conn)
            self.call_later(HANDSHAKE_TIMEOUT_S, self._expire, conn)

    def _rest_listener(self) -> None:
        """Out of descriptors: stop accepting for a while, and give the descriptor of the
        oldest unauthenticated peer to whoever is next in the backlog."""
        if self._unauthenticated:
            self.close(next(iter(self._unauthenticated)))
        if self._accepting:
            self._accepting = False
            self._sel.unregister(self._listener)
            self.call_later(ACCEPT_BACKOFF_S, self._wake_listener)

    def _wake_listener(self) -> None:
        if not self._accepting and not self._stopping:
            self._accepting = True
            self._sel.register(self._listener, _READ, "listener")

    def _expire(self, conn: Connection) -> None:
        if conn.handshake is not None:
            self.close(conn)

    def want_write(self, conn: Connection) -> None:
        if not conn.closed:
            self._sel.modify(conn.sock, _READ | _WRITE, conn)

    def _service(self, conn: Connection, events: int) -> None:
        if events & _WRITE and conn._flush() and not conn.closed:
            self._sel.modify(conn.sock, _READ, conn)
        if events & _READ and not conn.closed:
            self._read(conn)

    def _read(self, conn: Connection) -> bool:
        """One read, and the frames it completes dispatched; False once the socket had
        nothing to read or the connection closed."""
        try:
            data = conn.sock.recv(1 << 18)
        except (BlockingIOError, InterruptedError):
            return False
        except OSError:
            data = b""
        if not data:
            self.close(conn)
            return False
        conn.last_read = time.monotonic()
        try:
            for kind, payload in conn.reader.feed(data):
                if conn.handshake is not None:
                    self._handshake_step(conn, kind, payload)
                else:
                    self._on_frame(conn, kind, payload)
                if conn.closed:
                    return False
        except ProtocolError:
            self.close(conn)
        except Exception:
            print(f"simcluster: dropping {conn.role} {conn.ident} after an error:", file=sys.stderr)
            traceback.print_exc()
            self.close(conn)
        return not conn.closed

    def drain(self, conn: Connection, until: float) -> bool:
        """Read and dispatch what `conn`'s socket holds now, as `_service` would, without
        waiting for the selector: True once it held nothing more (or the connection closed),
        False if `until` (monotonic) came first. Loop thread only."""
        while self._read(conn):
            if time.monotonic() >= until:
                return False
        return True

    def _handshake_step(self, conn: Connection, kind: int, payload: bytes) -> None:
        reply, done = conn.handshake.on_frame(kind, payload)
        # WELCOME goes out before on_auth runs: on_auth may queue frames for the peer, and
        # the peer's handshake expects WELCOME first.
        conn.send_raw(reply)
        if done:
            conn.role, conn.ident = conn.handshake.role, conn.handshake.ident
            conn.handshake = None
            self._unauthenticated.pop(conn, None)
            conn.reader.limit = MAX_FRAME
            if not self._on_auth(conn):
                self.close(conn)

    def close(self, conn: Connection) -> None:
        """Close a connection (loop thread only); `on_close` runs for authenticated peers."""
        if conn.closed:
            return
        with conn._wlock:
            conn.closed = True
        self.conns.discard(conn)
        self._unauthenticated.pop(conn, None)
        try:
            self._sel.unregister(conn.sock)
        except (KeyError, ValueError):
            pass
        conn.sock.close()
        if conn.role:
            self._guarded(self._on_close, conn)


def _unauthenticated_cap() -> int:
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return MAX_UNAUTHENTICATED
    return max(8, min(MAX_UNAUTHENTICATED, soft // 4))
