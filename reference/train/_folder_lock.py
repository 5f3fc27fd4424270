"""Locks of local checkpoint copies: one `flock`ed file per folder, removed after use.

Design note
-----------
Where: `<tempdir>/_trainspec_lockfiles-<uid>`, created 0700 and refused (a PermissionError
naming it) unless it is a real folder of this user that no one else can write. A folder
shared by all users would belong to whoever made it first, lock out everyone else, and let
others plant files or hold our locks.

Removal: a lock file is unlinked by its holder before it lets go, and an acquirer keeps the
lock only if the file it locked is still the one at the path (same device and inode);
otherwise the holder removed it while we waited, and we open the path again. So two
processes never both believe they hold one path's lock, and no file outlives its last
holder. The order is the hazard: unlinking after unlocking would let a waiter lock the
removed file while a newcomer locks a fresh one.

Notes: a holder leaves a short note in the file before removing it (`COPIED` when a finished
copy is in the folder); a waiter that locked that file reads the note, which is how callers
who waited out a copy know they need not copy again. A file left at the path (its holder
was killed) carries its note to the next holder the same way. A caller that found the lock
held (`acquire(timeout=0)` raised) and then waits (`acquire()`) waits on the file it found
held, kept open in between: were it to open the path anew, a holder that let go in between
would have removed the file and its note, and the caller would copy a second time.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import stat
import tempfile
from pathlib import Path
from typing import Optional

import filelock

COPIED = "copied"
_DIR_PREFIX = "_trainspec_lockfiles"
_NOTE_MAX = 64


def lock_dir() -> str:
    """This user's lock folder, created if missing; PermissionError if it is not safe."""
    uid = os.getuid()
    path = os.path.join(tempfile.gettempdir(), f"{_DIR_PREFIX}-{uid}")
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != uid or st.st_mode & 0o077:
        kind = "a folder" if stat.S_ISDIR(st.st_mode) else "not a folder"
        raise PermissionError(
            f"The checkpoint lock folder {path!r} is {kind} owned by uid {st.st_uid} with "
            f"mode {stat.S_IMODE(st.st_mode):o}; it must be a folder of uid {uid} (this "
            "process) that no other user can write (0700), or another user could plant or "
            f"hold its lock files. Remove it (`rm -r {path}`) or point TMPDIR at a folder "
            "of your own.")
    return path


def lock_path(local_dir: str) -> str:
    """The lock file of `local_dir`, named by the folder's resolved path."""
    digest = hashlib.sha256(str(Path(local_dir).resolve()).encode("utf-8")).hexdigest()
    return os.path.join(lock_dir(), f"{digest}.lock")


class FolderLock:
    """An exclusive lock on one local folder, between threads and processes of this user.

    `acquire(timeout=0)` raises `filelock.Timeout` when another holder has it (keeping
    that holder's file open, so that an `acquire()` right after waits on it and reads its
    note however soon the holder lets go; `release()` closes it otherwise); `acquire()`
    waits. After acquiring, `note` is what the holder we waited out (or a killed
    one) left; `release(note)` leaves a note for those waiting on us.
    """

    def __init__(self, local_dir: str):
        self.path = lock_path(local_dir)
        self.note = ""
        self._fd: Optional[int] = None
        self._held_elsewhere: Optional[int] = None

    @property
    def is_locked(self) -> bool:
        return self._fd is not None

    def acquire(self, timeout: Optional[float] = None) -> FolderLock:
        if timeout not in (None, 0):
            raise ValueError(f"FolderLock.acquire(timeout={timeout!r}): 0 or None only")
        if self._fd is not None:
            raise RuntimeError(f"{self.path} is already held by this FolderLock")
        mode = fcntl.LOCK_EX | (fcntl.LOCK_NB if timeout == 0 else 0)
        waited = ""
        while True:
            # the file a failed acquire(timeout=0) found held, if any: waiting on that very
            # file reads its holder's note, which a file opened anew after the holder let go
            # (and removed it) would not hold
            fd, self._held_elsewhere = self._held_elsewhere, None
            if fd is None:
                fd = os.open(self.path,
                             os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, mode)
            except OSError as e:
                if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                    self._held_elsewhere = fd  # kept for a later acquire() (or release())
                    raise filelock.Timeout(self.path) from None
                os.close(fd)
                raise
            note = os.pread(fd, _NOTE_MAX, 0).decode("ascii", "replace").strip()
            if self._is_current(fd):
                self._fd = fd
                self.note = note or waited
                return self
            # Its holder removed it while we waited: remember what it left, lock the new one.
            os.close(fd)
            waited = note

    def _is_current(self, fd: int) -> bool:
        try:
            at_path = os.stat(self.path, follow_symlinks=False)
        except FileNotFoundError:
            return False
        held = os.fstat(fd)
        return (at_path.st_dev, at_path.st_ino) == (held.st_dev, held.st_ino)

    def release(self, note: str = "") -> None:
        """Let go of the lock, leaving `note`; on a lock not held, close the file a failed
        acquire(timeout=0) kept open (for a caller that will not wait after all)."""
        if self._held_elsewhere is not None:
            os.close(self._held_elsewhere)
            self._held_elsewhere = None
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            os.ftruncate(fd, 0)
            if note:
                os.pwrite(fd, note.encode("ascii"), 0)
            try:
                os.unlink(self.path)  # still locked: see the design note
            except FileNotFoundError:
                pass
        finally:
            os.close(fd)  # drops the flock

    def __del__(self) -> None:
        if self._held_elsewhere is not None:  # a failed acquire(timeout=0), never followed up
            os.close(self._held_elsewhere)

    def __enter__(self) -> FolderLock:
        return self.acquire()

    def __exit__(self, *exc_info) -> None:
        self.release()


__all__ = ["COPIED", "FolderLock", "lock_dir", "lock_path"]
