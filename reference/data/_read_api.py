"""Creating datasets: from memory (`from_items`, `from_pandas`, `from_numpy`, `from_arrow`,
`range`) and from files (`read_parquet`, `read_csv`, `read_json`).

Files are found and read by `pyarrow.dataset` on a `pyarrow.fs` file system: a local path,
a URI such as ``s3://bucket/prefix`` (the file system is inferred, credentials and endpoint
from the environment as pyarrow reads them), or any path with an explicit ``filesystem=``.
A parquet dataset becomes one task per row group, whose row count the footer gives; a CSV
or JSON file is one task whose rows are known only once read.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pyarrow as pa

from reference._lazy import LazyModule
from reference.data import _block
from reference.data._dataset import Dataset, MaterializedDataset
from reference.data._files import list_files, resolve
from reference.data._plan import RangeRead, TableRead, Task, part_bounds

pds = LazyModule("pyarrow.dataset")  # it brings pandas: imported when files are read

#: rows per in-memory block for from_items / from_numpy
ITEMS_PER_BLOCK = 1 << 14
#: Ray's scheduling and tuning arguments of the read functions: accepted, without effect here
RAY_ONLY = frozenset({"ray_remote_args", "concurrency", "override_num_blocks", "num_cpus",
                      "num_gpus", "memory", "meta_provider", "shuffle", "include_paths",
                      "ignore_missing_paths", "arrow_open_stream_args", "tensor_column_schema"})


def _check_extra(fn: str, kwargs: dict) -> None:
    unknown = sorted(set(kwargs) - RAY_ONLY)
    if unknown:
        raise TypeError(f"{fn}() got an unexpected keyword argument {unknown[0]!r}; the "
                        f"accepted scheduling arguments are {sorted(RAY_ONLY)}.")


def _table_tasks(tables: list[pa.Table]) -> list[Task]:
    return [Task(TableRead(t), num_rows=t.num_rows) for t in tables]


def _positive(arg: str, value: Any) -> None:
    if value is not None and (not isinstance(value, int) or isinstance(value, bool)
                              or value < 1):
        raise ValueError(f"{arg}={value!r}: expected a positive int or None.")


def from_items(items: list, *, override_num_blocks: int | None = None) -> MaterializedDataset:
    """Rows from a list of dicts; other values become rows {"item": value}."""
    if not isinstance(items, (list, tuple)):
        raise TypeError(f"from_items(items={type(items).__name__}): expected a list of dicts "
                        "(or of values, which become rows {'item': value}).")
    _positive("override_num_blocks", override_num_blocks)
    rows = [r if isinstance(r, dict) else {"item": r} for r in items]
    n = len(rows)
    parts = override_num_blocks or max(1, math.ceil(n / ITEMS_PER_BLOCK))
    tables = [_block.from_rows(rows[a:b], "from_items") if b > a else pa.table({})
              for a, b in part_bounds(n, parts)]
    return MaterializedDataset(_table_tasks([t for t in tables if t.num_rows] or tables[:1]))


def from_pandas(dfs, *, override_num_blocks: int | None = None) -> MaterializedDataset:
    import pandas as pd

    frames = dfs if isinstance(dfs, list) else [dfs]
    for df in frames:
        if not isinstance(df, pd.DataFrame):
            raise TypeError(f"from_pandas(dfs=...): expected a pandas.DataFrame or a list of "
                            f"them, got {type(df).__name__}.")
    tables = [pa.Table.from_pandas(df, preserve_index=False) for df in frames]
    return _maybe_split(tables, override_num_blocks)


def from_arrow(tables, *, override_num_blocks: int | None = None) -> MaterializedDataset:
    tables = tables if isinstance(tables, list) else [tables]
    for t in tables:
        if not isinstance(t, (pa.Table, pa.RecordBatch)):
            raise TypeError(f"from_arrow(tables=...): expected a pyarrow.Table or a list of "
                            f"them, got {type(t).__name__}.")
    tables = [pa.Table.from_batches([t]) if isinstance(t, pa.RecordBatch) else t for t in tables]
    return _maybe_split(tables, override_num_blocks)


def from_numpy(ndarrays) -> MaterializedDataset:
    """One column "data"; a multi-dimensional array gives one tensor per row."""
    arrays = ndarrays if isinstance(ndarrays, list) else [ndarrays]
    for a in arrays:
        if not isinstance(a, np.ndarray):
            raise TypeError(f"from_numpy(ndarrays=...): expected a numpy.ndarray or a list of "
                            f"them, got {type(a).__name__}.")
    return MaterializedDataset(_table_tasks([_block.from_batch({"data": a}, "from_numpy")
                                             for a in arrays]))


def _maybe_split(tables: list[pa.Table], parts: int | None) -> MaterializedDataset:
    _positive("override_num_blocks", parts)
    if parts is None:
        return MaterializedDataset(_table_tasks(tables))
    whole = _block.concat(tables)
    return MaterializedDataset(_table_tasks([whole.slice(a, b - a)
                                             for a, b in part_bounds(whole.num_rows, parts)]))


def range(n: int, *, override_num_blocks: int | None = None) -> Dataset:  # noqa: A001
    """Rows {"id": 0} ... {"id": n - 1}."""
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise ValueError(f"range(n={n!r}): expected an int >= 0.")
    _positive("override_num_blocks", override_num_blocks)
    parts = override_num_blocks or max(1, min(n, 16))
    return Dataset([Task(RangeRead(a, b), num_rows=b - a) for a, b in part_bounds(n, parts)])


# ------------------------------------------------------------------------------- files
class FragmentRead:
    """One file (or some row groups of a parquet file), rebuilt on the reading process."""

    #: record batches pyarrow decodes ahead of the consumer
    BATCH_READAHEAD = 2

    def __init__(self, file_format, fragment, filesystem, schema, row_groups=None, columns=None,
                 filter=None):  # noqa: A002 - pyarrow's name
        self.file_format, self.path, self.filesystem = file_format, fragment.path, filesystem
        self.partition_expression = fragment.partition_expression
        self.schema, self.row_groups, self.columns, self.filter = schema, row_groups, columns, \
            filter

    def blocks(self, ctx):
        extra = {} if self.row_groups is None else {"row_groups": self.row_groups}
        fragment = self.file_format.make_fragment(
            self.path, self.filesystem, partition_expression=self.partition_expression, **extra)
        for batch in fragment.to_batches(schema=self.schema, columns=self.columns,
                                         filter=self.filter,
                                         batch_readahead=self.BATCH_READAHEAD,
                                         fragment_readahead=0):
            yield pa.Table.from_batches([batch])


def _file_dataset(paths, filesystem, file_format, file_extensions, partitioning):
    resolved, fs = resolve(paths, filesystem)
    files, base = list_files(resolved, fs, paths)
    if file_extensions is not None:
        exts = tuple(f".{e.lstrip('.')}" for e in file_extensions)
        files = [f for f in files if f.endswith(exts)]
    if not files:
        raise ValueError(f"paths={paths!r}: no files found"
                         + (f" with extensions {file_extensions}" if file_extensions else "")
                         + ".")
    dataset = pds.dataset(files, format=file_format, filesystem=fs, partitioning=partitioning,
                          partition_base_dir=base)
    return dataset, list(dataset.get_fragments()), fs


def _pyarrow_args(fn: str, kwargs: dict, allowed: tuple) -> dict:
    """The pyarrow options among `kwargs` (Ray passes them through the same way); Ray's
    scheduling arguments are dropped; anything else is a TypeError naming it."""
    passed = {k: kwargs.pop(k) for k in allowed if k in kwargs}
    _check_extra(fn, kwargs)
    return passed


def read_parquet(paths, *, filesystem=None, columns: list[str] | None = None,
                 partitioning="hive", file_extensions=None, **arrow_parquet_args) -> Dataset:
    """A parquet file, folder of files, or list of them: one task per row group. Of
    pyarrow's arguments, `filter` (a pyarrow.dataset expression) is pushed into the scan."""
    filter = _pyarrow_args("read_parquet", arrow_parquet_args, ("filter",)).get("filter")  # noqa: A001
    fmt = pds.ParquetFileFormat()
    dataset, fragments, fs = _file_dataset(paths, filesystem, fmt, file_extensions,
                                           partitioning)
    tasks = []
    for fragment in fragments:
        for group in fragment.split_by_row_group():
            rows = None if filter is not None else group.row_groups[0].num_rows
            tasks.append(Task(FragmentRead(fmt, fragment, fs, dataset.schema,
                                           [group.row_groups[0].id], columns, filter),
                              num_rows=rows))
    return Dataset(tasks)


