"""Atomic persistence of checkpoint folders into the run folder.

Design note
-----------
What: `persist_checkpoint` turns the source folders of one report round (each rank's local
checkpoint directory, or any `(filesystem, path)`) into `<run>/<checkpoint_dir_name>/`.
Sources are merged in order; a file name present in several sources ends up with the last
source's contents (last writer wins), as when Ray's ranks upload into one shared target.

Why: a process can die at any instant (SIGKILL, node loss). A half-written folder must never
carry a checkpoint's name, because a resumed run restores from what the snapshot lists and
people open whatever folder they see.

How, by storage kind (`fs_utils.commit_strategy`):
- Local disk (and filesystems whose `move` renames a directory): the folder is built under
  `<run>/.tmp-<name>-<uuid>` and renamed to its final name in one step. "copy" mode copies
  the files; "move" mode renames them out of the sources when those are on the same local
  filesystem (the sources are consumed; used for staging folders the caller owns) and copies
  across devices. A crash before the rename leaves only a `.tmp-` entry, removed by
  `remove_temporaries` when the next checkpoint manager opens the run.
- Object stores (S3, GCS, ...) have no rename: files are uploaded straight under the final
  prefix. HAZARD: until the caller has written the snapshot that names it, that prefix may
  hold a partial checkpoint. A checkpoint on an object store exists only through the snapshot
  (the manager's restore and `Result.from_path` read nothing else); never list the bucket to
  find checkpoints.
Ordering the caller keeps (checkpoint_manager.py): persist -> write snapshot naming it ->
delete evicted folders. A crash between persist and snapshot leaves a whole, unregistered
folder (its report was never acknowledged); a crash before a deletion leaves a whole folder
that the snapshot no longer names.
Deleting: local folders are first renamed to `.tmp-del-<uuid>`, then removed, so a crash
mid-delete never leaves a partial folder under a checkpoint's name.
Re-persisting to an existing name merges file by file (each file replaced atomically on local
disk), so the folder is a mix of old and new files while that runs: reuse names only for
checkpoints nobody reads concurrently.
No fsync: this survives the death of processes, not the loss of power.
Failing writes (a full disk, a revoked permission): the OSError is re-raised with its class
and errno (`errno.ENOSPC` still matches) and a text naming the path, the run and the fix; a
failed persist or snapshot write removes what it wrote (its temporary, or on an object store
the prefix it created), so retrying after freeing space starts from a clean run folder.
"""

from __future__ import annotations

import errno
import logging
import os
import shutil
import uuid
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import pyarrow.fs as pafs

from reference.train._internal.storage import confine, fs_utils

if TYPE_CHECKING:  # persist works on a StorageContext; storage_context never imports persist
    from reference.train._internal.storage.storage_context import StorageContext

logger = logging.getLogger(__name__)

MODES = ("copy", "move")


def _temp_path(parent: str, label: str) -> str:
    # File names are limited to 255 bytes; a long checkpoint name is shortened in the label.
    flat = label.replace("/", "_")[:100]
    return fs_utils.join(parent, f"{fs_utils.TEMP_PREFIX}{flat}-{uuid.uuid4().hex}")


def normalize_sources(sources: Any) -> list[tuple[pafs.FileSystem, str]]:
    """Accept a path, a Checkpoint-like (`.path`, `.filesystem`), an `(fs, path)` pair, or a
    list of those; return `(filesystem, fs path)` pairs."""
    single = isinstance(sources, (str, os.PathLike, tuple)) or hasattr(sources, "path")
    items: Iterable[Any] = [sources] if single else sources
    out = []
    for item in items:
        if isinstance(item, tuple):
            fs, path = item
        elif hasattr(item, "path"):
            fs, path = getattr(item, "filesystem", None), item.path
        else:
            fs, path = None, os.fspath(item)
        if fs is None:
            fs, path = (
                pafs.FileSystem.from_uri(path)
                if "://" in path
                else (pafs.LocalFileSystem(), os.path.abspath(path))
            )
        out.append((fs, str(path)))
    return out


