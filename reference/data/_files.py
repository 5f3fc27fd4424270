"""Where files are: paths and URIs resolved to a `pyarrow.fs` file system, folders listed."""

from __future__ import annotations

import os
from typing import Any

import pyarrow.fs as pafs


def resolve(paths, filesystem) -> tuple[list[str], Any]:
    listed = [paths] if isinstance(paths, str) else list(paths)
    if not listed or not all(isinstance(p, str) for p in listed):
        raise ValueError(f"paths={paths!r}: expected a path or URI, or a list of them.")
    if filesystem is not None:
        if not isinstance(filesystem, pafs.FileSystem):
            filesystem = pafs.PyFileSystem(pafs.FSSpecHandler(filesystem))
        return [p.split("://", 1)[-1] if "://" in p else p for p in listed], filesystem
    fs, first = pafs.FileSystem.from_uri(listed[0]) if "://" in listed[0] else \
        (pafs.LocalFileSystem(), listed[0])
    resolved = [first]
    for p in listed[1:]:
        other, path = pafs.FileSystem.from_uri(p) if "://" in p else (pafs.LocalFileSystem(), p)
        if other.type_name != fs.type_name:
            raise ValueError(f"paths={paths!r}: the paths are on different file systems "
                             f"({fs.type_name} and {other.type_name}); read them separately "
                             "and union the datasets.")
        resolved.append(path)
    if isinstance(fs, pafs.LocalFileSystem):
        resolved = [os.path.abspath(p) for p in resolved]
    return resolved, fs


def list_files(paths: list[str], fs, original) -> tuple[list[str], str | None]:
    """The files under `paths` (folders recursively, skipping names starting with "_" or
    ".", as pyarrow does), and the folder partitions are relative to (one folder given)."""
    files, base = [], None
    for path, info in zip(paths, fs.get_file_info(paths), strict=True):
        if info.type == pafs.FileType.NotFound:
            raise FileNotFoundError(f"paths={original!r}: {path!r} does not exist.")
        if info.type == pafs.FileType.Directory:
            base = path if len(paths) == 1 else None
            found = fs.get_file_info(pafs.FileSelector(path, recursive=True))
            files += sorted(i.path for i in found if i.type == pafs.FileType.File and not any(
                part.startswith(("_", ".")) for part in i.path[len(path):].split("/")))
        else:
            files.append(path)
    return files, base
