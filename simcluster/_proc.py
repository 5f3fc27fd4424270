"""Process plumbing: parent-death signals, subreapers, killing a process tree, the factory.

Design note. Nothing may outlive the cluster, even when the driver is SIGKILLed, and nothing
a worker started may outlive the worker. Layers: (1) every process asks the kernel for a
signal when its parent dies (`PR_SET_PDEATHSIG`): the node factory towards the driver, a
supervisor (its own session and process group) towards the factory, a worker towards its
supervisor; (2) supervisors are child subreapers (`PR_SET_CHILD_SUBREAPER`), and so are
workers that have no cgroup of their own, so whatever a worker starts stays in the node's
tree - a double-forked daemon in a session of its own is re-parented to the worker (or, for
a worker in a cgroup, to the supervisor, which reaps such orphans as they die), never to init -
and `kill_descendants` can find all of it in /proc; (3) a supervisor kills its tree when its
driver goes away, and what a worker left behind when the worker exits; (4) the cluster kills
each node's tree on close; (5) where cgroup v2 can be written, each worker and all it starts
live in a cgroup of their own below the node's (`_cgroup.py`), killed at once through
`cgroup.kill`, which no fork outruns; the /proc walk is then only the fallback.

Hazards: PR_SET_PDEATHSIG fires when the parent *thread* ends, not the parent process, so
the driver starts the factory only from its event-loop thread, which lives as long as the
cluster, never from whatever thread called `add_node`. A process checks `getppid()` after
setting it, because a parent that died just before the call sends no signal. A worker must
be armed before it can be frozen (see `node.supervisor.Supervisor._start`). A tree is killed
in rounds (see `kill_descendants`) because its processes fork while /proc is read, and by
pidfd after checking the start time, because a pid read from /proc may be reused by then.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time

from . import _cgroup, procfs

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
_CLONE_NEWNET = 0x40000000
CGROUP_WAIT_S = 2.0  # SIGKILLed processes are gone in ms; one in D state can take longer
_libc = None


def _prctl(option: int, value: int, what: str) -> None:
    global _libc
    if not sys.platform.startswith("linux"):
        return  # best effort elsewhere; the connection-close path still cleans up
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    if _libc.prctl(option, value, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), f"prctl({what}) failed")


def set_pdeathsig(sig: int = signal.SIGKILL) -> None:
    _prctl(_PR_SET_PDEATHSIG, int(sig), "PR_SET_PDEATHSIG")


def become_subreaper() -> None:
    """Orphaned descendants of this process are re-parented to it (not to init)."""
    _prctl(_PR_SET_CHILD_SUBREAPER, 1, "PR_SET_CHILD_SUBREAPER")


def die_with_parent(expected_ppid: int, sig: int = signal.SIGKILL) -> None:
    """Ask for `sig` when the parent dies, then exit at once if the parent is already gone."""
    set_pdeathsig(sig)
    if os.getppid() != expected_ppid:
        os._exit(70)


def on_signal(sig: int, handler) -> None:
    """Run `handler()` on `sig` in this process only: a child forked before it resets the
    signal gets the default action instead of its parent's handler."""
    me = os.getpid()

    def handle(signum, _frame):
        if os.getpid() != me:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        handler()

    signal.signal(sig, handle)


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


def kill_descendants(roots, spare=(), sig: int = signal.SIGKILL,
                     max_rounds: int = 100) -> dict[int, str]:
    """Send `sig` to every descendant of the `roots` (not to the roots), except the subtrees
    of the `spare` pids; returns {pid: start time} of the processes signalled.

    Meant for roots that are alive subreapers (stopped will do), so that nothing leaves
    their trees while this runs. The tree is read from /proc, which is not a snapshot: a
    process may fork while it is read. So it goes in rounds until a round finds nobody not
    yet signalled. That ends it: after SIGKILL a process forks no more, and a child forked
    before then exists by the next round (the signal is pending before `kill` returns).
    Zombies are signalled too (harmless), because a thread-group leader that has exited
    shows as a zombie while its other threads still run.

    A walk reads every process on the machine, so a process that forks and exits in a loop
    (a new pid per hop) outruns it. But an orphan lands on its subreaper, a root, the
    moment its parent is gone: after each round the roots' own children (one small read
    each) are followed until none is new, which catches a hopper within microseconds. A
    caller that is one of the roots also reaps what it signalled as it dies: each hop
    leaves a zombie, and unreaped they would fill the pid space and slow every walk."""
    me = os.getpid()
    roots, spare = set(roots), set(spare)
    signalled: dict[int, str] = {}
    for _ in range(max_rounds):
        table = _process_table()
        kids: dict[int, list[int]] = {}
        for pid, (ppid, _start) in table.items():
            kids.setdefault(ppid, []).append(pid)
        todo = [k for r in roots for k in kids.get(r, ()) if k not in spare]
        new = []
        while todo:
            pid = todo.pop()
            todo += [k for k in kids.get(pid, ()) if k not in spare]
            if signalled.get(pid) != table[pid][1]:
                new.append(pid)
        if not new:
            # A round reads the table while a hopper may stay ahead of it, and the chase
            # finds an orphan only once its dying parents (the worker, a subreaper too) are
            # gone: under load they may still be dying. So once the signalled are dead,
            # the roots' children are read again; only a settled quiet round ends it.
            if sig != signal.SIGKILL:
                break
            before = set(signalled.items())
            _settle(signalled, SETTLE_S)
            _chase(roots, spare, sig, signalled, reap=me in roots)
            if set(signalled.items()) == before:
                break
            continue
        for pid in new:
            _signal_same(pid, table[pid][1], sig)
            signalled[pid] = table[pid][1]  # also if that failed: it is gone, or not ours
        _chase(roots, spare, sig, signalled, reap=me in roots)
    if me in roots:
        _reap_signalled(signalled)
    return signalled


