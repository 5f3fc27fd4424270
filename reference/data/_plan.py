"""The lazy plan: a dataset is a list of tasks; a task streams blocks through operators.

A `Task` is one unit of streaming work: a read (a file fragment, a row group, an in-memory
table, a slice of another task, a part of an all-to-all result) and the chain of per-block
operators applied to what it reads. Transforming a dataset appends an operator to every
task; nothing runs until a consumer iterates. A task knows its row count when its read does
(file metadata, table length) and every operator keeps rows one to one; otherwise it is
None, and whoever needs it (an equal split) counts by executing.

Design note: execution is streaming and pull-based: a consumer pulls a block from the last
operator, which pulls from the one before, down to the read. At most one block per operator
plus the read's own readahead is alive at a time, whatever the dataset's size. All-to-all
operators (`random_shuffle`, `repartition`) are reads over their upstream tasks that
materialise it, once per execution (`ExecCtx.cache`), in the process that runs them.

Randomness: an unseeded shuffle draws a fresh permutation at each execution, except under a
split, where every shard must agree on one permutation per epoch: the split fixes
`ExecCtx.seed`, and the epoch number is mixed in.
"""

from __future__ import annotations

import abc
import dataclasses
import itertools
import uuid
from typing import Any, Callable, Iterator

import numpy as np
import pyarrow as pa

from reference.data import _block


@dataclasses.dataclass
class ExecCtx:
    """One execution (an epoch of one iterator): seeds and the all-to-all results."""

    epoch: int = 0
    seed: int | None = None
    cache: dict = dataclasses.field(default_factory=dict)

    def rng(self, seed: int | None, salt: str) -> np.random.Generator:
        if seed is not None:
            return np.random.default_rng(seed)
        if self.seed is not None:
            return np.random.default_rng([self.seed, self.epoch, int(salt[:8], 16)])
        return np.random.default_rng()


class Op(abc.ABC):
    """A per-block operator. `keeps_rows`: one output row per input row, in order."""

    keeps_rows = False

    @abc.abstractmethod
    def apply(self, blocks: Iterator[pa.Table], ctx: ExecCtx) -> Iterator[pa.Table]: ...


#: callable-class instances, built once per process (Ray builds one per actor)
_instances: dict[str, Any] = {}


@dataclasses.dataclass
class UserFn:
    fn: Any
    args: tuple = ()
    kwargs: dict = dataclasses.field(default_factory=dict)
    ctor_args: tuple = ()
    ctor_kwargs: dict = dataclasses.field(default_factory=dict)
    uid: str = dataclasses.field(default_factory=lambda: uuid.uuid4().hex)

    def resolve(self) -> Callable:
        if not isinstance(self.fn, type):
            return self.fn
        instance = _instances.get(self.uid)
        if instance is None:
            instance = _instances[self.uid] = self.fn(*self.ctor_args, **self.ctor_kwargs)
        return instance

    def __call__(self, value):
        return self.resolve()(value, *self.args, **self.kwargs)

    @property
    def name(self) -> str:
        return getattr(self.fn, "__name__", type(self.fn).__name__)


@dataclasses.dataclass
class MapBatches(Op):
    fn: UserFn
    batch_size: int | None
    batch_format: str

    def apply(self, blocks, ctx):
        where = f"map_batches({self.fn.name})"
        for batch in _block.rebatch(blocks, self.batch_size):
            out = self.fn(_block.to_batch(batch, self.batch_format))
            if out is None:
                raise TypeError(f"{where} returned None; return the transformed batch.")
            if hasattr(out, "__next__"):  # a generator function yields several batches
                for part in out:
                    yield _block.from_batch(part, where)
            else:
                yield _block.from_batch(out, where)


@dataclasses.dataclass
class MapRows(Op):
    fn: UserFn
    keeps_rows = True

    def apply(self, blocks, ctx):
        for block in blocks:
            yield _block.from_rows([self.fn(r) for r in _block.rows(block)],
                                   f"map({self.fn.name})")


@dataclasses.dataclass
class FlatMap(Op):
    fn: UserFn

    def apply(self, blocks, ctx):
        for block in blocks:
            out = [o for r in _block.rows(block) for o in self.fn(r)]
            yield _block.from_rows(out, f"flat_map({self.fn.name})")


@dataclasses.dataclass
class Filter(Op):
    fn: UserFn

    def apply(self, blocks, ctx):
        for block in blocks:
            keep = [bool(self.fn(r)) for r in _block.rows(block)]
            yield block.filter(pa.array(keep, type=pa.bool_())) if keep else block


