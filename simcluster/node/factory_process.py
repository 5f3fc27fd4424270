"""The node factory process: one warm interpreter that forks a supervisor per node.

Design note. Starting an interpreter and importing what a node needs costs ~100 ms of CPU
(seconds with a `preload` such as torch); forking a process that already did it costs ~2 ms
and shares its pages. So the driver starts this process once, and it forks each node's
supervisor, which then makes itself a session and process group of its own (`setsid`).

    driver -> factory (stdin, JSON lines)   first the boot config (address, secret, ...),
                                            then {"node_id", "node_address", "env"} per node,
                                            or {"op": "preload", "modules"}: import them
                                            before the next fork, so that nodes forked
                                            after start with them (not at once: a cluster
                                            that adds no node never pays for them here)
    factory -> driver (events fd, lines)    {"node_id", "pid"} | {"node_id", "error"} after
                                            a fork; {"pid", "code", "signal"} when a
                                            supervisor exits (reaped via its pidfd)

Parent-death chain (PR_SET_PDEATHSIG): the factory gets SIGTERM when the driver's event-loop
thread ends, each supervisor SIGTERM when the factory exits, each worker SIGKILL when its
supervisor does. SIGTERM, because a supervisor must kill its tree before it goes (see
`node/supervisor.py`), and the factory, before it exits (on that signal, or when stdin
closes: the driver is done), resumes every supervisor with SIGCONT, since a paused node
could not run its handler. The factory holds no state worth keeping. Single-threaded, like
the supervisors, because it forks.
"""

from __future__ import annotations

import importlib
import json
import os
import selectors
import signal
import sys

from .._proc import die_with_parent, enter_netns, exit_fields, import_modules, on_signal


def main() -> None:
    stdin = os.fdopen(0, "rb", buffering=0)
    boot = json.loads(_read_line(stdin))
    on_signal(signal.SIGTERM, lambda: os._exit(0))  # no nodes yet
    die_with_parent(boot["driver_pid"], signal.SIGTERM)
    sys.path[:] = boot["sys_path"] + [p for p in sys.path if p not in boot["sys_path"]]
    for module in boot.get("preload", ()):
        importlib.import_module(module)
    import_modules(boot.get("requested", ()))  # `preload()` requests: the nodes report failures
    from . import supervisor  # warm: every node needs it
    factory = Factory(stdin, os.fdopen(boot["events_fd"], "wb", buffering=0), boot, supervisor)
    on_signal(signal.SIGTERM, factory.leave)
    factory.run()


def _read_line(stream) -> bytes:
    line = b""
    while not line.endswith(b"\n"):
        chunk = stream.read(1)
        if not chunk:
            raise SystemExit(0)
        line += chunk
    return line


class Factory:
    def __init__(self, commands, events, boot: dict, supervisor_module):
        self.commands, self.events, self.boot = commands, events, boot
        self.supervisor = supervisor_module
        self.sel = selectors.DefaultSelector()
        self.sel.register(commands, selectors.EVENT_READ, None)
        self.buffer = b""
        self.pidfds: dict[int, int] = {}  # supervisor pid -> pidfd
        self.requested: list[str] = []  # `preload()` requests not imported here yet

    def run(self) -> None:
        while True:
            for key, _ in self.sel.select():
                if key.data is None:
                    self._read_commands()
                else:
                    self._reap(key.data)

    def _read_commands(self) -> None:
        data = os.read(self.commands.fileno(), 1 << 16)
        if not data:
            self.leave()  # the driver closed us: our nodes go with us (parent-death signal)
        self.buffer += data
        while b"\n" in self.buffer:
            line, self.buffer = self.buffer.split(b"\n", 1)
            msg = json.loads(line)
            if msg.get("op") == "preload":
                self.requested += msg["modules"]  # imported before the next fork
            else:
                self._spawn(msg)

    def leave(self):
        """Resume every node (a paused one could not act on its parent-death signal), exit."""
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        for pidfd in self.pidfds.values():
            try:
                signal.pidfd_send_signal(pidfd, signal.SIGCONT)
            except ProcessLookupError:
                pass
        os._exit(0)

    def _spawn(self, node: dict) -> None:
        if self.requested:  # a failure shows on the live nodes' replies to the request
            import_modules(self.requested)
            self.requested = []
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        me = os.getpid()
        try:
            pid = os.fork()
        except OSError as exc:
            self._tell({"node_id": node["node_id"], "error": repr(exc)})
            return
        if pid == 0:
            self._become_node(node, me)
        pidfd = os.pidfd_open(pid)
        self.pidfds[pid] = pidfd
        self.sel.register(pidfd, selectors.EVENT_READ, pid)
        self._tell({"node_id": node["node_id"], "pid": pid})

    def _become_node(self, node: dict, factory_pid: int) -> None:
        try:
            die_with_parent(factory_pid, signal.SIGTERM)  # handled from `run_node` on
            os.setsid()  # the node's own session and process group: killpg(pid) reaches it all
            if node.get("netns"):
                enter_netns(node["netns"])  # before connecting: the node lives in there
            self.sel.close()
            for pidfd in self.pidfds.values():
                os.close(pidfd)
            self.events.close()
            devnull = os.open(os.devnull, os.O_RDONLY)
            os.dup2(devnull, 0)
            os.close(devnull)
            os.environ.update(node["env"])
            boot = {**self.boot, **node}
        except BaseException:
            os._exit(70)
        self.supervisor.run_node(boot)
        os._exit(0)

    def _reap(self, pid: int) -> None:
        pidfd = self.pidfds.pop(pid)
        self.sel.unregister(pidfd)
        os.close(pidfd)
        _, status = os.waitpid(pid, 0)
        code, sig = exit_fields(status)
        self._tell({"pid": pid, "code": code, "signal": sig})

    def _tell(self, msg: dict) -> None:
        try:
            self.events.write((json.dumps(msg) + "\n").encode())
        except OSError:
            self.leave()  # the driver is gone