#: how long a kill waits for what it SIGKILLed to die before its last look for orphans
SETTLE_S = 2.0


def _settle(signalled: dict[int, str], timeout_s: float) -> None:
    """Wait (bounded) until each signalled process is dead: gone, a zombie, or its pid another
    process's."""
    pending = list(signalled.items())
    deadline = time.monotonic() + timeout_s
    while pending and time.monotonic() < deadline:
        pending = [(pid, start) for pid, start in pending if procfs.start_time(pid) == start
                   and procfs.state(pid) not in ("Z", "X")]
        if pending:
            time.sleep(0.0005)


def _chase(roots, spare, sig: int, signalled: dict[int, str], reap: bool,
           max_turns: int = 10_000) -> None:
    """Signal the roots' direct children (not spared) until a turn finds none new. A pid
    signalled before is passed over unread: a root may hold hundreds of zombies, and a turn
    must stay shorter than a fork (a reused pid is for the next walk to find)."""
    for _ in range(max_turns):
        new = False
        for root in roots:
            for pid in children_of(root) or ():
                if pid in signalled or pid in spare:
                    continue
                start = procfs.start_time(pid)
                if start is not None:
                    _signal_same(pid, start, sig)
                    signalled[pid], new = start, True
        if reap:
            _reap_signalled(signalled)
        if not new:
            return


def _reap_signalled(signalled: dict[int, str]) -> None:
    """Reap those of the signalled processes that are this process's dead children (never
    a spared one: a supervisor's workers are reaped, and reported, by pid elsewhere)."""
    for pid in children_of(os.getpid()) or ():
        if pid in signalled:
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass


def children_of(pid: int) -> list[int] | None:
    """The children of `pid` (its main thread's: see `own_children`), None if unreadable."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children", "rb") as f:
            return [int(p) for p in f.read().split()]
    except OSError:
        return None


def own_children() -> list[int] | None:
    """The pids of this process's children, from /proc (None where the kernel lacks the file).

    For a single-threaded caller that reaps its children itself, e.g. a supervisor, this
    list is exact, though proc(5) warns the file may omit children: an omission needs a
    child to leave the list while the file is read, and a child leaves its parent's list
    only when reaped (a zombie stays). Re-parented orphans are appended, never inserted.
    It costs one read where a /proc walk reads every process on the machine."""
    return children_of(os.getpid())


def kill_trees(roots) -> None:
    """SIGKILL these subreapers (supervisors, each leading its process group) and everything
    below them, from outside. Each group is stopped first: its workers do nothing more from
    that instant (as with the single killpg this replaces), and the root neither exits nor
    reports while its tree dies, and stays alive to adopt orphans until all is signalled.
    A node with a cgroup (`_cgroup.py`) has all its workers' processes killed at once by
    it, and the cgroup is removed; the walk then finds only what is outside any cgroup."""
    roots = [r for r in roots if r]
    groups = [path for r in roots if (path := _cgroup.node_cgroup_of(r))]
    for root in roots:
        killpg(root, signal.SIGSTOP)
    for path in groups:
        _cgroup.kill(path)
    kill_descendants(roots)
    for root in roots:
        killpg(root, signal.SIGKILL)
    for path in groups:
        _cgroup.destroy(path, CGROUP_WAIT_S)
    _cgroup.sweep()  # and those of nodes that died before anyone could remove them


def reap(pids: dict[int, str], timeout_s: float) -> dict[int, str]:
    """Wait (polling, with a deadline) for these signalled descendants to die, reaping those
    that are, or become, children of this process; returns the ones not yet settled. A
    grandchild becomes our child when its dying parent is gone (we are its subreaper)."""
    deadline = time.monotonic() + timeout_s
    pending = dict(pids)
    while pending:
        for pid, start in list(pending.items()):
            try:
                done = os.waitpid(pid, os.WNOHANG)[0] == pid
            except ChildProcessError:  # not ours (yet, or any more)
                done = procfs.start_time(pid) != start
            if done:
                del pending[pid]
        if not pending or time.monotonic() > deadline:
            break
        time.sleep(0.001)
    return pending


def _process_table() -> dict[int, tuple[int, str]]:
    """{pid: (parent pid, start time)} for every process in /proc."""
    out = {}
    for name in os.listdir("/proc"):
        if name.isdigit() and (got := procfs.fields(name)) and len(got) > 19:
            out[int(name)] = (int(got[1]), got[19].decode())
    return out


def _signal_same(pid: int, start: str, sig: int) -> bool:
    """Signal `pid` only if it is still the process that started at `start`: the pidfd pins
    the process, the start time read after opening it proves which one it is."""
    try:
        fd = os.pidfd_open(pid)
    except (ProcessLookupError, PermissionError):
        return False
    try:
        if procfs.start_time(pid) != start:
            return False
        signal.pidfd_send_signal(fd, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False
    finally:
        os.close(fd)


def import_modules(modules) -> dict[str, str]:
    """Import each module not imported yet (a `preload` request, in the factory or a node's
    supervisor); {module: error} for those that failed, which stay unimported."""
    import importlib

    errors = {}
    for module in modules:
        if module in sys.modules:
            continue
        try:
            importlib.import_module(module)
        except BaseException as exc:  # noqa: BLE001 - reported to the caller as data
            errors[module] = f"{type(exc).__name__}: {exc}"
    return errors


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
