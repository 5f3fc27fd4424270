"""A process that hops pids: it forks, the parent exits, the child calls setsid, and so on,
so that it is never the same process for long, never in its parent's session, and leaves
a zombie per hop for its subreaper. Each hop carries a marker as its command name (kept
across fork, shown in /proc/<pid>/comm, also by zombies), which is how tests find them.
Run inside simcluster workers (a module of its own: a driver script can import it too)."""

from __future__ import annotations

import itertools
import multiprocessing
import os
import subprocess
import time

from simcluster import worker

LIFETIME_S = 15.0  # a hopper that escapes (a failing test) still ends by itself
_count = itertools.count()


def new_mark() -> str:
    return f"hop{os.getpid() % 100000}x{next(_count)}"  # comm holds 15 characters


def hop(mark: str, until: float, count_fd: int | None = None, min_hops: int = 0) -> None:
    """Become the hopper (never returns): it hops until `until` and at least `min_hops` times
    (a loaded machine hops slower), within LIFETIME_S; the last hop writes how many there
    were to `count_fd`, if given."""
    with open("/proc/self/comm", "w") as f:
        f.write(mark)
    hops, end = 0, time.time() + LIFETIME_S
    while (time.time() < until or hops < min_hops) and time.time() < end:
        try:
            if os.fork():
                os._exit(0)
        except OSError:
            time.sleep(0.01)
            continue
        os.setsid()
        hops += 1  # the count lives on in each new hop's copy of this memory
    if count_fd is not None:
        os.write(count_fd, str(hops).encode())
    os._exit(0)


def hop_beside(mark: str) -> None:
    """A worker that starts a hopper, says so, and runs on."""
    if os.fork() == 0:
        hop(mark, time.time() + LIFETIME_S)
    worker.channel().send("hopping")
    time.sleep(60)


def hop_and_wait_children(mark: str, seconds: float, min_hops: int = 0) -> dict:
    """A worker that starts a hopper for `seconds` (and `min_hops` hops), says so, and meanwhile waits for children
    of its own (`sh -c 'exit 7'` in a loop, then a multiprocessing child exiting with 3):
    their exit statuses, the number of hops, and the pid of the hopper's first hop."""
    r, w = os.pipe()
    first = os.fork()
    if first == 0:
        os.close(r)
        hop(mark, time.time() + seconds, w, min_hops)
    os.close(w)
    os.waitpid(first, 0)  # the first hop is ours; it exits as soon as it has forked
    worker.channel().send("hopping")
    until = time.time() + seconds
    codes = []
    while time.time() < until:
        codes.append(subprocess.run(["sh", "-c", "exit 7"]).returncode)
    child = multiprocessing.get_context("fork").Process(target=os._exit, args=(3,))
    child.start()
    child.join(10)
    with os.fdopen(r, "rb") as f:
        hops = f.read()  # EOF once the last hop is gone
    return {"popen": codes, "multiprocessing": child.exitcode, "hops": int(hops or 0)}


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
