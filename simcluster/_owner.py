"""Whether the process named in an owner record (a key, a history, a container label, a
netns state file) is alive, dead, or beyond this process's sight.

A record names its owner by pid, start time (`procfs.start_time`) and PID namespace (the
inode of `/proc/self/ns/pid`). A pid means something only in the namespace that gave it:
a driver inside `unshare --pid` or a container is pid 7 there, and /proc/7 here is some
other process. So an owner recorded in another PID namespace is `UNKNOWN`, never `DEAD`:
nothing of it is removed or taken over. A record that names no namespace (written before
they were recorded) is judged by pid and start time alone, as it always was.
"""

from __future__ import annotations

import os

from . import procfs

ALIVE, DEAD, UNKNOWN = "alive", "dead", "unknown"


def pid_namespace() -> str:
    """This process's PID namespace, as the decimal inode number; "" where unreadable."""
    try:
        return str(os.stat("/proc/self/ns/pid").st_ino)
    except OSError:
        return ""


def this_process() -> tuple[int, str, str]:
    """(pid, start time, PID namespace) of the calling process, for a record."""
    pid = os.getpid()
    return pid, procfs.start_time(pid) or "", pid_namespace()


def judge(pid: int, start: str, namespace: str = "") -> str:
    """`ALIVE`, `DEAD` or `UNKNOWN` (the owner lives in another PID namespace)."""
    if namespace and namespace != pid_namespace():
        return UNKNOWN
    return ALIVE if procfs.start_time(pid) == start else DEAD


__all__ = ["ALIVE", "DEAD", "UNKNOWN", "judge", "pid_namespace", "this_process"]
