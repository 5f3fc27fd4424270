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
    preload {id, modules}            -> preloaded {id, errors}: import them here, so that
                                     every worker forked after starts with them
    child exit                       -> exited {worker, code, signal}

Nothing a worker starts outlives it. The supervisor and each worker are child subreapers, so
a live worker's whole tree (double-forked daemons in their own sessions included) stays
below that worker, and when a worker exits its leftovers are re-parented to the supervisor.
Then every descendant of the supervisor outside the live workers' trees is a leftover of an
exited worker: the supervisor kills and reaps them *before* it reports the exit, so a new
attempt started on that report never runs beside the old attempt's processes.

The supervisor kills its whole tree and exits when its driver goes away: the driver
connection closes, or the parent-death signal arrives (SIGTERM, not SIGKILL, so that there
is a handler to do it; the factory resumes paused supervisors before it exits, or a frozen
one could not run the handler). Hazards: the handler may run at any point of the loop, so
it touches no state but /proc and ends in `os._exit`; a worker must not keep it (it resets
SIGTERM first thing, and `on_signal` falls back to the default action in a child that has
not yet); the reaping is by pid, never `waitpid(-1)`, which could steal a worker's status
from its pidfd.
"""

from __future__ import annotations

import os
import selectors
import signal
import sys
import time
import traceback

from .._proc import (
    become_subreaper,
    exit_fields,
    import_modules,
    kill_descendants,
    on_signal,
    own_children,
    reap,
)
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

LEFTOVER_WAIT_S = 2.0  # a worker's SIGKILLed leftovers die in ms; D state can take longer


def run_node(boot: dict) -> None:
    """Run a node in this (freshly forked) process: connect, authenticate, serve."""
    try:
        become_subreaper()
        on_signal(signal.SIGTERM, lambda: leave(1))
        sock = connect_socket(boot["address"], boot["node_address"])
        client_handshake(sock, bytes.fromhex(boot["secret"]), "node",
                         f"{boot['node_id']} {os.getpid()}")
    except BaseException:
        traceback.print_exc()
        os._exit(70)
    Supervisor(sock, boot).run()


def leave(code: int):
    """Kill every process below this one and exit (never returns)."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    kill_descendants([os.getpid()])
    os._exit(code)


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
        self.unreaped: dict[int, str] = {}               # leftovers not dead in time

    def run(self) -> None:
        while True:
            timeout = None
            if self.stop_at is not None and not self.killed_rest:
                timeout = max(0.0, self.stop_at - time.monotonic())
            exited = []
            for key, _ in self.sel.select(timeout):
                if key.data is None:
                    self._read_driver()
                else:
                    exited.append(key.data)
            if exited:
                self._reap(exited)
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
        leave(1)

    def _command(self, msg: dict) -> None:
        op = msg["op"]
        if op == "start":
            self._start(msg)
        elif op == "kill":
            pid = self.pids.get(msg["worker"])
            if pid is not None:
                self._signal(pid, msg["signal"])
        elif op == "preload":
            # Blocks this loop for the imports (once per module and node); exits that happen
            # meanwhile are reaped and reported right after.
            errors = import_modules(msg["modules"])
            self._send({"op": "preloaded", "id": msg["id"], "errors": errors})
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

    def _reap(self, pids: list[int]) -> None:
        """Workers that exited (their pidfds are readable): reap them, kill what they left
        behind (one /proc walk for all of them), then report each exit."""
        reports = []
        for pid in pids:
            worker, pidfd = self.children.pop(pid)
            self.pids.pop(worker, None)
            self.sel.unregister(pidfd)
            os.close(pidfd)
            _, status = os.waitpid(pid, 0)
            code, sig = exit_fields(status)
            reports.append({"op": "exited", "worker": worker, "code": code, "signal": sig})
        # Re-parented to us by the time a pidfd is readable (the kernel moves a dying
        # process's children before it notifies), so nothing escapes this walk.
        # Most workers leave nothing: then the children are the live workers, and the walk
        # of every process on the machine (quadratic over a group's exits) is skipped.
        kids = own_children()
        if kids is None or any(k not in self.children for k in kids):
            left = kill_descendants([os.getpid()], spare=self.children)
        else:
            left = {}
        # Earlier leftovers that would not die in time get another look, but no more wait.
        self.unreaped = {**reap(self.unreaped, 0.0), **reap(left, LEFTOVER_WAIT_S)}
        for msg in reports:
            self._send(msg)

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