def _check_source(fs: pafs.FileSystem, path: str) -> None:
    kind = fs_utils.file_type(fs, path)
    if kind == pafs.FileType.NotFound:
        raise FileNotFoundError(f"Checkpoint source folder {path!r} does not exist.")
    if kind != pafs.FileType.Directory:
        raise NotADirectoryError(
            f"Checkpoint source {path!r} is not a folder; a checkpoint is a directory "
            "(use Checkpoint.from_directory(<folder>))."
        )


def _replace_entry(dst: str, want_dir: bool) -> None:
    """Clear `dst` when it holds the other kind of entry, so the later writer wins."""
    if want_dir and os.path.lexists(dst) and not os.path.isdir(dst):
        os.unlink(dst)
    elif not want_dir and os.path.isdir(dst) and not os.path.islink(dst):
        shutil.rmtree(dst)


def _merge_local_tree(src: str, dst: str, move: bool) -> None:
    """Merge the contents of local folder `src` into `dst`, file by file."""
    for root, dirs, files in os.walk(src):
        rel = os.path.relpath(root, src)
        target = dst if rel == "." else os.path.join(dst, rel)
        _replace_entry(target, want_dir=True)
        os.makedirs(target, exist_ok=True)
        for name in dirs:
            if os.path.islink(os.path.join(root, name)):
                # os.walk does not descend into linked folders; copy their contents, as
                # an upload would.
                shutil.copytree(
                    os.path.join(root, name), os.path.join(target, name), dirs_exist_ok=True
                )
        for name in files:
            s, d = os.path.join(root, name), os.path.join(target, name)
            _replace_entry(d, want_dir=False)
            if move and not os.path.islink(s):
                try:
                    os.replace(s, d)  # atomic per file; the source loses the file
                    continue
                except OSError as e:
                    if e.errno != errno.EXDEV:
                        raise
            shutil.copyfile(s, d)


def _build_local(sources, temp: str, move: bool) -> None:
    for index, (fs, path) in enumerate(sources):
        if fs_utils.is_local(fs):
            if move and index == 0 and not os.path.islink(path):
                try:
                    # One rename moves the whole first source: no data is touched.
                    os.rename(path, temp)
                    continue
                except OSError as e:
                    if e.errno != errno.EXDEV:
                        raise
            _merge_local_tree(path, temp, move)
        else:
            os.makedirs(temp, exist_ok=True)
            fs_utils.copy_tree(fs, path, pafs.LocalFileSystem(), temp)
    os.makedirs(temp, exist_ok=True)  # a round whose sources are all empty still commits


def _commit_local(storage: StorageContext, temp: str, final: str) -> None:
    os.makedirs(os.path.dirname(final), exist_ok=True)
    if os.path.lexists(final) and not os.path.isdir(final):
        os.unlink(final)
    if os.path.isdir(final) and os.listdir(final):
        confine.refuse_links_below(storage, final, "merging a checkpoint into")
        _merge_local_tree(temp, final, move=True)
        shutil.rmtree(temp)
    else:
        os.replace(temp, final)  # replaces an empty folder too


def persist_as_checkpoint(storage: StorageContext, sources: Any, checkpoint_dir_name: str,
                          *, mode: str = "copy"):
    """`persist_checkpoint`, returned as a `Checkpoint` on the run's filesystem."""
    from reference.train._checkpoint import Checkpoint

    fs_path = persist_checkpoint(storage, sources, checkpoint_dir_name, mode=mode)
    return Checkpoint(fs_path, filesystem=storage.storage_filesystem)


