"""Where a run's files live: `<storage_path>/<name>/` on a `pyarrow.fs` filesystem.

Layout (the same as Ray Train's):

    <storage_path>/<name>/
        .validate_storage_marker          written when the context is built
        checkpoint_manager_snapshot.json  written by the checkpoint manager
        <checkpoint_dir_name>/            one folder per retained checkpoint
        .run_owner.json                   the reference's own: names the fit that owns the
                                          folder, only while it runs (run_lock.py)

Names are validated so that nothing is ever written outside `<storage_path>/<name>/`. Seen
with ray 2.60: `checkpoint_dir_name='a/b'` works (a nested folder in the run folder, listed as
'a/b' in the snapshot); `'../x'` and `'/abs'` are written outside the run folder and only then
fail (WorkerGroupError); `'.'` writes the files into the run folder itself, then fails
(ControllerError). Here every name that does not denote a folder strictly inside the run
folder is refused up front with a ValueError, before anything is written.
"""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import PurePosixPath
from typing import Any

import pyarrow.fs as pafs

from reference.train._internal.storage import confine, fs_utils
from reference.train._internal.storage.fs_utils import same_kind

VALIDATE_STORAGE_MARKER_FILENAME = ".validate_storage_marker"
CHECKPOINT_MANAGER_SNAPSHOT_FILENAME = "checkpoint_manager_snapshot.json"
OWNER_FILENAME = ".run_owner.json"
_RESERVED_NAMES = (VALIDATE_STORAGE_MARKER_FILENAME, CHECKPOINT_MANAGER_SNAPSHOT_FILENAME,
                   OWNER_FILENAME)


def _check_relative_name(value: Any, argument: str, example: str) -> str:
    """Shared rules for names joined under a parent folder: relative, no '.'/'..' parts."""
    if not isinstance(value, str):
        raise TypeError(f"{argument}={value!r} must be a str, got {type(value).__name__}.")
    problem = None
    if not value:
        problem = "it is empty"
    elif "\x00" in value:
        problem = "it contains a NUL character"
    elif "\\" in value:
        problem = "it contains a backslash (a path separator on Windows)"
    elif value.startswith("/"):
        problem = "it is an absolute path"
    elif any(part in ("", ".", "..") for part in value.split("/")):
        problem = "it has an empty, '.' or '..' path component"
    if problem is not None:
        raise ValueError(
            f"{argument}={value!r} is not allowed: {problem}, so it would not name a folder "
            f"inside its parent folder. Use a plain relative name such as {example!r} "
            "(nested names like 'a/b' are fine)."
        )
    return value


def validate_checkpoint_dir_name(name: Any) -> str:
    """Return `name` if it names a folder strictly inside the run folder, else raise ValueError."""
    _check_relative_name(name, "checkpoint_dir_name", "checkpoint_epoch_3")
    first = name.split("/", 1)[0]
    if first.startswith(fs_utils.TEMP_PREFIX) or name in _RESERVED_NAMES:
        raise ValueError(
            f"checkpoint_dir_name={name!r} is reserved for the run's own files "
            f"(names starting with {fs_utils.TEMP_PREFIX!r}, {_RESERVED_NAMES}). "
            "Choose another name."
        )
    return name


def _resolve(storage_path: str, storage_filesystem: pafs.FileSystem | None):
    """(filesystem, fs path) for a storage path, following Ray's rules."""
    if storage_filesystem is not None:
        # Like Ray: with an explicit filesystem the path is already a path within it.
        if not storage_path:
            raise ValueError(
                "RunConfig(storage_path='') is empty; with RunConfig(storage_filesystem=...) "
                "pass the path within that filesystem, e.g. 'bucket/prefix'."
            )
        return storage_filesystem, storage_path
    if "://" not in storage_path:
        expanded = os.path.expanduser(storage_path)
        if not os.path.isabs(expanded):
            # pyarrow says "URI has empty scheme" here, which does not tell anyone what to do.
            raise ValueError(
                f"RunConfig(storage_path={storage_path!r}) is a relative path; storage paths "
                "must be absolute so that every process resolves them to the same place. "
                f"Pass an absolute path (e.g. {os.path.abspath(expanded)!r}) or a URI "
                "such as 's3://bucket/prefix'."
            )
        storage_path = expanded
    try:
        return pafs.FileSystem.from_uri(storage_path)
    except (ValueError, OSError) as e:
        raise same_kind(
            e,
            f"RunConfig(storage_path={storage_path!r}) could not be resolved to a filesystem: "
            f"{e}. Pass an absolute local path, a URI pyarrow understands ('s3://bucket/path', "
            "'gs://...', 'file:///...'), or a filesystem as RunConfig(storage_filesystem=...).",
        ) from e


