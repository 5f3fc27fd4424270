"""The run-folder lock on local and mounted file systems: `flock` on the storage marker.

Design note
-----------
What is locked: `<run>/.validate_storage_marker`, which every run folder has (Ray's layout)
and which is only ever written in place, never replaced, so its inode lives as long as the
folder. Locking a file that exists anyway leaves nothing behind: a dedicated lock file would
either stay in the folder after every fit or, removed on release, break mutual exclusion (a
waiter that opened the old inode can lock it while a newcomer locks a new file of the same
name; filelock keeps its Unix lock files for that reason).

Why flock (non-blocking, on a descriptor opened with `O_NOFOLLOW` and without `O_TRUNC`, so a
marker planted as a link is refused and never truncates what it points to): the kernel drops it when the owning process
dies, SIGKILL included, so a crashed owner never leaves a stale lock on a local disk; NFS
servers drop a dead client's locks when its lease expires (about 90 s). The owner record
(run_owner.OWNER_FILENAME) is written beside it only after the lock is held, and removed
before it is released, so a record found with the lock free is a dead owner's: it is taken
over with a warning.

Ordering hazard: a contender may find the lock held but no record yet (the owner is between
the two steps): it polls for the record briefly before reporting an owner it cannot name.
A file system without flock (ENOSYS: Lustre mounted without `-o flock`, some FUSE mounts)
cannot be locked this way: the fit runs unlocked, with a warning.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import time
import uuid

from reference.train._internal.storage import confine, fs_utils
from reference.train._internal.storage.run_owner import OWNER_FILENAME, RunLock, RunOwner

logger = logging.getLogger(__name__)

# How long a contender waits for the owner's record to appear before naming it unknown.
RECORD_WAIT_S = 2.0
_POLL_S = 0.02


class _Flock:
    """An exclusive `flock` on one open descriptor of the marker (read-write: NFS emulates
    flock with POSIX locks, which need a descriptor open for writing)."""

    def __init__(self, path: str):
        self._fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
        self.is_locked = False

    def try_acquire(self) -> bool:
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        self.is_locked = True
        return True

    def release(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)  # drops the lock
            self._fd, self.is_locked = -1, False


def _open_marker(marker: str) -> _Flock:
    try:
        return _Flock(marker)
    except OSError as e:
        if os.path.islink(marker):
            raise confine.planted(marker, "locking", marker) from e
        raise


class LocalRunLock(RunLock):
    """`flock` held on the run folder's marker while a fit owns the folder."""

    def __init__(self, lock: _Flock, run_dir: str, owner: RunOwner):
        self._lock = lock
        self._run_dir = run_dir
        self.owner = owner

    def release(self) -> None:
        if not self._lock.is_locked:
            return
        record = os.path.join(self._run_dir, OWNER_FILENAME)
        try:
            os.unlink(record)
        except FileNotFoundError:
            pass
        except OSError as e:  # never mask how the fit ended; the next owner replaces it
            logger.warning("Could not remove the owner record %r: %s", record, e)
        finally:
            self._lock.release()


def read_record(run_dir: str) -> RunOwner | None:
    try:
        with open(os.path.join(run_dir, OWNER_FILENAME), "rb") as f:
            return RunOwner.from_bytes(f.read())
    except OSError:
        return None


def _write_record(run_dir: str, owner: RunOwner) -> None:
    temp = os.path.join(run_dir, f"{fs_utils.TEMP_PREFIX}owner-{uuid.uuid4().hex}")
    try:
        with os.fdopen(confine.create_file(temp, exclusive=True), "wb") as f:
            f.write(owner.to_bytes())
        os.replace(temp, os.path.join(run_dir, OWNER_FILENAME))
    except BaseException:
        if os.path.lexists(temp):
            os.unlink(temp)
        raise


def acquire(run_dir: str, marker: str) -> tuple[RunLock | None, RunOwner | None, str]:
    """Try once to own `run_dir`. Returns (lock, None, "") when owned, (None, owner or None,
    "") when another process owns it, and (None, None, reason) when it cannot be locked."""
    lock = _open_marker(marker)
    deadline = time.monotonic() + RECORD_WAIT_S
    while True:
        try:
            if lock.try_acquire():
                break
        except OSError as e:
            lock.release()
            if e.errno in (errno.ENOSYS, errno.ENOLCK, errno.EOPNOTSUPP):
                return None, None, f"the file system of {marker!r} does not support flock"
            raise
        holder = read_record(run_dir)
        if holder is not None or time.monotonic() > deadline:
            lock.release()
            return None, holder, ""
        time.sleep(_POLL_S)  # the owner is between taking the lock and writing its record

    try:
        previous = read_record(run_dir)
        me = RunOwner.this_process()
        _write_record(run_dir, me)
    except BaseException:
        lock.release()
        raise
    if previous is not None:
        logger.warning(
            "Taking over run folder %r from %s, which ended without releasing it (killed?). "
            "Its unfinished writes are removed; the run resumes from its last registered "
            "checkpoint.", run_dir, previous.describe(),
        )
    return LocalRunLock(lock, run_dir, me), None, ""


__all__ = ["LocalRunLock", "acquire", "read_record"]
