"""Where a suite run keeps its temporary files: in memory where the machine has room.

The checks create and delete thousands of small files and folders (workspaces, journals,
checkpoints, Hypothesis examples of folder trees). On a disk file system each deletion can
cost milliseconds (ext4 mounted with `discard` trims as it deletes: 3 ms per `rmdir`
measured on CI's machine kind, against 0.01 ms on tmpfs), which the run then spends
waiting. So, when the user has not chosen a temporary folder (`TMPDIR` unset), the suite
sets `TMPDIR` to a folder of this user's own in /dev/shm, if that is a tmpfs with at least
`MIN_FREE_BYTES` free; the implementation's processes, started afterwards, inherit it. Set
`TMPDIR` to keep the files elsewhere.

The folder is made 0700 and used only if it is a real folder (no link) owned by this user
that no other user can write to; anything else leaves `TMPDIR` as it was. Each run takes a
folder of its own inside it, `run-XXXX`, holding an flock on its `.lock` while it lives,
and removes it when it exits (`release`, at exit), leaving nothing in memory; a run that was killed
before it could is removed by the next one (its lock is free). With
`TRAINSPEC_KEEP_WORKSPACES=1` the run's folder stays, its lock file gone.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import os
import shutil
import stat
import sys
import tempfile

#: where the in-memory folder goes (a tmpfs on Linux)
SHM = "/dev/shm"
#: the least free space /dev/shm must have (a container's default of 64 MB is too little)
MIN_FREE_BYTES = 2 << 30
#: tmpfs's file-system type as /proc/self/mounts names it
_TMPFS = "tmpfs"


def _is_tmpfs(path: str) -> bool:
    try:
        with open("/proc/self/mounts") as f:
            mounts = [line.split() for line in f]
    except OSError:
        return False
    found = [m for m in mounts if len(m) > 2 and (path == m[1] or path.startswith(
        m[1].rstrip("/") + "/"))]
    return bool(found) and max(found, key=lambda m: len(m[1]))[2] == _TMPFS


def memory_scratch(shm: str = SHM, min_free: int = MIN_FREE_BYTES) -> str | None:
    """This user's folder in `shm` (made if missing), or None where `shm` is no tmpfs, has
    less than `min_free` bytes free, or the folder is not safely this user's alone."""
    if not os.path.isdir(shm) or not _is_tmpfs(shm):
        return None
    try:
        st = os.statvfs(shm)
    except OSError:
        return None
    if st.f_bavail * st.f_frsize < min_free:
        return None
    folder = os.path.join(shm, f"trainspec-{os.getuid()}")
    try:
        os.mkdir(folder, 0o700)
    except FileExistsError:
        pass
    except OSError:
        return None
    try:
        info = os.lstat(folder)
    except OSError:
        return None
    if (not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid()
            or info.st_mode & 0o077):
        return None
    return folder


#: TRAINSPEC_KEEP_WORKSPACES (conformance.scenarios.KEEP_ENV): "1" keeps the run's folder
KEEP_ENV = "TRAINSPEC_KEEP_WORKSPACES"
_run: tuple[int, str, int] | None = None  # (pid, this run's folder, its .lock's descriptor)


def use_memory_scratch() -> str | None:
    """Point `TMPDIR` (and this process's `tempfile`) at a new run folder in
    `memory_scratch()` unless `TMPDIR` is set already (as it is in the processes a run
    starts); returns that folder, or None when nothing changed."""
    global _run
    if os.environ.get("TMPDIR"):
        return None
    base = memory_scratch()
    if base is None:
        return None
    remove_stale_runs(base)
    folder = tempfile.mkdtemp(prefix="run-", dir=base)
    lock = os.path.join(folder, ".lock")
    fd = os.open(lock + ".new", os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
                 | os.O_NOFOLLOW, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    os.rename(lock + ".new", lock)  # seen by `remove_stale_runs` only once locked
    _run = (os.getpid(), folder, fd)
    # at exit, after what registered later (the suite's workspaces remove themselves)
    atexit.register(release)
    os.environ["TMPDIR"] = folder
    tempfile.tempdir = None  # computed again from TMPDIR at its next use
    return folder


def release() -> None:
    """End this run's use of its folder: remove it (or, with TRAINSPEC_KEEP_WORKSPACES=1,
    leave it without its lock file and say where it is)."""
    global _run
    if _run is None or _run[0] != os.getpid():
        return
    _, folder, fd = _run
    _run = None
    if os.environ.get(KEEP_ENV) == "1":
        os.unlink(os.path.join(folder, ".lock"))
        print(f"trainspec: temporary files kept in {folder}", file=sys.stderr)
    else:
        shutil.rmtree(folder, ignore_errors=True)
    os.close(fd)


def remove_stale_runs(base: str) -> list[str]:
    """Remove the run folders in `base` whose run has ended (their `.lock` is free); returns
    them. A folder without a lock file (kept, or being made) is left alone."""
    removed = []
    for name in os.listdir(base):
        folder = os.path.join(base, name)
        if not name.startswith("run-"):
            continue
        try:
            fd = os.open(os.path.join(folder, ".lock"), os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            with contextlib.suppress(BlockingIOError):
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                shutil.rmtree(folder, ignore_errors=True)
                removed.append(folder)
        finally:
            os.close(fd)
    return removed
