"""`Dataset`: a lazy plan of tasks (see _plan.py), transformed without running anything and
executed, streaming, by the consuming calls.

Every transformation returns a new Dataset and leaves its input as it was. Consuming calls
(`iter_*`, `take*`, `count`, `to_pandas`, `write_parquet`, `materialize`) execute the plan;
each call is a fresh execution, so iterating twice reads twice (an unseeded
`random_shuffle` draws a new order). `materialize()` executes once and keeps the blocks.
"""

from __future__ import annotations

import copy
import uuid
from typing import Callable

import pyarrow as pa

from reference.data import _block
from reference.data import _plan as P


def _check_cols(fn: str, cols) -> tuple:
    listed = [cols] if isinstance(cols, str) else cols
    if not isinstance(listed, (list, tuple)) or not all(isinstance(c, str) for c in listed):
        raise ValueError(f"{fn}(cols={cols!r}): expected a column name or a list of them.")
    return tuple(listed)


def _check_count(fn: str, arg: str, value, minimum: int = 1) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ValueError(f"{fn}({arg}={value!r}): expected an int >= {minimum}.")


def _check_fn(fn: str, value) -> None:
    if not callable(value):
        raise TypeError(f"{fn}(fn={value!r}): expected a function or a callable class.")


class Schema:
    """Column names and Arrow types (`names`, `types`; `base_schema` is the pyarrow one)."""

    def __init__(self, base_schema: pa.Schema):
        self.base_schema = base_schema

    @property
    def names(self) -> list[str]:
        return list(self.base_schema.names)

    @property
    def types(self) -> list:
        return list(self.base_schema.types)

    def __eq__(self, other) -> bool:
        return isinstance(other, Schema) and self.base_schema.equals(other.base_schema)

    def __repr__(self) -> str:
        cols = ", ".join(f"{n}: {t}" for n, t in zip(self.names, self.types, strict=True))
        return f"Schema({cols})"