def _read_text(paths, filesystem, fmt, file_extensions, partitioning) -> Dataset:
    dataset, fragments, fs = _file_dataset(paths, filesystem, fmt, file_extensions,
                                           partitioning)
    return Dataset([Task(FragmentRead(fmt, f, fs, dataset.schema)) for f in fragments])


def read_csv(paths, *, filesystem=None, partitioning=None, file_extensions=None,
             **arrow_csv_args) -> Dataset:
    """CSV files, one task per file; pyarrow.csv's `parse_options`, `read_options` and
    `convert_options` pass through."""
    options = _pyarrow_args("read_csv", arrow_csv_args,
                            ("parse_options", "read_options", "convert_options"))
    return _read_text(paths, filesystem, pds.CsvFileFormat(**options), file_extensions,
                      partitioning)


def read_json(paths, *, lines: bool = False, filesystem=None, partitioning=None,
              file_extensions=None, **arrow_json_args) -> Dataset:
    """Newline-delimited JSON files (one object per line; pyarrow's JSON reader reads no
    other layout, whatever `lines` says), one task per file; pyarrow.json's
    `parse_options` and `read_options` pass through."""
    options = _pyarrow_args("read_json", arrow_json_args, ("parse_options", "read_options"))
    return _read_text(paths, filesystem, pds.JsonFileFormat(**options), file_extensions,
                      partitioning)
