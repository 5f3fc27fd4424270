"""Process plumbing: parent-death signals, process groups, /proc state, the node factory.

Design note. Nothing may outlive the cluster, even when the driver is SIGKILLed. Three
layers make sure of it: (1) every process asks the kernel for SIGKILL when its parent dies
(`PR_SET_PDEATHSIG`): the node factory towards the driver, a supervisor (its own session and
process group) towards the factory, a worker towards its supervisor; (2) a supervisor that
sees its driver connection close kills its process group; (3) the cluster kills each node's
process group on close and at exit.

Hazards: PR_SET_PDEATHSIG fires when the parent *thread* ends, not the parent process, so
the driver starts the factory only from its event-loop thread, which lives as long as the
cluster, never from whatever thread called `add_node`. A process checks `getppid()` after
setting it, because a parent that died just before the call sends no signal. And a worker
must be armed before it can be frozen (see `node.supervisor.Supervisor._start`).
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time

from . import procfs

_PR_SET_PDEATHSIG = 1
_CLONE_NEWNET = 0x40000000
_libc = None


def set_pdeathsig(sig: int = signal.SIGKILL) -> None:
    global _libc
    if not sys.platform.startswith("linux"):
        return  # best effort elsewhere; the connection-close path still cleans up
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    if _libc.prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")


def die_with_parent(expected_ppid: int) -> None:
    """Set the parent-death signal, then exit at once if the parent is already gone."""
    set_pdeathsig(signal.SIGKILL)
    if os.getppid() != expected_ppid:
        os._exit(70)


def enter_netns(path: str) -> None:
    """setns(2) into the network namespace at `path` (e.g. /run/netns/NAME); the calling
    thread moves, so call it in a single-threaded process (a freshly forked node)."""
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        if _libc.setns(fd, _CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns({path}) failed")
    finally:
        os.close(fd)


def killpg(pgid: int | None, sig: int) -> bool:
    if not pgid:
        return False
    try:
        os.killpg(pgid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def proc_state(pid: int) -> str | None:
    """The one-letter state from /proc/<pid>/stat ('T' = stopped), None if gone."""
    return procfs.state(pid)


def wait_states(pids, want_stopped: bool, timeout_s: float) -> bool:
    """Poll (with a deadline) until every pid is stopped (or running) or gone."""
    deadline = time.monotonic() + timeout_s
    pending = list(pids)
    while pending:
        pending = [p for p in pending
                   if (s := proc_state(p)) is not None and s != "Z" and (s in "tT") != want_stopped]
        if not pending:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.001)
    return True


def wait_dead(pids, timeout_s: float) -> bool:
    """Poll (with a deadline) until every pid is gone or a zombie: a SIGKILLed process has
    closed its sockets some time before it is really dead."""
    deadline = time.monotonic() + timeout_s
    pending = list(pids)
    while pending:
        pending = [p for p in pending if proc_state(p) not in (None, "Z")]
        if not pending or time.monotonic() > deadline:
            return not pending
        time.sleep(0.001)
    return True


def spawn_factory(events_fd: int) -> subprocess.Popen:
    """Start the node factory (`node/factory_process.py`) in a new session. Its boot config, secret
    included, goes through its stdin, so it never shows up in argv or /proc/<pid>/environ;
    `events_fd` is the write end of the pipe it reports on."""
    return subprocess.Popen(
        [sys.executable, "-c", "from simcluster.node.factory_process import main; main()"],
        stdin=subprocess.PIPE, pass_fds=(events_fd,), start_new_session=True, close_fds=True,
    )


def exit_fields(status: int) -> tuple[int | None, int | None]:
    """(code, signal) from a wait status: exactly one of them is set."""
    code = os.waitstatus_to_exitcode(status)
    return (None, -code) if code < 0 else (code, None)
