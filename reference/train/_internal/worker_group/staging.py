"""A rank's checkpoint files in a report: where they go and under which name.

Each rank stages its checkpoint into the round's staging folder inside the run folder (every
rank writes into the same folder, so files of several ranks merge, last writer wins), or,
with `CheckpointUploadMode.NO_UPLOAD`, names the folder inside the run folder that already
is the checkpoint (see worker.py's design note). Every staging path goes through the run
folder's resolver (storage/confine.py).
"""

from __future__ import annotations

import os
import posixpath
import shutil

from reference.train._internal.storage import confine, fs_utils
from reference.train._internal.storage.storage_context import validate_checkpoint_dir_name

#: folder-name limit assumed where the file system does not say (POSIX NAME_MAX)
DEFAULT_NAME_MAX = 255


def name_max(storage) -> int | None:
    """The longest folder name the run folder's file system allows; None when it has none
    (object stores limit whole keys, not their parts)."""
    if not fs_utils.is_local(storage.storage_filesystem):
        return None
    try:
        return os.pathconf(storage.experiment_fs_path, "PC_NAME_MAX")
    except (OSError, ValueError):
        return DEFAULT_NAME_MAX


def name_in_run_folder(checkpoint, storage) -> str:
    """The checkpoint_dir_name of a checkpoint that already is inside the run folder."""
    fs, run = storage.storage_filesystem, storage.experiment_fs_path
    ckpt_fs, path = checkpoint.filesystem, checkpoint.path
    if fs_utils.is_local(fs) and fs_utils.is_local(ckpt_fs):
        same_fs, path, run = True, os.path.realpath(path), os.path.realpath(run)
    else:
        same_fs = ckpt_fs is not None and fs.equals(ckpt_fs)
        path, run = posixpath.normpath(path), posixpath.normpath(run)
    if not (same_fs and path.startswith(run.rstrip("/") + "/")):
        raise ValueError(
            f"report(checkpoint={checkpoint!r}, checkpoint_upload_mode="
            f"CheckpointUploadMode.NO_UPLOAD): the checkpoint is not inside the run folder "
            f"{storage.experiment_fs_path!r} on the run's storage "
            f"({fs.type_name}); NO_UPLOAD only registers a checkpoint already written "
            "there. Write it under get_context().get_storage().experiment_fs_path, or "
            "report it with the default CheckpointUploadMode.SYNC to copy it in."
        )
    return validate_checkpoint_dir_name(posixpath.relpath(path, run))


def stage_checkpoint(checkpoint, storage, staging: str, move: bool) -> None:
    """Copy a rank's checkpoint files into the round's staging folder; with `move`
    (delete_local_checkpoint_after_upload) the local folder is gone afterwards. A symbolic
    link is staged as what it points to, as an upload reads it: a checkpoint holds no link."""
    fs = storage.storage_filesystem
    src_fs, src = checkpoint.filesystem, checkpoint.path
    local_src = fs_utils.is_local(src_fs)
    confine.inside(storage, staging, "staging a checkpoint in")
    if fs_utils.is_local(fs) and local_src:
        os.makedirs(staging, exist_ok=True)
        if move and not _holds_links(src):
            for name in os.listdir(src):
                source, target = os.path.join(src, name), os.path.join(staging, name)
                if os.path.isdir(source):
                    _move_or_merge(source, target)
                else:
                    os.replace(source, target)
        else:
            shutil.copytree(src, staging, dirs_exist_ok=True)
    else:
        fs.create_dir(staging, recursive=True)
        fs_utils.copy_tree(src_fs, src, fs, staging)
    if move and local_src:
        shutil.rmtree(src, ignore_errors=True)


def _move_or_merge(source: str, target: str) -> None:
    """Move a folder into the staging folder; when another rank already staged a folder
    of that name (it may do so at any moment), merge into it instead."""
    try:
        os.rename(source, target)
    except OSError:  # ENOTEMPTY / EEXIST: the target is another rank's folder
        shutil.copytree(source, target, dirs_exist_ok=True)


def _holds_links(folder: str) -> bool:
    return any(os.path.islink(os.path.join(root, name))
               for root, dirs, files in os.walk(folder) for name in dirs + files)


def stage_nothing(storage, staging: str) -> None:
    """An empty contribution to the round (the checkpoint is registered in place)."""
    confine.inside(storage, staging, "staging a checkpoint in")
    if fs_utils.is_local(storage.storage_filesystem):
        os.makedirs(staging, exist_ok=True)
    else:
        storage.storage_filesystem.create_dir(staging, recursive=True)


__all__ = ["DEFAULT_NAME_MAX", "name_in_run_folder", "name_max", "stage_checkpoint",
           "stage_nothing"]
