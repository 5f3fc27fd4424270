"""Keeping a run inside its run folder: the one resolver every write, rename and delete uses.

Design note
-----------
Promise (docs/security.md): a fit writes, truncates, renames and deletes only inside
`<storage_path>/<name>/` (and its own temporary folders). The storage folder may be shared
with other local users (a team's NFS export, a results folder in /tmp); any of them may have
created `<storage_path>/<name>/` before the fit, or planted symbolic links in it
(`.validate_storage_marker -> ~/important.txt`, `epoch_1 -> ~/project`, `x -> ~` with a forged
snapshot naming `x/project`). Plain path calls follow such links out of the run folder.

Rules, in storage (the call sites only name the path they are about to touch):
1. `check_run_folder`: a run folder owned by another user, or a link to it planted by one, is
   refused before anything is written in it (`REFERENCE_TRAIN_ALLOW_FOREIGN_RUN_FOLDER=1`
   accepts it, for a team that shares one folder on purpose); one that users other than its
   owner can write into gets a warning.
2. `inside`: every path is under the run folder once normalised (on every filesystem, so an
   object key with '..' or '//' cannot alias another run's), and on local storage (also behind
   a `SubTreeFileSystem`) no component from the run folder down to it is a symbolic link.
3. `refuse_links_below`: a folder the run merges files into holds no link anywhere.
4. Files are created with `O_NOFOLLOW` (the marker with `O_CREAT|O_NOFOLLOW` and no
   truncation, temporaries with `O_EXCL` too); renames never follow their final component.
Ordering hazard: rule 2 checks, then the caller acts. Between the two, whoever can write into
the run folder could swap a folder for a link; rule 1 is what closes that window (only its
owner and root write into a folder that is the user's own and not writable by others).
Violations raise `UnsafeRunFolder` (a PermissionError) naming the path, what was found and
the fix.
"""

from __future__ import annotations

import os
import posixpath
import stat

import pyarrow.fs as pafs

from reference._folder_safety import (
    ALLOW_FOREIGN_ENV,
    UnsafeRunFolder,
    check_owned,
    create_file,
    planted,
)
from reference.train._internal.storage import fs_utils


def local_path(fs: pafs.FileSystem, fs_path: str) -> str | None:
    """The path on this machine behind `fs_path`, or None when `fs` is not a local disk."""
    base, path = fs_utils.innermost(fs, fs_path)
    return path if fs_utils.is_local(base) else None


def check_run_folder(storage) -> None:
    """Rule 1 for `storage`'s run folder (a StorageContext), which exists by now."""
    run = local_path(storage.storage_filesystem, storage.experiment_fs_path)
    if run is not None:
        check_owned(run, f"RunConfig(storage_path={storage.storage_path!r}, name="
                         f"{storage.experiment_dir_name!r}): the run folder")


def inside(storage, fs_path: str, doing: str) -> str:
    """Rule 2: return `fs_path` if it lies in the run folder through no link, else raise."""
    run = posixpath.normpath(storage.experiment_fs_path)
    path = posixpath.normpath(fs_path)
    if path != run and not path.startswith(run.rstrip("/") + "/"):
        raise UnsafeRunFolder(
            f"Stopped before {doing} {fs_path!r}: it is not inside the run folder {run!r}, "
            "and a fit writes nowhere else."
        )
    local = local_path(storage.storage_filesystem, run)
    rel = path[len(run):].strip("/")
    if local is None or not rel:
        return fs_path
    current = local
    for part in rel.split("/"):
        current = os.path.join(current, part)
        try:
            mode = os.lstat(current).st_mode
        except FileNotFoundError:
            break
        if stat.S_ISLNK(mode):
            raise planted(current, doing, fs_path)
    return fs_path


def refuse_links_below(storage, fs_path: str, doing: str) -> None:
    """Rule 3: raise if the local folder behind `fs_path` holds a symbolic link anywhere."""
    inside(storage, fs_path, doing)
    local = local_path(storage.storage_filesystem, fs_path)
    if local is None:
        return
    for root, dirs, files in os.walk(local):
        for name in dirs + files:
            if os.path.islink(os.path.join(root, name)):
                raise planted(os.path.join(root, name), doing, fs_path)


__all__ = ["ALLOW_FOREIGN_ENV", "UnsafeRunFolder", "check_owned", "check_run_folder",
           "create_file", "inside", "local_path", "planted", "refuse_links_below"]