class StorageContext:
    """Paths of one run on its storage filesystem, and the checks made before using them.

    `*_fs_path` attributes are paths on `storage_filesystem` without a URI scheme
    (`'bucket/prefix/name'` for S3), joined with '/'.
    """

    def __init__(
        self,
        storage_path: str | os.PathLike,
        experiment_dir_name: str,
        storage_filesystem: pafs.FileSystem | None = None,
    ):
        self.storage_path = os.fspath(storage_path)
        self.experiment_dir_name = _check_relative_name(
            experiment_dir_name, "RunConfig(name)", "my_run"
        )
        self.custom_fs_provided = storage_filesystem is not None
        fs, fs_path = _resolve(self.storage_path, storage_filesystem)
        self.storage_filesystem: pafs.FileSystem = fs
        self.storage_fs_path: str = PurePosixPath(fs_path).as_posix()
        self._create_marker()
        self.check_storage_marker()

    def __repr__(self) -> str:
        return (
            f"StorageContext(storage_filesystem={self.storage_filesystem.type_name!r}, "
            f"storage_fs_path={self.storage_fs_path!r}, "
            f"experiment_dir_name={self.experiment_dir_name!r})"
        )

    @property
    def experiment_fs_path(self) -> str:
        """The run folder: `<storage_fs_path>/<experiment_dir_name>`."""
        return fs_utils.join(self.storage_fs_path, self.experiment_dir_name)

    @property
    def checkpoint_manager_snapshot_path(self) -> str:
        return fs_utils.join(self.experiment_fs_path, CHECKPOINT_MANAGER_SNAPSHOT_FILENAME)

    @property
    def storage_marker_path(self) -> str:
        return fs_utils.join(self.experiment_fs_path, VALIDATE_STORAGE_MARKER_FILENAME)

    @staticmethod
    def make_default_checkpoint_dir_name() -> str:
        """`checkpoint_<local time to the microsecond>`, the name Ray gives unnamed checkpoints."""
        return datetime.today().strftime("checkpoint_%Y-%m-%d_%H-%M-%S.%f")

    def build_checkpoint_path_from_name(self, checkpoint_name: str) -> str:
        """The fs path of the checkpoint folder `checkpoint_name` (validated, see module doc)."""
        validate_checkpoint_dir_name(checkpoint_name)
        return fs_utils.join(self.experiment_fs_path, checkpoint_name)

    def extract_checkpoint_dir_name_from_path(self, checkpoint_path: str) -> str:
        """Inverse of `build_checkpoint_path_from_name`; ValueError outside the run folder."""
        prefix = self.experiment_fs_path.rstrip("/") + "/"
        normalized = PurePosixPath(checkpoint_path).as_posix()
        if not normalized.startswith(prefix):
            raise ValueError(
                f"Checkpoint path {checkpoint_path!r} is not under the run folder "
                f"{self.experiment_fs_path!r}; checkpoints are registered only after they are "
                "persisted into the run folder."
            )
        return validate_checkpoint_dir_name(normalized[len(prefix) :])

    def check_storage_marker(self) -> None:
        """Raise unless the run folder's marker is visible from this process."""
        if not fs_utils.exists(self.storage_filesystem, self.storage_marker_path):
            raise RuntimeError(
                f"Unable to set up cluster storage: {self.storage_marker_path!r} is not visible "
                f"from this process ({self!r}). Every node must be able to read and write "
                f"RunConfig(storage_path={self.storage_path!r}); use cloud storage "
                "('s3://bucket/path') or a shared filesystem mounted at the same path on "
                "every node ('/mnt/nfs/...')."
            )

    def _create_marker(self) -> None:
        fs = self.storage_filesystem
        try:
            fs.create_dir(self.experiment_fs_path, recursive=True)
            confine.check_run_folder(self)
            local = confine.local_path(fs, self.storage_marker_path)
            if local is None:
                with fs.open_output_stream(self.storage_marker_path):
                    pass
            else:  # never through a planted link, never truncating (the lock lives on it)
                os.close(confine.create_file(local, exclusive=False))
        except confine.UnsafeRunFolder:
            raise
        except OSError as e:
            raise self._unwritable(e) from e

    def _unwritable(self, e: OSError) -> OSError:
        # Keep the class (PermissionError, NotADirectoryError, ...) so callers that
        # catch what pyarrow raises keep working; add what to change.
        return same_kind(
            e,
            f"Cannot write to RunConfig(storage_path={self.storage_path!r}): creating "
            f"{self.storage_marker_path!r} failed: {e}. Pass a storage path this process "
            "can create folders and files in (and, for a multi-node cluster, one every "
            "node can reach, such as 's3://bucket/path' or a shared '/mnt/nfs/...').",
        )
