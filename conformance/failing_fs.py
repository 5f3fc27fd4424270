"""A local file system, as a pyarrow PyFileSystem, whose run-snapshot writes fail on cue.

`snapshot_failing_filesystem(marker)` is passed as RunConfig(storage_filesystem=...) by the
checks of clause `storage.snapshot-write-failure`: every write of a file named
`checkpoint_manager_snapshot*` whose bytes contain `marker` raises OSError, before anything
reaches the disk; every other operation is the local file system's. The cue is the
snapshot's own contents (a checkpoint folder name, a metric key), so it fails the same
registration on every implementation, whichever process writes the snapshot and however
often the file system object is pickled on the way there.
"""

from __future__ import annotations

import io

import pyarrow as pa
import pyarrow.fs as pafs

SNAPSHOT_PREFIX = "checkpoint_manager_snapshot"


class InjectedWriteError(OSError):
    """The write the check meant to fail."""


class _Guarded(io.RawIOBase):
    """An output file that refuses any bytes holding the marker. The file is opened (and
    so truncated) only at the first write that passes: a refused first write leaves the
    snapshot that was there whole, as a failed upload of one object would."""

    def __init__(self, opener, marker: bytes, path: str):
        self._opener, self._marker, self._path = opener, marker, path
        self._inner = None
        self._tail = b""

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        data = bytes(data)
        # the marker may straddle two writes: keep the last len(marker) - 1 bytes
        seen = self._tail + data
        if self._marker in seen:
            raise InjectedWriteError(
                f"injected failure writing {self._path}: its contents hold {self._marker!r}")
        self._tail = seen[-(len(self._marker) - 1):] if len(self._marker) > 1 else b""
        if self._inner is None:
            self._inner = self._opener()
        self._inner.write(data)
        return len(data)

    def close(self) -> None:
        if not self.closed and self._inner is not None:
            self._inner.close()
        super().close()


class SnapshotFailingHandler(pafs.FileSystemHandler):
    def __init__(self, marker: str):
        self.marker = marker
        self._fs = pafs.LocalFileSystem()

    def __reduce__(self):
        return SnapshotFailingHandler, (self.marker,)

    def __eq__(self, other):
        return isinstance(other, SnapshotFailingHandler) and other.marker == self.marker

    def __ne__(self, other):
        return not self == other

    def get_type_name(self):
        return "snapshot-failing-local"

    def normalize_path(self, path):
        return self._fs.normalize_path(path)

    def get_file_info(self, paths):
        return self._fs.get_file_info(paths)

    def get_file_info_selector(self, selector):
        return self._fs.get_file_info(selector)

    def create_dir(self, path, recursive):
        self._fs.create_dir(path, recursive=recursive)

    def delete_dir(self, path):
        self._fs.delete_dir(path)

    def delete_dir_contents(self, path, missing_dir_ok=False):
        self._fs.delete_dir_contents(path, missing_dir_ok=missing_dir_ok)

    def delete_root_dir_contents(self):
        raise OSError("snapshot-failing-local: refusing to delete the root's contents")

    def delete_file(self, path):
        self._fs.delete_file(path)

    def move(self, src, dest):
        self._fs.move(src, dest)

    def copy_file(self, src, dest):
        self._fs.copy_file(src, dest)

    def open_input_stream(self, path):
        return self._fs.open_input_stream(path)

    def open_input_file(self, path):
        return self._fs.open_input_file(path)

    def open_output_stream(self, path, metadata):
        if not path.rsplit("/", 1)[-1].startswith(SNAPSHOT_PREFIX):
            return self._fs.open_output_stream(path, metadata=metadata)
        opener = lambda: self._fs.open_output_stream(path, metadata=metadata)  # noqa: E731
        return pa.PythonFile(_Guarded(opener, self.marker.encode("utf-8"), path), mode="w")

    def open_append_stream(self, path, metadata):
        return self._fs.open_append_stream(path, metadata=metadata)


def snapshot_failing_filesystem(marker: str) -> pafs.PyFileSystem:
    """The local file system, except that a run-snapshot write holding `marker` fails."""
    if not marker:
        raise ValueError("marker='' would fail every snapshot write; pass a non-empty string")
    return pafs.PyFileSystem(SnapshotFailingHandler(marker))
