"""A process that hops pids: it forks, the parent exits, the child calls setsid, and so on,
so that it is never the same process for long, never in its parent's session, and leaves
a zombie per hop for its subreaper. Each hop carries a marker as its command name (kept
across fork, shown in /proc/<pid>/comm, also by zombies), which is how tests find them.
Run inside simcluster workers (a module of its own: a driver script can import it too)."""

from __future__ import annotations

import itertools
import os
import time

from simcluster import worker

LIFETIME_S = 15.0  # a hopper that escapes (a failing test) still ends by itself
_count = itertools.count()


def new_mark() -> str:
    return f"hop{os.getpid() % 100000}x{next(_count)}"  # comm holds 15 characters


def hop(mark: str, until: float) -> None:
    """Become the hopper (never returns)."""
    with open("/proc/self/comm", "w") as f:
        f.write(mark)
    while time.time() < until:
        try:
            if os.fork():
                os._exit(0)
        except OSError:
            time.sleep(0.01)
            continue
        os.setsid()
    os._exit(0)


def hop_beside(mark: str) -> None:
    """A worker that starts a hopper, says so, and runs on."""
    if os.fork() == 0:
        hop(mark, time.time() + LIFETIME_S)
    worker.channel().send("hopping")
    time.sleep(60)


def find(mark: str) -> dict[int, tuple[str, int]]:
    """{pid: (state, parent pid)} of every process, zombies included, marked `mark`."""
    out = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/comm") as f:
                if f.read().strip() != mark:
                    continue
            with open(f"/proc/{name}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out[int(name)] = (fields[0], int(fields[1]))
    return out


def running(mark: str, window_s: float = 0.3) -> set[int]:
    """Marked processes alive at a first look, or born within `window_s` after it (a hopper
    may be between two pids at the moment of any one look)."""
    first = find(mark)
    alive = {p for p, (state, _) in first.items() if state != "Z"}
    deadline = time.monotonic() + window_s
    while time.monotonic() < deadline:
        time.sleep(0.02)
        now = find(mark)
        alive |= {p for p, (state, _) in now.items() if state != "Z"} | (set(now) - set(first))
    return alive


def held_zombies(mark: str) -> dict[int, int]:
    """{zombie pid: parent} of the marked zombies that a process other than init holds."""
    return {p: ppid for p, (state, ppid) in find(mark).items() if state == "Z" and ppid != 1}
