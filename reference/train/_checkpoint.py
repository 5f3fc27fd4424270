"""Checkpoint: a directory on a ``pyarrow.fs`` filesystem, local or remote.

Design note. ``to_directory`` copies into a fixed per-object folder by default
(``<tempdir>/checkpoint_tmp_<uuid hex>``), so several processes on one machine holding
pickled copies of the same Checkpoint meet in the same folder. A file lock keyed by that folder
makes the first caller copy; callers that find the lock taken wait for it and copy nothing,
unless what held the lock was the folder's deletion (the holder leaves a note in its lock file
saying whether a finished copy is there), in which case they copy.
``as_directory`` on a remote checkpoint registers each user with a marker file next to the
folder; the user that exits last (no markers left, checked again under the lock) deletes the
folder, under the same lock so it never deletes while another process is still copying into it.

The lock files live in ``<tempdir>/_trainspec_lockfiles-<uid>`` (this user's, mode 0700: other
users can neither plant files there nor hold our locks) and are removed by whoever releases
them (`_FolderLock`), so nothing is left once no one uses a folder.
"""
import contextlib
import glob
import json
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Optional, Union

import filelock
import pyarrow.fs

from reference.train._folder_lock import COPIED, FolderLock

_METADATA_FILE = ".metadata.json"
_TEMP_PREFIX = "checkpoint_tmp_"
_USER_MARKER = ".del_lock_"
_COPY_CHUNK = 16 * 1024 * 1024

_DICT_MIGRATION = (
    "Only directories are supported: write your data into a directory, then pass "
    "Checkpoint.from_directory(that_dir) to report(); read it back with "
    "`with checkpoint.as_directory() as d: ...`."
)
_URI_MIGRATION = (
    "To refer to remote storage, construct the checkpoint from the URI, e.g. "
    "Checkpoint(path='s3://bucket/dir'), then read it with as_directory() / to_directory(); "
    "upload data with pyarrow.fs or a client of your choice."
)
_PREPROCESSOR_MIGRATION = (
    "Store preprocessor information in the checkpoint's metadata "
    "(checkpoint.set_metadata({...})) and read it with checkpoint.get_metadata()."
)
_LEGACY = {
    **dict.fromkeys(("from_dict", "to_dict", "from_bytes", "to_bytes",
                     "get_internal_representation"), _DICT_MIGRATION),
    **dict.fromkeys(("from_uri", "to_uri", "uri"), _URI_MIGRATION),
    **dict.fromkeys(("get_preprocessor", "set_preprocessor"), _PREPROCESSOR_MIGRATION),
}


def _legacy_error(name: str) -> AttributeError:
    return AttributeError(
        f"The new `Checkpoint` class does not support `{name}()`. {_LEGACY[name]}")


class _LegacyAttributes(type):
    """Turns class-level access to removed methods (Checkpoint.from_dict) into a how-to."""

    def __getattr__(cls, name: str):
        if name in _LEGACY:
            raise _legacy_error(name)
        raise AttributeError(f"type object {cls.__name__!r} has no attribute {name!r}")


