"""A node: the supervisor process. It forks one child per worker and reports their exits.

Design note. The supervisor is forked once per node by the node factory (`node/factory_process.py`), so
it starts with everything a worker needs imported; it sits in its own session and process
group, connects to the driver and then waits for commands. A worker start is a `fork()` of
this warm, single-threaded process (fork is only safe without other threads, so the
supervisor never starts one); the function arrives cloudpickled inside the command and is
unpickled by the child, never by the supervisor.

Exits are event-driven: each child gets a pidfd in the same `select` as the driver socket,
so an exit is seen, reaped and reported within one loop turn. Commands from the driver:

    start {worker, name, env, blob}  -> started {worker, pid} | start_failed {worker, error}
    kill  {worker, signal}           (signal a worker; its exit is reported as usual)
    stop  {grace_s}                  SIGTERM every worker, SIGKILL what is left after
                                     grace_s, report the exits, say `bye` and exit
    child exit                       -> exited {worker, code, signal}

If the driver connection closes (the driver died), the supervisor kills its process group.
"""

from __future__ import annotations

import os
import selectors
import signal
import sys
import time
import traceback

from .._proc import exit_fields
from .._wire import (
    CTRL,
    MAX_FRAME,
    FrameReader,
    client_handshake,
    connect_socket,
    dumps,
    loads,
    send_frame,
)
from . import worker_process


def run_node(boot: dict) -> None:
    """Run a node in this (freshly forked) process: connect, authenticate, serve."""
    try:
        sock = connect_socket(boot["address"], boot["node_address"])
        client_handshake(sock, bytes.fromhex(boot["secret"]), "node",
                         f"{boot['node_id']} {os.getpid()}")
    except BaseException:
        traceback.print_exc()
        os._exit(70)
    Supervisor(sock, boot).run()


class Supervisor:
    def __init__(self, sock, boot: dict):
        self.sock = sock
        self.boot = boot
        self.sel = selectors.DefaultSelector()
        self.sel.register(sock, selectors.EVENT_READ, None)
        self.reader = FrameReader(MAX_FRAME)
        self.children: dict[int, tuple[str, int]] = {}   # pid -> (worker id, pidfd)
        self.pids: dict[str, int] = {}                   # worker id -> pid
        self.stop_at: float | None = None
        self.killed_rest = False

    def run(self) -> None:
        while True:
            timeout = None
            if self.stop_at is not None and not self.killed_rest:
                timeout = max(0.0, self.stop_at - time.monotonic())
            for key, _ in self.sel.select(timeout):
                if key.data is None:
                    self._read_driver()
                else:
                    self._reap(key.data)
            if self.stop_at is not None:
                if not self.children:
                    self._send({"op": "bye"})
                    os._exit(0)
                if not self.killed_rest and time.monotonic() >= self.stop_at:
                    self.killed_rest = True
                    for pid in self.children:
                        self._signal(pid, signal.SIGKILL)

    def _read_driver(self) -> None:
        try:
            data = self.sock.recv(1 << 20)
        except OSError:
            data = b""
        if not data:
            self._driver_gone()
        for _kind, payload in self.reader.feed(data):
            self._command(loads(payload))

    def _driver_gone(self) -> None:
        # Our whole process group (us and every worker) goes at once.
        os.killpg(os.getpgrp(), signal.SIGKILL)
        os._exit(1)

    def _command(self, msg: dict) -> None:
        op = msg["op"]
        if op == "start":
            self._start(msg)
        elif op == "kill":
            pid = self.pids.get(msg["worker"])
            if pid is not None:
                self._signal(pid, msg["signal"])
        elif op == "stop":
            self.stop_at = time.monotonic() + msg["grace_s"]
            for pid in self.children:
                self._signal(pid, signal.SIGTERM)

    def _start(self, msg: dict) -> None:
        worker = msg["worker"]
        for stream in (sys.stdout, sys.stderr):
            stream.flush()  # or the child would print our buffered output again
        me = os.getpid()
        armed_r, armed_w = os.pipe()
        try:
            pid = os.fork()
        except OSError as exc:
            os.close(armed_r)
            os.close(armed_w)
            self._send({"op": "start_failed", "worker": worker, "error": repr(exc)})
            return
        if pid == 0:
            os.close(armed_r)
            worker_process.child_main(self.boot, msg, me, armed_w, self._drop_fds)
        os.close(armed_w)
        # Wait until the child has its parent-death signal before saying `started`: a child
        # frozen (pause_node) or orphaned before that would outlive the cluster.
        os.read(armed_r, 1)
        os.close(armed_r)
        pidfd = os.pidfd_open(pid)
        self.children[pid] = (worker, pidfd)
        self.pids[worker] = pid
        self.sel.register(pidfd, selectors.EVENT_READ, pid)
        self._send({"op": "started", "worker": worker, "pid": pid})

    def _drop_fds(self) -> None:
        """In a new child: let go of everything that belongs to the supervisor."""
        self.sel.close()
        self.sock.close()  # a plain close: the supervisor's copy stays connected
        for _, pidfd in self.children.values():
            os.close(pidfd)
        self.children.clear()

    def _reap(self, pid: int) -> None:
        worker, pidfd = self.children.pop(pid)
        self.pids.pop(worker, None)
        self.sel.unregister(pidfd)
        os.close(pidfd)
        _, status = os.waitpid(pid, 0)
        code, sig = exit_fields(status)
        self._send({"op": "exited", "worker": worker, "code": code, "signal": sig})

    @staticmethod
    def _signal(pid: int, sig: int) -> None:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass  # already exited; its pidfd will report it

    def _send(self, msg: dict) -> None:
        try:
            send_frame(self.sock, CTRL, dumps(msg))
        except Exception:
            self._driver_gone()

