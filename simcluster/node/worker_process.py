"""Inside a worker process: its identity, its channel to the driver, and how it runs `fn`.

Design note. A worker is a child forked by its node's supervisor (see `node/supervisor.py`).
Right after the fork it takes back the default SIGTERM and SIGCHLD (the supervisor's
handlers are not for it), asks for SIGKILL when the supervisor dies, becomes a child
subreaper unless it lives in a cgroup of its own (see below), drops the supervisor's
descriptors, opens its own authenticated connection to the driver (the
persistent socket its channel uses), and only then unpickles and runs `fn`. Its outcome -
the return value, the exception with its traceback, or a SystemExit code - goes back as one
RESULT frame, the last frame on that socket; the supervisor reports the exit status
separately, and the driver joins the two (see `driver/worker_ops.py`).

Orphans. What `fn` starts must end with the worker, and its zombies must not pile up while
the worker runs (a process that forks and exits in a loop makes one per hop; unreaped they
fill the machine's pid space within a minute). In a cgroup of its own, the cgroup keeps the
whole tree killable, so the worker is no subreaper: an orphan of its tree is re-parented to
the supervisor, which reaps it the moment it dies. Without one the worker is a subreaper,
because the supervisor's /proc walk needs the tree below it; then an orphan that exits
stays a zombie until the worker does. The worker never reaps anything itself: it runs user
code, and a `waitpid(-1)` here would steal a `Popen`'s or multiprocessing child's status.

The child leaves with `os._exit`: it must never unwind into the supervisor's loop it was
forked from, and it does not run the supervisor's atexit handlers. Threads `fn` started do
not keep a worker alive once `fn` returns, nor do the processes it started outlive it.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import sys
import traceback
from collections.abc import Callable

from .._errors import ChannelClosed, RemoteError
from .._proc import become_subreaper, die_with_parent
from .._wire import client_handshake, connect_socket, loads, pack_message
from .worker_channel import WorkerChannel


@dataclasses.dataclass(frozen=True)
class WorkerInfo:
    """Who this worker is: what `simcluster.worker.current()` returns."""

    worker_id: str
    name: str
    node_id: str
    node_address: str
    cluster_address: str
    pid: int
    supervisor_pid: int

    @property
    def id(self) -> str:
        return self.worker_id


_current: WorkerInfo | None = None
_channel: WorkerChannel | None = None


def current() -> WorkerInfo:
    """This worker's identity; raises RuntimeError outside a simcluster worker."""
    if _current is None:
        raise RuntimeError("simcluster.worker.current() is only available inside a function "
                           "started with Cluster.start_worker")
    return _current


def channel() -> WorkerChannel:
    """This worker's channel to the driver; raises RuntimeError outside a simcluster worker."""
    current()
    return _channel  # type: ignore[return-value]


def preemption() -> float | None:
    """The deadline (a `time.monotonic()` value) of a preemption notice for this worker's
    node, or None: none was given, or this is not a simcluster worker. The node is removed
    when the deadline passes; save what must survive before then."""
    if _channel is None:
        return None
    try:
        _channel.check_faults()
    except ChannelClosed:
        pass
    return _channel.preempt_deadline


def before_upload(path) -> None:
    """Call before uploading a checkpoint (a runtime must, for a plan's `fail_upload` /
    `slow_upload` to reach it): raises or sleeps as the plan says; a no-op outside a
    simcluster worker or without such a fault."""
    if _channel is not None:
        _channel.before_upload(os.fspath(path))


def check_faults() -> None:
    """Raise an error a fault plan injected into this worker, if one is pending (the
    channel's send/recv do this too); a no-op outside a simcluster worker."""
    if _channel is not None:
        _channel.check_faults()


def child_main(boot: dict, start: dict, supervisor_pid: int, armed_fd: int,
               drop_fds: Callable[[], None], subreaper: bool = True):
    """Entry point of a freshly forked worker; never returns. Writing to `armed_fd` tells
    the supervisor that this process now dies with it. `subreaper=False` where the worker
    is in a cgroup of its own: its orphans then go to the supervisor, which reaps them."""
    global _current, _channel
    try:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.set_wakeup_fd(-1)  # the supervisor's wake-up pipe, closed by drop_fds below
        die_with_parent(supervisor_pid)
        if subreaper:
            become_subreaper()
        os.write(armed_fd, b"1")
        os.close(armed_fd)
        drop_fds()
        os.environ.update(start["env"])
        info = WorkerInfo(start["worker"], start["name"], boot["node_id"], boot["node_address"],
                          boot["address"], os.getpid(), supervisor_pid)
        sock = connect_socket(boot["address"], boot["node_address"])
        client_handshake(sock, bytes.fromhex(boot["secret"]), "worker",
                         f"{info.worker_id} {info.pid}")
        _current, _channel = info, WorkerChannel(sock)
    except BaseException:
        traceback.print_exc()  # no channel to report on: stderr and a distinctive code
        _leave(70)
    try:
        if start.get("fn") is not None:  # a bulk start: the function is shared, pickled once
            fn, (args, kwargs) = loads(start["fn"]), loads(start["blob"])
        else:
            fn, args, kwargs = loads(start["blob"])
    except BaseException as exc:  # e.g. fn's module cannot be imported here
        outcome, code = ("error", exc, traceback.format_exc()), 1
    else:
        outcome, code = _run(fn, args, kwargs)
    try:
        payload = pack_message(outcome, outcome[0])
    except Exception as exc:
        outcome = ("error", RemoteError(f"the outcome of {_name(start)} could not be pickled: "
                                        f"{exc!r} (outcome: {outcome[:2]!r:.300})"), outcome[-1])
        payload, code = pack_message(outcome, "error"), 1
    try:
        _channel._send_result(payload)
    except ChannelClosed:
        pass  # the driver is gone; we are about to be killed anyway
    _leave(code)


def _run(fn, args, kwargs) -> tuple[tuple, int]:
    try:
        return ("ok", fn(*args, **kwargs), ""), 0
    except SystemExit as exc:
        code = exc.code
        if code is None:
            code = 0
        elif not isinstance(code, int):
            print(code, file=sys.stderr)
            code = 1
        return ("exit", code, ""), code & 0xFF
    except BaseException as exc:
        return ("error", exc, traceback.format_exc()), 1


def _name(start: dict) -> str:
    return f"worker {start['worker']} ({start['name']})"


def _leave(code: int):
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    os._exit(code)
