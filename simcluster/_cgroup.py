"""Cgroup v2 containment of a node's workers: a cgroup per node, one below it per worker.

Design note. Killing a process tree by walking /proc (`_proc.kill_descendants`) races with
the tree: a process that forks and exits in a loop, each child in a session of its own,
moves to a new pid faster than a walk of the machine's /proc can follow it. A cgroup does
not race: a child is born in its parent's cgroup and cannot leave it without write access
to another cgroup's `cgroup.procs`, and writing "1" to `cgroup.kill` SIGKILLs every member
of the cgroup and of its descendants, forks in flight included.

Layout: `<the supervisor's cgroup>/simcluster-<pid namespace>-<supervisor pid>/` for a node,
`w<n>/` below it for each worker. The supervisor stays outside, so that it can kill and
remove them; being a child of the supervisor's own cgroup, a node stays under whatever
limits hold for the cluster. The name follows from the supervisor's pid (unique among
live processes; the namespace's inode tells namespaces that share a cgroup tree apart),
so the driver finds a node's cgroup from the pid alone, and a cgroup whose supervisor is
gone is known to be stale: `sweep` kills and removes those.

Where there is no cgroup v2, no `cgroup.kill` (Linux < 5.14), or no write access (not
root, nothing delegated), `NodeCgroup.create` returns None, every other call answers
False, and the process-tree walk does the work alone.

Hazards: a cgroup can be removed only once it has no members and no child cgroups; it
loses its last member when that process has exited (zombies are not members), so
`destroy` polls `cgroup.events` with a deadline and reaps (a caller's `reap`) meanwhile.
"""

from __future__ import annotations

import os
import time

from . import procfs

PREFIX = "simcluster-"
_mount: list[str | None] = []  # [the cgroup2 mount point or None], once looked up


def _cgroup2_mount() -> str | None:
    if not _mount:
        found = None
        try:
            with open("/proc/self/mountinfo") as f:
                for line in f:
                    left, _, right = line.partition(" - ")
                    if right.split(" ", 1)[0] == "cgroup2":
                        found = left.split()[4]
                        break
        except OSError:
            pass
        _mount.append(found)
    return _mount[0]


def cgroup_of(pid: int | str = "self") -> str | None:
    """The folder of `pid`'s cgroup v2 (None: no v2 hierarchy, or the process is gone)."""
    mount = _cgroup2_mount()
    if mount is None:
        return None
    try:
        with open(f"/proc/{pid}/cgroup") as f:
            for line in f:
                if line.startswith("0::"):
                    path = os.path.join(mount, line[3:].strip().lstrip("/"))
                    return path if os.path.isdir(path) else None
    except OSError:
        pass
    return None


def _namespace() -> str:
    try:
        return str(os.stat("/proc/self/ns/pid").st_ino)
    except OSError:
        return "0"


def node_path(supervisor_pid: int, base: str) -> str:
    return os.path.join(base, f"{PREFIX}{_namespace()}-{supervisor_pid}")


def node_cgroup_of(supervisor_pid: int) -> str | None:
    """The node cgroup of a live supervisor, if it has one."""
    base = cgroup_of(supervisor_pid)
    path = node_path(supervisor_pid, base) if base else None
    return path if path and os.path.isdir(path) else None


def _write(path: str, text: str) -> bool:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        os.write(fd, text.encode())
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def kill(path: str) -> bool:
    """SIGKILL every process in the cgroup at `path` and in those below it."""
    return _write(os.path.join(path, "cgroup.kill"), "1")


def enter(path: str) -> bool:
    """Move the calling process into the cgroup at `path`."""
    return _write(os.path.join(path, "cgroup.procs"), "0")


def join(path: str) -> bool:
    """Move the calling process into the cgroup at `path`; True only if it is now there."""
    return enter(path) and cgroup_of("self") == path


def populated(path: str) -> bool:
    try:
        with open(os.path.join(path, "cgroup.events")) as f:
            return "populated 1" in f.read()
    except OSError:
        return False  # gone


def destroy(path: str, timeout_s: float, reap=None) -> bool:
    """Kill everything in the cgroup at `path`, wait (calling `reap()` between looks) until
    no member is left, and remove it with the cgroups below it; False if it is still there
    at the deadline (a member that takes long to die, e.g. in D state: try again later)."""
    deadline = time.monotonic() + timeout_s
    kill(path)
    while populated(path):
        if reap is not None:
            reap()
        if time.monotonic() > deadline:
            return False
        time.sleep(0.001)
    for top, dirs, _ in os.walk(path, topdown=False):
        for name in dirs:
            _rmdir(os.path.join(top, name))
    _rmdir(path)
    return not os.path.isdir(path)


def _rmdir(path: str) -> None:
    try:
        os.rmdir(path)
    except OSError:
        pass  # gone already, or still busy (`destroy` reports that)


def sweep(base: str | None = None, timeout_s: float = 1.0) -> None:
    """Kill and remove the node cgroups in `base` (default: this process's cgroup) whose
    supervisor is gone: what a supervisor killed before it could clean up left behind."""
    base = base or cgroup_of("self")
    if base is None:
        return
    mine = f"{PREFIX}{_namespace()}-"
    try:
        names = os.listdir(base)
    except OSError:
        return
    for name in names:
        pid = name[len(mine):]
        if name.startswith(mine) and pid.isdigit() and procfs.state(int(pid)) in (None, "Z"):
            destroy(os.path.join(base, name), timeout_s)


class NodeCgroup:
    """The cgroup of the node this supervisor runs, with a sub-cgroup per worker."""

    def __init__(self, path: str):
        self.path = path
        self._count = 0

    @classmethod
    def create(cls, timeout_s: float = 1.0) -> NodeCgroup | None:
        """This supervisor's node cgroup, new (None where cgroups cannot be used here)."""
        base = cgroup_of("self")
        if base is None:
            return None
        sweep(base, timeout_s)
        path = node_path(os.getpid(), base)
        if os.path.isdir(path):  # a stale one of a dead supervisor that had this pid
            destroy(path, timeout_s)
        try:
            os.mkdir(path, 0o755)
        except OSError:
            return None  # not writable here
        if not os.path.exists(os.path.join(path, "cgroup.kill")):  # Linux < 5.14
            _rmdir(path)
            return None
        return cls(path)

    def new_worker(self) -> str | None:
        """A new, empty cgroup under the node's for the next worker (made before the fork:
        the child joins it with `join` as its first act); None if that failed."""
        self._count += 1
        path = os.path.join(self.path, f"w{self._count}")
        try:
            os.mkdir(path, 0o755)
        except OSError:
            return None
        return path

    def destroy(self, timeout_s: float, reap=None) -> bool:
        return destroy(self.path, timeout_s, reap)