class Checkpoint(metaclass=_LegacyAttributes):
    """A reference to checkpoint data persisted as a directory.

    Args:
        path: A local path or a URI (``s3://bucket/dir``). With ``filesystem`` given it must
            be a path on that filesystem, its scheme already stripped.
        filesystem: The ``pyarrow.fs.FileSystem`` holding ``path``; resolved from the
            path when None.

    Equality is identity; a Checkpoint pickles with its path and filesystem.
    """

    def __init__(self, path: Union[str, os.PathLike],
                 filesystem: Optional[pyarrow.fs.FileSystem] = None):
        self.path = str(path)
        self.filesystem = filesystem
        if path and not filesystem:
            self.filesystem, self.path = pyarrow.fs.FileSystem.from_uri(path)
        # Names the default local copy; copies made by pickling share it on purpose.
        self._uuid = uuid.uuid4()

    def __repr__(self) -> str:
        return f"Checkpoint(filesystem={self.filesystem.type_name}, path={self.path})"

    def __getattr__(self, name: str):
        # Only reached for attributes that do not exist.
        if name in _LEGACY:
            raise _legacy_error(name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __fspath__(self):
        raise TypeError(
            "A `Checkpoint` cannot be used as a path. Use `Checkpoint.to_directory()` or "
            "`Checkpoint.as_directory()` to get a local directory."
        )

    @classmethod
    def from_directory(cls, path: Union[str, os.PathLike]) -> "Checkpoint":
        """A checkpoint of a local directory; the path is kept as given (relative stays so)."""
        return cls(path, filesystem=pyarrow.fs.LocalFileSystem())

    # ------------------------------------------------------------------ metadata
    def _metadata_path(self) -> str:
        return Path(self.path, _METADATA_FILE).as_posix()

    def get_metadata(self) -> dict[str, Any]:
        """The metadata stored with the checkpoint, ``{}`` when none was set."""
        path = self._metadata_path()
        if self.filesystem.get_file_info(path).type == pyarrow.fs.FileType.NotFound:
            return {}
        with self.filesystem.open_input_file(path) as f:
            return json.loads(f.readall().decode("utf-8"))

    def set_metadata(self, metadata: dict[str, Any]) -> None:
        """Replace the stored metadata (JSON, in the checkpoint directory itself)."""
        with self.filesystem.open_output_stream(self._metadata_path()) as f:
            f.write(json.dumps(metadata).encode("utf-8"))

    def update_metadata(self, metadata: dict[str, Any]) -> None:
        """Merge ``metadata`` into the stored metadata."""
        merged = self.get_metadata()
        merged.update(metadata)
        self.set_metadata(merged)

    # ------------------------------------------------------------------ local copies
    def _get_temporary_checkpoint_dir(self) -> str:
        return Path(tempfile.gettempdir(), _TEMP_PREFIX + self._uuid.hex).as_posix()

    def to_directory(self, path: Optional[Union[str, os.PathLike]] = None) -> str:
        """Copy the checkpoint into ``path`` (default: a per-checkpoint temp folder).

        Returns the local directory. Concurrent callers on one machine copy once.
        """
        target = self._get_temporary_checkpoint_dir() if path is None else str(path)
        target = os.path.normpath(os.path.expanduser(target))
        existed = os.path.exists(target)
        os.makedirs(target, exist_ok=True)
        lock = _lock_for(target)
        try:
            lock.acquire(timeout=0)
        except filelock.Timeout:
            # Another process holds the folder: it is copying into it (wait, copy nothing)
            # or, as the last user of as_directory(), deleting it (wait, then copy).
            lock.acquire()
            if lock.note == COPIED and os.path.isdir(target):
                lock.release(COPIED)  # for whoever waits on us
                return target
            existed = False
        note = ""
        try:
            self._copy_into(target, existed)
            note = COPIED
        finally:
            lock.release(note)
        return target

    def _copy_into(self, target: str, existed: bool) -> None:
        """Copy the checkpoint into `target` (its lock held)."""
        os.makedirs(target, exist_ok=True)
        try:
            _copy_tree(self.filesystem, self.path, target)
        except BaseException:
            if not existed:
                shutil.rmtree(target, ignore_errors=True)
            raise

    @contextlib.contextmanager
    def as_directory(self) -> Iterator[str]:
        """The checkpoint as a local directory, for reading only.

        A local checkpoint yields its own path (no copy, nothing removed). A remote one is
        copied to a temp folder, shared by concurrent users on this machine and removed when
        the last of them exits.
        """
        if isinstance(self.filesystem, pyarrow.fs.LocalFileSystem):
            yield self.path
            return
        folder = self._get_temporary_checkpoint_dir()
        # One marker per user (not per process) so threads of one process count separately.
        marker = f"{folder}{_USER_MARKER}{os.getpid()}_{uuid.uuid4().hex[:12]}"
        open(marker, "a").close()
        try:
            yield self.to_directory()
        finally:
            with contextlib.suppress(OSError):
                os.remove(marker)
            if not _has_users(folder):
                lock = _lock_for(folder)
                try:
                    lock.acquire(timeout=0)
                except filelock.Timeout:
                    lock.release()  # someone is copying into it again: they will clean up
                else:
                    try:
                        # Checked again under the lock: a user that registered after the
                        # first look has copied (or waits to copy) and is reading it now.
                        if not _has_users(folder):
                            shutil.rmtree(folder, ignore_errors=True)
                    finally:
                        lock.release()


def _has_users(folder: str) -> bool:
    return bool(glob.glob(glob.escape(f"{folder}{_USER_MARKER}") + "*"))


def _lock_for(local_dir: str) -> FolderLock:
    """The lock of a local copy's folder: whoever copies into it or deletes it holds it."""
    return FolderLock(local_dir)


def _copy_tree(fs: pyarrow.fs.FileSystem, fs_path: str, local_dir: str) -> None:
    """Copy the directory (or single file) at (fs, fs_path) into ``local_dir``.

    Written out instead of ``pyarrow.fs.copy_files`` so that empty folders are created
    on every filesystem (object stores list them as markers) and bytes are copied verbatim.
    """
    info = fs.get_file_info(fs_path)
    if info.type == pyarrow.fs.FileType.NotFound:
        raise FileNotFoundError(f"Checkpoint data not found: ({fs.type_name}, {fs_path!r}).")
    if info.type == pyarrow.fs.FileType.File:
        _copy_file(fs, fs_path, os.path.join(local_dir, info.base_name))
        return
    root = fs_path.rstrip("/")
    entries = fs.get_file_info(pyarrow.fs.FileSelector(root, recursive=True))
    for entry in sorted(entries, key=lambda e: e.path):  # parents sort before children
        relative = entry.path[len(root):].lstrip("/")
        destination = os.path.join(local_dir, *relative.split("/"))
        if entry.type == pyarrow.fs.FileType.Directory:
            os.makedirs(destination, exist_ok=True)
        elif entry.type == pyarrow.fs.FileType.File:
            _copy_file(fs, entry.path, destination)


def _copy_file(fs: pyarrow.fs.FileSystem, fs_path: str, destination: str) -> None:
    os.makedirs(os.path.dirname(destination), exist_ok=True)
    if isinstance(fs, pyarrow.fs.LocalFileSystem):
        shutil.copyfile(fs_path, destination)  # lets the OS copy in-kernel
        return
    with fs.open_input_stream(fs_path) as source, open(destination, "wb") as sink:
        while chunk := source.read(_COPY_CHUNK):
            sink.write(chunk)