def persist_checkpoint(
    storage: StorageContext, sources: Any, checkpoint_dir_name: str, *, mode: str = "copy"
) -> str:
    """Persist `sources` (see `normalize_sources`) as `<run>/<checkpoint_dir_name>`.

    Returns the checkpoint's fs path on `storage.storage_filesystem`. A source that already is
    that folder (the checkpoint was written in place) is left as it is. In "move" mode the
    sources are consumed even when persisting then fails.
    """
    if mode not in MODES:
        raise ValueError(f"mode={mode!r} is not one of {MODES}.")
    final = confine.inside(storage, storage.build_checkpoint_path_from_name(checkpoint_dir_name),
                           "persisting a checkpoint to")
    fs = storage.storage_filesystem
    pairs = normalize_sources(sources)
    pending = []
    for sfs, path in pairs:
        if _same_location(sfs, path, fs, final):
            continue
        _check_source(sfs, path)
        _refuse_nesting(sfs, path, fs, final)
        pending.append((sfs, path))
    if not pending and fs_utils.exists(fs, final):
        return final

    strategy = fs_utils.commit_strategy(fs)
    if strategy == fs_utils.COMMIT_DIRECT:
        existed = fs_utils.exists(fs, final)
        try:
            fs.create_dir(final, recursive=True)
            for sfs, path in pending:
                fs_utils.copy_tree(sfs, path, fs, final)
        except BaseException as e:
            if not existed:  # nothing of a partial upload may stay under a checkpoint's name
                remove_quietly(fs, final)
            _raise_with_context(e, storage, f"persisting checkpoint {checkpoint_dir_name!r} to",
                                final)
        return final

    temp = _temp_path(storage.experiment_fs_path, checkpoint_dir_name)
    try:
        if strategy == fs_utils.COMMIT_OS_RENAME:
            _build_local(pending, temp, move=(mode == "move"))
            _commit_local(storage, temp, final)
        else:
            fs.create_dir(temp, recursive=True)
            for sfs, path in pending:
                fs_utils.copy_tree(sfs, path, fs, temp)
            _commit_by_move(storage, temp, final)
    except BaseException as e:
        # An error (not a crash) leaves no temporary behind; a crash is cleaned up later.
        remove_quietly(fs, temp)
        _raise_with_context(e, storage, f"persisting checkpoint {checkpoint_dir_name!r} to",
                            final)
    return final


def _raise_with_context(error: BaseException, storage: StorageContext, doing: str,
                        fs_path: str) -> None:
    """Re-raise `error`; an OSError with the path, the run and what to change in its text."""
    if not isinstance(error, OSError) or getattr(error, "_names_run", False):
        raise error
    reason = error.strerror or str(error)
    if error.errno == errno.ENOSPC:
        fix = ("Free space there (or pass a RunConfig(storage_path=...) with room), then call "
               "fit() again with the same RunConfig(name=...): it resumes from the last "
               "registered checkpoint.")
    else:
        fix = ("Check that this process can write there (permissions, quota, the mount), "
               "then call fit() again with the same RunConfig(name=...).")
    wrapped = fs_utils.same_kind(
        error,
        f"{doing[0].upper()}{doing[1:]} {fs_path!r} failed: {reason} (run "
        f"{storage.experiment_dir_name!r}, run folder {storage.experiment_fs_path!r}). {fix}",
    )
    wrapped._names_run = True
    raise wrapped from error


def _commit_by_move(storage: StorageContext, temp: str, final: str) -> None:
    fs = storage.storage_filesystem
    parent = final.rsplit("/", 1)[0]
    fs.create_dir(parent, recursive=True)
    if fs_utils.exists(fs, final):
        confine.refuse_links_below(storage, final, "merging a checkpoint into")
        fs_utils.copy_tree(fs, temp, fs, final)
        fs.delete_dir(temp)
    else:
        fs.move(temp, final)


def _same_location(sfs, spath, fs, fs_path) -> bool:
    if sfs is fs or (fs_utils.is_local(sfs) and fs_utils.is_local(fs)):
        return os.path.normpath(spath) == os.path.normpath(fs_path)
    return sfs.equals(fs) and spath.rstrip("/") == fs_path.rstrip("/")


def _refuse_nesting(sfs, spath, fs, fs_path) -> None:
    """A source inside the target (or the reverse) would copy a folder into itself."""
    if not (fs_utils.is_local(sfs) and fs_utils.is_local(fs)):
        return
    a, b = os.path.realpath(spath), os.path.realpath(fs_path)
    if a.startswith(b + os.sep) or b.startswith(a + os.sep):
        raise ValueError(
            f"Checkpoint source {spath!r} and its destination {fs_path!r} are nested in each "
            "other; write checkpoints to a separate local folder before reporting them."
        )