class Dataset:
    def __init__(self, tasks: list[P.Task], name: str | None = None):
        from reference.data._context import DataContext

        self._tasks = list(tasks)
        self.name = name
        #: the settings this dataset executes with (a copy of the creator's DataContext)
        self.context = copy.deepcopy(DataContext.get_current())

    def set_name(self, name: str | None) -> None:
        self.name = name

    # ------------------------------------------------------------------ internals
    def _with(self, op: P.Op) -> Dataset:
        return Dataset([t.then(op) for t in self._tasks])

    def _execute(self, ctx: P.ExecCtx | None = None):
        ctx = ctx or P.ExecCtx()
        for task in self._tasks:
            yield from task.blocks(ctx)

    @staticmethod
    def _of_table(table: pa.Table) -> MaterializedDataset:
        return MaterializedDataset([P.Task(P.TableRead(table), num_rows=table.num_rows)])

    def _known_count(self) -> int | None:
        counts = [t.num_rows for t in self._tasks]
        return None if None in counts else sum(counts)

    # ------------------------------------------------------------------ transforms
    def map_batches(self, fn, *, batch_size: int | None | str = None,
                    batch_format: str | None = "default", zero_copy_batch: bool = True,
                    fn_args=None, fn_kwargs=None, fn_constructor_args=None,
                    fn_constructor_kwargs=None, concurrency=None, num_cpus=None, num_gpus=None,
                    memory=None, **ray_remote_args) -> Dataset:
        """`fn(batch) -> batch` (or a generator of batches) on batches of `batch_size` rows
        (None: whole blocks) in `batch_format`; a callable class is built once per process
        with the constructor arguments. Streaming."""
        _check_fn("map_batches", fn)
        if batch_size == "auto":
            batch_size = None
        if batch_size is not None:
            _check_count("map_batches", "batch_size", batch_size)
        fmt = _block.check_format(batch_format)
        user = P.UserFn(fn, tuple(fn_args or ()), dict(fn_kwargs or {}),
                        tuple(fn_constructor_args or ()), dict(fn_constructor_kwargs or {}))
        return self._with(P.MapBatches(user, batch_size, fmt))

    def map(self, fn, *, fn_args=None, fn_kwargs=None, fn_constructor_args=None,
            fn_constructor_kwargs=None, concurrency=None, num_cpus=None, num_gpus=None,
            memory=None, **ray_remote_args) -> Dataset:
        """`fn(row) -> row`, one row out per row in. Streaming."""
        _check_fn("map", fn)
        return self._with(P.MapRows(P.UserFn(fn, tuple(fn_args or ()), dict(fn_kwargs or {}),
                                              tuple(fn_constructor_args or ()),
                                              dict(fn_constructor_kwargs or {}))))

    def flat_map(self, fn, *, fn_args=None, fn_kwargs=None, **ray_remote_args) -> Dataset:
        """`fn(row) -> list of rows`. Streaming."""
        _check_fn("flat_map", fn)
        return self._with(P.FlatMap(P.UserFn(fn, tuple(fn_args or ()), dict(fn_kwargs or {}))))

    def filter(self, fn=None, expr=None, *, fn_args=None, fn_kwargs=None,  # noqa: A003
               **ray_remote_args) -> Dataset:
        """Rows for which `fn(row)` is true. Streaming."""
        if expr is not None:
            raise ValueError("filter(expr=...): expressions are not supported by the "
                             "reference; pass a row predicate as filter(fn=...).")
        _check_fn("filter", fn)
        return self._with(P.Filter(P.UserFn(fn, tuple(fn_args or ()), dict(fn_kwargs or {}))))

    def add_column(self, col: str, fn: Callable, *, batch_format: str = "pandas",
                   **ray_remote_args) -> Dataset:
        """A column `col` computed as `fn(batch)` from each batch in `batch_format`."""
        _check_fn("add_column", fn)
        fmt = _block.check_format(batch_format)

        def add(batch):
            values = fn(batch)
            table = _block.from_batch(batch, "add_column") if fmt != "pyarrow" else batch
            column = _block.from_batch({col: values}, f"add_column({col!r})").column(0)
            if col in table.column_names:
                return table.set_column(table.column_names.index(col), col, column)
            return table.append_column(col, column)

        return self._with(P.MapBatches(P.UserFn(add), None, fmt))

    def select_columns(self, cols, **ray_remote_args) -> Dataset:
        return self._with(P.Project(select=_check_cols("select_columns", cols)))

    def drop_columns(self, cols, **ray_remote_args) -> Dataset:
        return self._with(P.Project(drop=_check_cols("drop_columns", cols)))

    def rename_columns(self, names: dict, **ray_remote_args) -> Dataset:
        if not isinstance(names, dict):
            raise TypeError(f"rename_columns(names={names!r}): expected a dict old -> new.")
        return self._with(P.Project(rename=dict(names)))

    def random_shuffle(self, *, seed: int | None = None, num_blocks: int | None = None,
                       **ray_remote_args) -> Dataset:
        """All rows in a random order (the same order for the same `seed`).

        All-to-all: the process that iterates the result materialises the whole upstream
        dataset (under a split, every shard's process does). For a cheaper, streaming
        shuffle, use `iter_batches(local_shuffle_buffer_size=...)`."""
        if num_blocks is not None:
            _check_count("random_shuffle", "num_blocks", num_blocks)
        return Dataset(P.all_to_all(self._tasks, num_blocks or max(1, len(self._tasks)),
                                    shuffle=True, seed=seed))

    def repartition(self, num_blocks: int | None = None,
                    target_num_rows_per_block: int | None = None, *, shuffle: bool = False,
                    **kwargs) -> Dataset:
        """The same rows (in order unless `shuffle`) in `num_blocks` blocks.

        All-to-all: the iterating process materialises the upstream dataset."""
        if (num_blocks is None) == (target_num_rows_per_block is None):
            raise ValueError("repartition(): pass exactly one of num_blocks and "
                             "target_num_rows_per_block.")
        if num_blocks is None:
            _check_count("repartition", "target_num_rows_per_block", target_num_rows_per_block)
            total = self.count()
            num_blocks = max(1, -(-total // target_num_rows_per_block))
        _check_count("repartition", "num_blocks", num_blocks)
        return Dataset(P.all_to_all(self._tasks, num_blocks, shuffle=shuffle, seed=None))

    def limit(self, limit: int) -> Dataset:
        """The first `limit` rows. Streaming: execution stops once they are read."""
        _check_count("limit", "limit", limit, minimum=0)
        counts = [t.num_rows for t in self._tasks]
        if None not in counts:
            return Dataset(P.slice_tasks(self._tasks, counts, 0, limit))
        return Dataset([P.Task(_Limited(tuple(self._tasks), limit))])

    def union(self, *other: Dataset) -> Dataset:
        for o in other:
            if not isinstance(o, Dataset):
                raise TypeError(f"union(other={o!r}): expected Datasets.")
        return Dataset(self._tasks + [t for o in other for t in o._tasks])

    # ------------------------------------------------------------------ splits
    def _split_bounds(self, n: int, equal: bool) -> tuple[list[int], list[tuple[int, int]]]:
        counts = P.count_rows(self._tasks)
        total = sum(counts)
        if equal:
            q = total // n
            return counts, [(i * q, (i + 1) * q) for i in range(n)]
        return counts, P.part_bounds(total, n)

    def _shards(self, n: int, equal: bool) -> list[Dataset]:
        counts, bounds = self._split_bounds(n, equal)
        return [Dataset(P.slice_tasks(self._tasks, counts, a, b)) for a, b in bounds]

    def split(self, n: int, *, equal: bool = False, locality_hints=None) -> list:
        """`n` disjoint materialised datasets, in order; `equal=True` drops the last
        `count() % n` rows so all have `count() // n` rows."""
        _check_count("split", "n", n)
        return [s.materialize() for s in self._shards(n, equal)]

    def streaming_split(self, n: int, *, equal: bool = False, locality_hints=None) -> list:
        """`n` iterators over disjoint consecutive parts of the dataset; each iteration of
        one is a fresh execution of its part (an epoch). `equal=True` gives every part
        `count() // n` rows, dropping the last `count() % n`.

        Unlike Ray's (a coordinator hands blocks out as they are produced), the parts are
        fixed row ranges, decided here: the row counts come from the files' metadata, or,
        after filter / flat_map / map_batches, from one counting execution now."""
        from reference.data._iterator import DataIterator

        _check_count("streaming_split", "n", n)
        seed = uuid.uuid4().int & 0xFFFFFFFF
        return [DataIterator(s, seed=seed, shard=(i, n)) for i, s in
                enumerate(self._shards(n, equal))]

    def train_test_split(self, test_size: int | float, *, shuffle: bool = False,
                         seed: int | None = None, stratify: str | None = None) -> tuple:
        if stratify is not None:
            raise ValueError("train_test_split(stratify=...): not supported by the reference.")
        if isinstance(test_size, bool) or not isinstance(test_size, (int, float)):
            raise TypeError(f"train_test_split(test_size={test_size!r}): expected an int "
                            "(rows) or a float (fraction).")
        if isinstance(test_size, float) and not 0 < test_size < 1:
            raise ValueError(f"train_test_split(test_size={test_size!r}): a float must be "
                             "between 0 and 1 (the test fraction).")
        # one execution: the split points come from the materialised blocks
        whole = (self.random_shuffle(seed=seed) if shuffle else self).materialize()
        counts = [t.num_rows for t in whole._tasks]
        total = sum(counts)
        if isinstance(test_size, float):
            n_test = int(total * test_size + 0.5)
        elif not 0 < test_size < total:
            raise ValueError(f"train_test_split(test_size={test_size!r}): an int must be "
                             f"between 1 and the row count minus one ({total - 1}).")
        else:
            n_test = test_size
        cut = total - n_test
        return (MaterializedDataset(P.slice_tasks(whole._tasks, counts, 0, cut)),
                MaterializedDataset(P.slice_tasks(whole._tasks, counts, cut, total)))

    # ------------------------------------------------------------------ consuming
    def iterator(self):
        from reference.data._iterator import DataIterator

        return DataIterator(self)

    def iter_batches(self, **kwargs):
        return self.iterator().iter_batches(**kwargs)

    def iter_torch_batches(self, **kwargs):
        return self.iterator().iter_torch_batches(**kwargs)

    def iter_rows(self):
        return self.iterator().iter_rows()

    def count(self) -> int:
        known = self._known_count()
        return known if known is not None else sum(P.count_rows(self._tasks))

    def take(self, limit: int = 20) -> list[dict]:
        _check_count("take", "limit", limit, minimum=0)
        return list(self.limit(limit).iter_rows())

    def take_all(self, limit: int | None = None) -> list[dict]:
        rows = list(self.iter_rows())
        if limit is not None and len(rows) > limit:
            raise ValueError(f"take_all(limit={limit}): the dataset has more rows than that; "
                             "call .limit() first or raise the limit.")
        return rows

    def take_batch(self, batch_size: int = 20, *, batch_format: str | None = "default"):
        _check_count("take_batch", "batch_size", batch_size)
        for batch in self.limit(batch_size).iter_batches(batch_size=batch_size,
                                                         batch_format=batch_format,
                                                         prefetch_batches=0):
            return batch
        raise ValueError("take_batch(): the dataset is empty.")

    def schema(self, fetch_if_missing: bool = True) -> Schema | None:
        for block in self._execute():
            if block.num_columns:
                return Schema(block.schema)
        return None

    def columns(self, fetch_if_missing: bool = True) -> list[str] | None:
        schema = self.schema()
        return None if schema is None else schema.names

    def _to_arrow(self) -> pa.Table:
        return _block.concat(list(self._execute()))

    def to_pandas(self, limit: int | None = None):
        table = self._to_arrow() if limit is None else self.limit(limit + 1)._to_arrow()
        if limit is not None and table.num_rows > limit:
            raise ValueError(f"to_pandas(limit={limit}): the dataset has more than {limit} "
                             "rows; call .limit() first to retrieve fewer rows.")
        return table.to_pandas()

    def materialize(self) -> MaterializedDataset:
        """Executes once and keeps the blocks (one per task) in this process's memory."""
        ctx, tasks = P.ExecCtx(), []
        for task in self._tasks:
            table = _block.concat(list(task.blocks(ctx)))
            tasks.append(P.Task(P.TableRead(table), num_rows=table.num_rows))
        return MaterializedDataset(tasks)

    def write_parquet(self, path: str, *, filesystem=None, **arrow_parquet_args) -> None:
        """One parquet file per task, streamed block by block, named `<uuid>_<task>.parquet`."""
        import pyarrow.parquet as pq

        from reference.data._files import resolve

        (root,), fs = resolve(path, filesystem)
        fs.create_dir(root, recursive=True)
        run = uuid.uuid4().hex[:12]
        ctx = P.ExecCtx()
        for i, task in enumerate(self._tasks):
            writer = None
            target = f"{root.rstrip('/')}/{run}_{i:06d}.parquet"
            try:
                for block in task.blocks(ctx):
                    if not block.num_columns:
                        continue
                    if writer is None:
                        writer = pq.ParquetWriter(target, block.schema, filesystem=fs,
                                                  **arrow_parquet_args)
                    writer.write_table(block)
            finally:
                if writer is not None:
                    writer.close()

    def num_blocks(self) -> int:
        return len(self._tasks)

    @staticmethod
    def copy(ds: Dataset, _deep_copy: bool = False) -> Dataset:
        """A new Dataset of the same plan (Ray's static form: `ds.copy(ds)`)."""
        other = type(ds)(ds._tasks, ds.name)
        other.context = copy.deepcopy(ds.context)
        return other

    def stats(self) -> str:
        return f"{type(self).__name__}: {len(self._tasks)} tasks (the reference keeps no stats)"

    def input_files(self) -> list[str]:
        return sorted({t.read.path for t in self._tasks if hasattr(t.read, "path")})

    def __repr__(self) -> str:
        known = self._known_count()
        rows = "?" if known is None else str(known)
        return f"{type(self).__name__}(num_blocks={len(self._tasks)}, num_rows={rows})"


class MaterializedDataset(Dataset):
    """A dataset whose blocks are in memory (from_items / from_pandas / materialize())."""


class _Limited:
    """The first `limit` rows of tasks whose row counts are unknown: read in order, stop."""

    def __init__(self, tasks: tuple, limit: int):
        self.tasks, self.limit = tasks, limit

    def blocks(self, ctx):
        left = self.limit
        for task in self.tasks:
            if left <= 0:
                return
            for block in task.blocks(ctx):
                if block.num_rows >= left:
                    yield block.slice(0, left)
                    return
                left -= block.num_rows
                yield block

