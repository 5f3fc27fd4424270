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
    start_many {fn, workers: [{worker, name, env, blob}]}
                                     -> started_many {started: [[worker, pid]],
                                     failed: [[worker, error]]}: every worker of a group on
                                     this node in one round; `fn` (pickled once) is called
                                     with each worker's own (args, kwargs) `blob`
    kill  {worker, signal}           (signal a worker; its exit is reported as usual)
    stop  {grace_s}                  SIGTERM every worker, SIGKILL what is left after
                                     grace_s, report the exits, say `bye` and exit
    preload {id, modules}            -> preloaded {id, errors}: import them here, so that
                                     every worker forked after starts with them
    child exit                       -> exited {worker, code, signal}

Nothing a worker starts outlives it, and its leftovers are killed and reaped *before* its
exit is reported, so a new attempt started on that report never runs beside the old
attempt's processes. Where cgroup v2 can be written, each worker is in a cgroup of its own
below the node's (`_cgroup.py`; the child joins it before anything else runs): all it ever
starts is born in there and is killed through that cgroup, which a process forking in a loop
cannot outrun as it can a /proc walk; the node's cgroup is removed when the node stops or
leaves. Such a worker is no subreaper: the orphans of its tree (a double-forked daemon, each
hop of a process that forks and exits in a loop) are re-parented to the supervisor, itself
a subreaper, which reaps every child that is not a worker as it dies (SIGCHLD wakes the
loop through a pipe, `signal.set_wakeup_fd`), so no zombies pile up under a live worker.
A worker without a cgroup (none here, or its own could not be made) is a subreaper, so that
its whole tree stays below it; once it exits, what it left is re-parented to the supervisor,
and every descendant outside the live workers' trees and cgroups is one of those leftovers,
found by a /proc walk. Such a worker holds its orphans' zombies until it exits.

