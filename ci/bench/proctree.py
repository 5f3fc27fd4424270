"""Process-tree helpers for the benchmark harness (Linux /proc only).

`descendants(pid)` walks the parent links of every process, `tree_rss_bytes(pid)` sums the
resident set of a process and all its descendants (shared pages are counted once per
process, as `ps` does), `kill_tree(pid)` SIGKILLs a process tree, and `PeakRss` samples a
tree's RSS from a forked sampler process.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import select
import signal
import time

from simcluster import procfs

_PAGE = os.sysconf("SC_PAGE_SIZE")
_PR_SET_CHILD_SUBREAPER = 36


def descendants(pid: int) -> list[int]:
    """Every live descendant of pid (children, grandchildren, ...), not pid itself."""
    children: dict[int, list[int]] = {}
    for child, parent in procfs.parents().items():
        children.setdefault(parent, []).append(child)
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), ()):
            out.append(child)
            todo.append(child)
    return out


def rss_bytes(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm", "rb") as f:
            return int(f.read().split()[1]) * _PAGE
    except (OSError, IndexError, ValueError):
        return 0


def tree_rss_bytes(pid: int) -> tuple[int, int]:
    """(RSS sum in bytes, number of processes) of pid and its descendants."""
    pids = [pid, *descendants(pid)]
    return sum(rss_bytes(p) for p in pids), len(pids)


def kill_tree(pid: int) -> None:
    """SIGKILL pid, its process group (when it leads one) and every descendant.

    Descendants are collected before anything is killed, so processes that started their own
    session (as simcluster's node supervisors do) are found through their parent link."""
    pids = descendants(pid)
    with contextlib.suppress(OSError):
        if os.getpgid(pid) == pid:
            os.killpg(pid, signal.SIGKILL)
    for p in [pid, *pids]:
        with contextlib.suppress(OSError):
            os.kill(p, signal.SIGKILL)


def become_subreaper() -> bool:
    """Make orphaned descendants re-parent to this process instead of init, so processes a
    benchmark child leaves behind can still be found (and killed) through `descendants`."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def reap_leftovers() -> int:
    """SIGKILL every remaining descendant of this process and reap the zombies; returns how
    many were killed. Call only while no subprocess.Popen of this process is running."""
    left = descendants(os.getpid())
    for p in left:
        with contextlib.suppress(OSError):
            os.kill(p, signal.SIGKILL)
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            if not descendants(os.getpid()):
                break
            time.sleep(0.05)
    return len(left)


def used_memory_bytes() -> int:
    """Memory in use on the whole machine: MemTotal - MemAvailable from /proc/meminfo."""
    fields = {}
    with open("/proc/meminfo") as f:
        for line in f:
            name, _, rest = line.partition(":")
            fields[name] = int(rest.split()[0]) * 1024
    return fields["MemTotal"] - fields["MemAvailable"]


class PeakRss:
    """Samples the RSS sum of a process tree every `interval_s` (the tree itself is walked
    again every `rescan_every` samples), and the machine's memory in use, from a forked
    sampler process (so the sampling does not compete with the measured
    process for its GIL). Enter it while the process has no other threads; the results are
    in `peak_bytes`, `peak_procs`, `samples`, `peak_used_bytes`, `base_used_bytes` and
    `sampler_cpu_s` (the sampler's own CPU time) after exit. The sampler does not count itself."""

    def __init__(self, root: int | None = None, interval_s: float = 0.05,
                 rescan_every: int = 5):
        self.root = os.getpid() if root is None else root
        self.interval_s = interval_s
        self.rescan_every = rescan_every
        self.sampler_cpu_s = 0.0
        self.peak_bytes = self.peak_procs = self.samples = 0
        self.peak_used_bytes = self.base_used_bytes = 0
        self._pid = 0
        self._stop_w = self._result_r = -1

    def _sample_loop(self, stop_r: int, result_w: int) -> None:
        me = os.getpid()
        peak = procs = samples = peak_used = 0
        pids: list[int] = []
        while True:
            if samples % self.rescan_every == 0:  # walking /proc is the costly part
                pids = [self.root, *(p for p in descendants(self.root) if p != me)]
            total = sum(rss_bytes(p) for p in pids)
            samples += 1
            if total > peak:
                peak, procs = total, sum(1 for p in pids if os.path.exists(f"/proc/{p}"))
            peak_used = max(peak_used, used_memory_bytes())
            ready, _, _ = select.select([stop_r], [], [], self.interval_s)
            if ready:
                break
        os.write(result_w, json.dumps([peak, procs, samples, peak_used]).encode())

    def __enter__(self) -> PeakRss:
        self.base_used_bytes = used_memory_bytes()
        stop_r, self._stop_w = os.pipe()
        self._result_r, result_w = os.pipe()
        self._pid = os.fork()
        if self._pid == 0:
            try:
                os.close(self._stop_w)
                os.close(self._result_r)
                self._sample_loop(stop_r, result_w)
            finally:
                os._exit(0)
        os.close(stop_r)
        os.close(result_w)
        return self

    def __exit__(self, *exc) -> None:
        os.close(self._stop_w)
        data = b""
        while chunk := os.read(self._result_r, 4096):
            data += chunk
        os.close(self._result_r)
        _, _, usage = os.wait4(self._pid, 0)
        self.sampler_cpu_s = usage.ru_utime + usage.ru_stime
        if data:
            self.peak_bytes, self.peak_procs, self.samples, self.peak_used_bytes = (
                json.loads(data))