@dataclasses.dataclass
class Project(Op):
    """select_columns / drop_columns / rename_columns: Arrow does it without copying."""

    select: tuple | None = None
    drop: tuple = ()
    rename: dict | None = None
    keeps_rows = True

    def apply(self, blocks, ctx):
        for block in blocks:
            if self.select is not None:
                missing = [c for c in self.select if c not in block.column_names]
                if missing:
                    raise ValueError(f"select_columns(cols={list(self.select)!r}): no column "
                                     f"{missing[0]!r}; the columns are {block.column_names}.")
                block = block.select(list(self.select))
            if self.drop:
                missing = [c for c in self.drop if c not in block.column_names]
                if missing:
                    raise ValueError(f"drop_columns(cols={list(self.drop)!r}): no column "
                                     f"{missing[0]!r}; the columns are {block.column_names}.")
                block = block.drop_columns(list(self.drop))
            if self.rename:
                block = block.rename_columns([self.rename.get(c, c) for c in block.column_names])
            yield block


@dataclasses.dataclass
class Task:
    read: Any  # an object with .blocks(ctx) -> Iterator[pa.Table]
    ops: tuple = ()
    num_rows: int | None = None

    def blocks(self, ctx: ExecCtx) -> Iterator[pa.Table]:
        stream = self.read.blocks(ctx)
        for op in self.ops:
            stream = op.apply(stream, ctx)
        return stream

    def then(self, op: Op) -> Task:
        return Task(self.read, self.ops + (op,), self.num_rows if op.keeps_rows else None)


# ------------------------------------------------------------------------------- reads
@dataclasses.dataclass
class TableRead:
    table: pa.Table

    def blocks(self, ctx):
        yield self.table


@dataclasses.dataclass
class RangeRead:
    start: int
    stop: int
    column: str = "id"

    def blocks(self, ctx):
        step = 1 << 16
        for a in range(self.start, self.stop, step):
            b = min(a + step, self.stop)
            yield pa.table({self.column: pa.array(np.arange(a, b, dtype=np.int64))})


@dataclasses.dataclass
class SliceRead:
    """Rows [start, stop) of another task's output; `counted` says the parent's row count was
    taken by executing it (it must come out the same again)."""

    parent: Task
    start: int
    stop: int
    counted: bool = False

    def blocks(self, ctx):
        seen = 0
        for block in self.parent.blocks(ctx):
            a, b = max(self.start - seen, 0), min(self.stop - seen, block.num_rows)
            seen += block.num_rows
            if b > a:
                yield block.slice(a, b - a)
            if seen >= self.stop:
                return
        if self.counted and seen < self.stop:
            raise RuntimeError(
                f"a split of this dataset expected {self.stop} rows from one of its parts, "
                f"which gave {seen} this time: an equal split counts the rows of a dataset "
                "with filter/flat_map/map_batches before splitting it, so those functions "
                "must give the same rows on every execution (seed their randomness).")


@dataclasses.dataclass
class AllToAllPart:
    """Part `index` of `parts` of the upstream tasks' rows, materialised once per execution;
    shuffled when `shuffle` (with `seed`, or the execution's seed)."""

    upstream: tuple
    parts: int
    index: int
    shuffle: bool
    seed: int | None
    key: str

    def blocks(self, ctx):
        table = ctx.cache.get(self.key)
        if table is None:
            table = _block.concat([b for t in self.upstream for b in t.blocks(ctx)])
            if self.shuffle and table.num_rows:
                order = ctx.rng(self.seed, self.key).permutation(table.num_rows)
                table = table.take(pa.array(order))
            ctx.cache[self.key] = table
        start, stop = part_bounds(table.num_rows, self.parts)[self.index]
        yield table.slice(start, stop - start)


def part_bounds(total: int, parts: int) -> list[tuple[int, int]]:
    """[start, stop) of `parts` near-equal consecutive parts of `total` rows."""
    edges = [total * i // parts for i in range(parts + 1)]
    return list(itertools.pairwise(edges))


def all_to_all(tasks: list[Task], parts: int, shuffle: bool, seed: int | None) -> list[Task]:
    known = [t.num_rows for t in tasks]
    total = sum(known) if None not in known else None
    key = uuid.uuid4().hex
    return [Task(AllToAllPart(tuple(tasks), parts, i, shuffle, seed, key),
                 num_rows=None if total is None else b - a)
            for i, (a, b) in enumerate(part_bounds(total or 0, parts))]


def count_rows(tasks: list[Task]) -> list[int]:
    """Each task's row count, executing the ones that do not know it."""
    ctx = ExecCtx()
    return [t.num_rows if t.num_rows is not None else sum(b.num_rows for b in t.blocks(ctx))
            for t in tasks]


def slice_tasks(tasks: list[Task], counts: list[int], start: int, stop: int) -> list[Task]:
    """Tasks that give rows [start, stop) of the concatenated output of `tasks`."""
    out, offset = [], 0
    for task, n in zip(tasks, counts, strict=True):
        a, b = max(start - offset, 0), min(stop - offset, n)
        if b > a:
            if a == 0 and b == n and task.num_rows is not None:
                out.append(task)
            else:
                out.append(Task(SliceRead(task, a, b, counted=task.num_rows is None),
                                num_rows=b - a))
        offset += n
    return out