The supervisor kills its whole tree and exits when its driver goes away: the driver
connection closes, or the parent-death signal arrives (SIGTERM, not SIGKILL, so that there
is a handler to do it; the factory resumes paused supervisors before it exits, or a frozen
one could not run the handler). Hazards: the handler may run at any point of the loop, so
it touches no state but /proc and the node's cgroup, and ends in `os._exit`; a worker must
not keep it (it resets SIGTERM first thing, and `on_signal` falls back to the default action
in a child that has not yet); the reaping is by pid, never `waitpid(-1)`, which could steal
a worker's status from its pidfd (except in `leave`, after which nothing is reported); a
worker forked but not yet in `children` is never reaped as an orphan, because reaping runs
only in the loop, never in a signal handler (SIGCHLD's only writes to the wake-up pipe).
"""

from __future__ import annotations

import gc
import os
import selectors
import signal
import sys
import time
import traceback

from .. import _cgroup
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
from ..procfs import fields
from . import worker_process

LEFTOVER_WAIT_S = 2.0  # a worker's SIGKILLed leftovers die in ms; D state can take longer
_node: _cgroup.NodeCgroup | None = None  # this node's cgroup, where cgroups can be used


def run_node(boot: dict) -> None:
    """Run a node in this (freshly forked) process: connect, authenticate, serve."""
    global _node
    try:
        become_subreaper()
        on_signal(signal.SIGTERM, lambda: leave(1))
        _node = _cgroup.NodeCgroup.create()
        sock = connect_socket(boot["address"], boot["node_address"])
        client_handshake(sock, bytes.fromhex(boot["secret"]), "node",
                         f"{boot['node_id']} {os.getpid()}")
    except BaseException:
        traceback.print_exc()
        leave(70)  # removes the cgroup it may have made
    Supervisor(sock, boot).run()


def leave(code: int):
    """Kill every process below this one, remove the node's cgroup, exit (never returns)."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        if _node is not None:
            # Reaps with waitpid(-1): nothing is reported any more, so no status is stolen.
            _node.destroy(LEFTOVER_WAIT_S, reap=_reap_any)
        kill_descendants([os.getpid()])
    finally:
        os._exit(code)


def _reap_any() -> None:
    try:
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass
    except ChildProcessError:
        pass


def _children() -> list[int]:
    """This process's children: one read of /proc, or a scan of it where the kernel lacks
    the `children` file."""
    kids = own_children()
    if kids is None:
        me = os.getpid()
        kids = [int(name) for name in os.listdir("/proc")
                if name.isdigit() and (got := fields(name)) and len(got) > 1
                and int(got[1]) == me]
    return kids


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
        self.cgroups: dict[int, str | None] = {}         # pid -> the worker's cgroup
        self.stale: list[str] = []                       # worker cgroups not empty in time
        self.arming: list[int] = []                      # in a new child: siblings' pipes
        # SIGCHLD (an orphan died) wakes the select through this pipe; the handler does nothing
        # else, and with SA_RESTART (siginterrupt False) interrupts no other call.
        self.wake_r, self.wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self.sel.register(self.wake_r, selectors.EVENT_READ, "sigchld")
        signal.set_wakeup_fd(self.wake_w, warn_on_full_buffer=False)
        on_signal(signal.SIGCHLD, lambda: None)
        signal.siginterrupt(signal.SIGCHLD, False)

    def run(self) -> None:
        while True:
            timeout = None
            if self.stop_at is not None and not self.killed_rest:
                timeout = max(0.0, self.stop_at - time.monotonic())
            exited, orphans = [], False
            for key, _ in self.sel.select(timeout):
                if key.data is None:
                    self._read_driver()
                elif key.data == "sigchld":
                    self._drain_wake()
                    orphans = True
                else:
                    exited.append(key.data)
            if exited:
                self._reap(exited)  # reaps orphans too
            elif orphans:
                self._reap_orphans()
            if self.stop_at is not None:
                if not self.children:
                    if _node is not None:
                        _node.destroy(LEFTOVER_WAIT_S, reap=self._reap_orphans)
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
            started, failed = self._start_many([msg])
            if started:
                self._send({"op": "started", "worker": started[0][0], "pid": started[0][1]})
            else:
                self._send({"op": "start_failed", "worker": failed[0][0], "error": failed[0][1]})
        elif op == "start_many":
            shared = {"fn": msg["fn"]} if msg.get("fn") is not None else {}
            started, failed = self._start_many([{**w, **shared} for w in msg["workers"]])
            self._send({"op": "started_many", "started": started, "failed": failed})
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

    def _start_many(self, msgs: list[dict]) -> tuple[list, list]:
        """Fork one worker per start message, then wait for all of them to arm their
        parent-death signal: the forks do not wait for each other's children to run.
        Returns ([[worker, pid]], [[worker, error]])."""
        for stream in (sys.stdout, sys.stderr):
            stream.flush()  # or the child would print our buffered output again
        # Objects that exist now are never collected in a child: its collector then does
        # not write to (and so copy) every page of the interpreter it shares with us.
        gc.freeze()
        me = os.getpid()
        forked, failed = [], []
        for msg in msgs:
            armed_r, armed_w = os.pipe()
            cgroup = _node.new_worker() if _node is not None else None
            try:
                pid = os.fork()
            except OSError as exc:
                os.close(armed_r)
                os.close(armed_w)
                if cgroup:
                    _cgroup.destroy(cgroup, 0.0)
                failed.append([msg["worker"], repr(exc)])
                continue
            if pid == 0:
                # First thing: all the worker will ever start is born in there. In it, the
                # worker needs to be no subreaper, and its orphans are ours to reap as they die.
                contained = bool(cgroup) and _cgroup.join(cgroup)
                os.close(armed_r)
                self.arming = [fd for _, fd, _ in forked]
                worker_process.child_main(self.boot, msg, me, armed_w, self._drop_fds,
                                          subreaper=not contained)
            os.close(armed_w)
            forked.append((pid, armed_r, (msg["worker"], cgroup)))
        started = []
        for pid, armed_r, (worker, cgroup) in forked:
            # Wait until the child has its parent-death signal before saying `started`: a
            # child frozen (pause_node) or orphaned before that would outlive the cluster.
            os.read(armed_r, 1)
            os.close(armed_r)
            if cgroup and _cgroup.cgroup_of(pid) != cgroup:  # it could not enter: walks find it
                _cgroup.destroy(cgroup, 0.0)
                cgroup = None
            self.cgroups[pid] = cgroup
            pidfd = os.pidfd_open(pid)
            self.children[pid] = (worker, pidfd)
            self.pids[worker] = pid
            self.sel.register(pidfd, selectors.EVENT_READ, pid)
            started.append([worker, pid])
        return started, failed

    def _drain_wake(self) -> None:
        try:
            while os.read(self.wake_r, 4096):
                pass
        except BlockingIOError:
            pass

    def _drop_fds(self) -> None:
        """In a new child: let go of everything that belongs to the supervisor."""
        self.sel.close()
        self.sock.close()  # a plain close: the supervisor's copy stays connected
        os.close(self.wake_r)
        os.close(self.wake_w)
        for fd in self.arming:  # the read ends of siblings forked in the same round
            os.close(fd)
        for _, pidfd in self.children.values():
            os.close(pidfd)
        self.children.clear()

    def _reap(self, pids: list[int]) -> None:
        """Workers that exited (their pidfds are readable): reap them, kill what they left
        behind (one /proc walk for all of them), then report each exit."""
        reports, cgroups = [], []
        for pid in pids:
            worker, pidfd = self.children.pop(pid)
            self.pids.pop(worker, None)
            self.sel.unregister(pidfd)
            os.close(pidfd)
            _, status = os.waitpid(pid, 0)
            code, sig = exit_fields(status)
            reports.append({"op": "exited", "worker": worker, "code": code, "signal": sig})
            cgroups.append(self.cgroups.pop(pid, None))
        # A worker's cgroup holds all it left behind, however it forked: killed at once.
        # One not empty in time (D state) is tried again at the next exit, without waiting.
        self.stale = [p for p in self.stale if not _cgroup.destroy(p, 0.0, self._reap_orphans)]
        self.stale += [p for p in cgroups
                       if p and not _cgroup.destroy(p, LEFTOVER_WAIT_S, self._reap_orphans)]
        self._reap_orphans()  # the last ones died as the cgroup emptied
        left: dict[int, str] = {}
        if None in cgroups:  # a worker without a cgroup, a subreaper: its leftovers are ours
            # Re-parented to us by the time a pidfd is readable (the kernel moves a dying
            # process's children before it notifies), so nothing escapes this walk. Spared:
            # the live workers and the orphans of those in cgroups (their daemons); one such
            # orphan made while the walk runs is not told apart (a node whose cgroups work
            # only for some of its workers). Most workers leave nothing: then the walk of
            # every process on the machine (quadratic over a group's exits) is skipped.
            kids = _children()
            spare = self._spared(kids)
            if any(k not in spare for k in kids):
                left = kill_descendants([os.getpid()], spare=spare)
        # Earlier leftovers that would not die in time get another look, but no more wait.
        self.unreaped = {**reap(self.unreaped, 0.0), **reap(left, LEFTOVER_WAIT_S)}
        for msg in reports:
            self._send(msg)

    def _spared(self, kids) -> set[int]:
        """The live workers, and those of `kids` in a live worker's cgroup."""
        live = {path for path in self.cgroups.values() if path}
        return set(self.children) | {k for k in kids
                                     if live and k not in self.children
                                     and _cgroup.cgroup_of(k) in live}

    def _reap_orphans(self) -> None:
        """Reap dead children that are not workers: orphans re-parented to this subreaper
        (by pid, never waitpid(-1), which could take a live worker's status)."""
        for pid in _children():
            if pid not in self.children:
                try:
                    os.waitpid(pid, os.WNOHANG)
                except ChildProcessError:
                    pass

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