def remove_quietly(fs: pafs.FileSystem, fs_path: str) -> None:
    """Remove a file or folder if it exists; log, never raise. On a local disk (also behind a
    SubTreeFileSystem) a link is removed itself, never followed (`shutil.rmtree` walks by
    descriptor and does not follow links either)."""
    local = confine.local_path(fs, fs_path)
    try:
        if local is not None:
            if os.path.isdir(local) and not os.path.islink(local):
                shutil.rmtree(local, ignore_errors=True)
            elif os.path.lexists(local):
                os.unlink(local)
        else:
            fs_utils.delete_path(fs, fs_path)
    except Exception:
        logger.exception("Could not remove %r", fs_path)



def delete_checkpoint_dir(storage: StorageContext, fs_path: str) -> bool:
    """Delete a checkpoint folder so that it never exists half-deleted under its name.

    Returns False (and logs) when it could not be deleted: a leftover folder costs space,
    while raising here would fail a run whose checkpoints are all safely recorded.
    """
    fs = storage.storage_filesystem
    strategy = fs_utils.commit_strategy(fs)
    try:
        confine.inside(storage, fs_path, "deleting checkpoint folder")
        if not fs_utils.exists(fs, fs_path):
            return True
        if strategy == fs_utils.COMMIT_DIRECT:
            fs_utils.delete_path(fs, fs_path)
            return True
        trash = _temp_path(storage.experiment_fs_path, "del")
        if strategy == fs_utils.COMMIT_OS_RENAME:
            os.rename(fs_path, trash)
        else:
            fs.move(fs_path, trash)
    except Exception:
        logger.exception("Could not delete checkpoint folder %r", fs_path)
        return False
    remove_quietly(fs, trash)
    return True


def write_bytes_atomically(storage: StorageContext, fs_path: str, data: bytes, *,
                           what: str = "") -> None:
    """Write a file so that readers see the old or the new contents, never a mix. `what`
    ("the run snapshot") is named, with the path and the run, in the text of an OSError."""
    fs = storage.storage_filesystem
    strategy = fs_utils.commit_strategy(fs)
    doing = f"writing {what}" if what else "writing"
    confine.inside(storage, fs_path, doing)
    if strategy == fs_utils.COMMIT_DIRECT:
        # A single object upload becomes visible whole, or not at all.
        try:
            with fs.open_output_stream(fs_path) as f:
                f.write(data)
        except BaseException as e:
            _raise_with_context(e, storage, doing, fs_path)
        return
    temp = _temp_path(storage.experiment_fs_path, fs_path.rsplit("/", 1)[-1])
    try:
        if strategy == fs_utils.COMMIT_OS_RENAME:
            with os.fdopen(confine.create_file(temp, exclusive=True), "wb") as f:
                f.write(data)
            os.replace(temp, fs_path)  # replaces a link at fs_path itself, never its target
        else:
            with fs.open_output_stream(temp) as f:
                f.write(data)
            fs.move(temp, fs_path)
    except BaseException as e:
        remove_quietly(fs, temp)
        _raise_with_context(e, storage, doing, fs_path)


def remove_temporaries(storage: StorageContext) -> list[str]:
    """Remove the `.tmp-` entries a crashed writer left in the run folder; returns them.

    Only safe while no other process writes into this run: fit() calls it holding the run
    folder's lock (run_lock.py), so the writer that left them is gone.
    """
    fs = storage.storage_filesystem
    if fs_utils.commit_strategy(fs) == fs_utils.COMMIT_DIRECT:
        return []  # nothing is ever written under a temporary name there
    selector = pafs.FileSelector(storage.experiment_fs_path, allow_not_found=True)
    removed = []
    for info in fs.get_file_info(selector):
        if info.base_name.startswith(fs_utils.TEMP_PREFIX):
            remove_quietly(fs, info.path)
            removed.append(info.path)
    return removed
