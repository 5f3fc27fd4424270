"""Where a cluster keeps what outlives it: histories in a per-user state folder, bounded.

A cluster's history goes where `history_path=` says; without one, to a new file in

    $SIMCLUSTER_STATE_DIR/history            when that variable is set, else
    $XDG_STATE_HOME/simcluster/history       else ~/.local/state/simcluster/history

named `<yyyymmdd-hhmmss>-<pid>-<start time>-ns<PID namespace>.jsonl` after the process
that writes it. Never the temp directory: nothing cleans that. The folder is bounded
instead: each time a cluster starts a history there, it first removes histories older than
`MAX_AGE_S`, then the oldest (by last write) until at most `MAX_FILES - 1` remain and they
hold at most `MAX_BYTES` together. A history whose writer is still alive (its pid with that
start time) is never removed; one whose writer lives in another PID namespace (a container
sharing this home) only once it is older than `MAX_AGE_S`; files not named like ours (a
name without `-ns...` is one written before namespaces were recorded) are left alone.

The folder, and every folder above it, must be one that no other user can change
(`simcluster._private_dir`: owned by root or this user, not writable by others unless
sticky; the history folder itself this user's, writable by nobody else; made 0700), and the file is made with
O_CREAT|O_EXCL|O_NOFOLLOW through the folder's descriptor: nothing is created through a
link. An explicit `history_path=` is opened with O_NOFOLLOW: a symlink there is refused.
"""

from __future__ import annotations

import errno
import os
import re
import stat
import time
from pathlib import Path

from . import _owner
from ._private_dir import UnsafeFolderError, open_private

MAX_FILES = 100
MAX_BYTES = 200 * 1024 * 1024
MAX_AGE_S = 7 * 24 * 3600
_NAME = re.compile(r"^\d{8}-\d{6}-(\d+)-(\d+)(?:-ns(\d+))?(?:-\d+)?\.jsonl$")
_CREATE = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


_FIX = "pass `history_path=` (`--history`), or set SIMCLUSTER_STATE_DIR to a folder of yours"


def state_dir() -> Path:
    if os.environ.get("SIMCLUSTER_STATE_DIR"):
        return Path(os.environ["SIMCLUSTER_STATE_DIR"])
    if os.environ.get("XDG_STATE_HOME"):
        return Path(os.environ["XDG_STATE_HOME"]) / "simcluster"
    home = os.path.expanduser("~")
    if not os.path.isabs(home):  # no HOME and no passwd entry
        raise OSError(f"this user has no home folder for simcluster's histories: {_FIX}")
    return Path(home) / ".local" / "state" / "simcluster"


def create_history() -> tuple[Path, int]:
    """A fresh history file in the state folder, after pruning it: (its path, a descriptor
    open for appending). The file is new (O_EXCL), 0600, and not made through a link."""
    folder = state_dir() / "history"
    try:
        dir_fd = open_private(folder, what="histories", fix=_FIX, readable=True)
    except UnsafeFolderError:
        raise
    except OSError as exc:
        raise OSError(exc.errno, f"cannot create the history folder {folder} ({exc}): "
                                 f"{_FIX}") from None
    try:
        prune(folder, dir_fd=dir_fd)
        me, start, namespace = _owner.this_process()
        stem = f"{time.strftime('%Y%m%d-%H%M%S')}-{me}-{start}"
        stem += f"-ns{namespace}" if namespace else ""
        for n in range(1000):  # a second cluster of this process within the same second
            name = f"{stem}-{n}.jsonl" if n else f"{stem}.jsonl"
            try:
                return folder / name, os.open(name, _CREATE, 0o600, dir_fd=dir_fd)
            except FileExistsError:
                continue  # ours from this second, or a link someone planted: never followed
        raise FileExistsError(f"{folder}/{stem}*.jsonl: 1000 names taken; {_FIX}")
    finally:
        os.close(dir_fd)


def open_history(path: Path) -> int:
    """`path` (a `history_path=`) opened for appending, created 0600 if missing; a symlink
    at `path` is refused (another user may have planted it), never followed."""
    try:
        return os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW
                       | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise PermissionError(
                f"history_path={str(path)!r} is a symlink; refusing to write a history through "
                "it (another user may have planted it): remove it, or pass the path it leads "
                "to") from None
        raise


def prune(folder: Path, *, dir_fd: int | None = None, max_files: int = MAX_FILES,
          max_bytes: int = MAX_BYTES, max_age_s: float = MAX_AGE_S,
          now: float | None = None) -> list[Path]:
    """Make room for one more history in `folder` (or the open folder `dir_fd`, named
    `folder`) within the limits (see the module note); returns the files removed, oldest
    first."""
    now = time.time() if now is None else now
    fd = dir_fd if dir_fd is not None else os.open(folder, os.O_RDONLY | os.O_DIRECTORY
                                                   | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        return _prune(fd, Path(folder), max_files, max_bytes, max_age_s, now)
    finally:
        if dir_fd is None:
            os.close(fd)


def _prune(fd: int, folder: Path, max_files: int, max_bytes: int, max_age_s: float,
           now: float) -> list[Path]:
    found = []
    for entry in os.scandir(fd):
        name = _NAME.match(entry.name)
        try:
            st = entry.stat(follow_symlinks=False)
        except FileNotFoundError:
            continue  # another cluster pruned it
        if name and stat.S_ISREG(st.st_mode):
            writer = _owner.judge(int(name.group(1)), name.group(2), name.group(3) or "")
            found.append((st.st_mtime, entry.name, st.st_size, writer))
    found.sort()
    removed = []
    count, total = len(found), sum(size for _, _, size, _ in found)
    for mtime, name, size, writer in found:
        too_old = now - mtime > max_age_s
        if writer == _owner.ALIVE or not (too_old or count >= max_files or total > max_bytes):
            continue
        if writer == _owner.UNKNOWN and not too_old:
            continue  # a writer we cannot see may be alive: only age removes its history
        try:
            os.unlink(name, dir_fd=fd)
        except FileNotFoundError:
            pass
        removed.append(folder / name)
        count, total = count - 1, total - size
    return removed
