"""Where a cluster keeps what outlives it: histories in a per-user state folder, bounded.

A cluster's history goes where `history_path=` says; without one, to a new file in

    $SIMCLUSTER_STATE_DIR/history            when that variable is set, else
    $XDG_STATE_HOME/simcluster/history       else ~/.local/state/simcluster/history

named `<yyyymmdd-hhmmss>-<pid>-<start time>.jsonl` after the process that writes it. Never
the temp directory: nothing cleans that. The folder is bounded instead: each time a
cluster starts a history there, it first removes histories older than `MAX_AGE_S`, then the
oldest (by last write) until at most `MAX_FILES - 1` remain and they hold at most
`MAX_BYTES` together. A history whose writer is still alive (its pid with that start
time) is never removed, and files not named like ours are left alone.
"""

from __future__ import annotations

import os
import re
import stat
import time
from pathlib import Path

from . import procfs

MAX_FILES = 100
MAX_BYTES = 200 * 1024 * 1024
MAX_AGE_S = 7 * 24 * 3600
_NAME = re.compile(r"^\d{8}-\d{6}-(\d+)-(\d+)(?:-\d+)?\.jsonl$")


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


def new_history_path() -> Path:
    """A fresh history file's path in the state folder (created, 0700), after pruning it."""
    folder = state_dir() / "history"
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise OSError(exc.errno, f"cannot create the history folder {folder} ({exc.strerror}): "
                                 f"{_FIX}") from None
    prune(folder)
    me = os.getpid()
    stem = f"{time.strftime('%Y%m%d-%H%M%S')}-{me}-{procfs.start_time(me)}"
    path, n = folder / f"{stem}.jsonl", 0
    while path.exists():  # a second cluster of this process within the same second
        n += 1
        path = folder / f"{stem}-{n}.jsonl"
    return path


def prune(folder: Path, *, max_files: int = MAX_FILES, max_bytes: int = MAX_BYTES,
          max_age_s: float = MAX_AGE_S, now: float | None = None) -> list[Path]:
    """Make room for one more history in `folder` within the limits (see the module note);
    returns the files removed, oldest first."""
    now = time.time() if now is None else now
    found = []
    for entry in os.scandir(folder):
        name = _NAME.match(entry.name)
        try:
            st = entry.stat(follow_symlinks=False)
        except FileNotFoundError:
            continue  # another cluster pruned it
        if name and stat.S_ISREG(st.st_mode):
            live = procfs.start_time(int(name.group(1))) == name.group(2)
            found.append((st.st_mtime, entry.name, st.st_size, live))
    found.sort()
    removed = []
    count, total = len(found), sum(size for _, _, size, _ in found)
    for mtime, name, size, live in found:
        too_old = now - mtime > max_age_s
        if live or not (too_old or count >= max_files or total > max_bytes):
            continue
        try:
            os.unlink(folder / name)
        except FileNotFoundError:
            pass
        removed.append(folder / name)
        count, total = count - 1, total - size
    return removed
