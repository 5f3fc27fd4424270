"""`DataIterator`: batches, rows and torch tensors out of a dataset (or one shard of it).

Each `iter_*` call is one epoch: a fresh execution of the plan. Batches are cut from the
block stream to exactly `batch_size` rows (the last one shorter unless `drop_last`), an
optional local shuffle buffer mixes rows across blocks, and with `prefetch_batches > 0` a
background thread executes the plan, up to `prefetch_batches` blocks ahead of the consumer
(the readers and pyarrow release the GIL, so reading overlaps the training step), while the
consumer cuts batches and converts them.

Hazard: a consumer may stop early (`break`, an exception). The producer thread then must
not block forever on a full queue: it puts with a timeout and checks a stop flag, which the
generator's `finally` sets; the thread is a daemon and ends at its next put.
"""

from __future__ import annotations

import queue
import threading
import warnings
from typing import Any, Iterator

import numpy as np
import pyarrow as pa

from reference.data import _block
from reference.data import _plan as P

_DONE = object()


class _Raised:
    def __init__(self, error: BaseException):
        self.error = error


def _prefetched(make: Any, depth: int) -> Iterator:
    """Iterate `make()` in a daemon thread, at most `depth` items ahead."""
    items: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def put(item) -> bool:
        while not stop.is_set():
            try:
                items.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def produce():
        try:
            for item in make():
                if not put(item):
                    return
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer
            put(_Raised(exc))
            return
        put(_DONE)

    thread = threading.Thread(target=produce, name="reference-data-prefetch", daemon=True)
    thread.start()
    try:
        while True:
            item = items.get()
            if item is _DONE:
                return
            if isinstance(item, _Raised):
                raise item.error
            yield item
    finally:
        stop.set()


def _local_shuffle(batches: Iterator[pa.Table], buffer_size: int, batch_size: int | None,
                   seed: int | None) -> Iterator[pa.Table]:
    """Rows drawn at random from a buffer of at least `buffer_size` rows."""
    rng = np.random.default_rng(seed)
    held: list[pa.Table] = []
    have = 0
    step = batch_size or buffer_size

    def draw(table: pa.Table, keep: int):
        order = rng.permutation(table.num_rows)
        out = table.take(pa.array(order[keep:])) if keep < table.num_rows else None
        rest = table.take(pa.array(order[:keep])) if keep else None
        return out, rest

    for block in batches:
        held.append(block)
        have += block.num_rows
        if have >= buffer_size + step:
            table = _block.concat(held)
            emit = (have - buffer_size) // step * step
            out, rest = draw(table, have - emit)
            held, have = ([rest] if rest is not None else []), have - emit
            yield out
    if have:
        out, _ = draw(_block.concat(held), 0)
        yield out


def _resolve_device(device):
    import torch

    if device == "auto":
        from reference.data.devices import auto_device

        return auto_device()
    return torch.device(device) if isinstance(device, str) else device


def _to_device(value, device):
    import torch

    if isinstance(value, torch.Tensor):
        return value if value.device == device else value.to(device)
    if isinstance(value, dict):
        return {k: _to_device(v, device) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_to_device(v, device) for v in value)
    return value


_quiet = False


def _tensors(batch: dict, dtypes, device) -> dict:
    global _quiet
    if not _quiet:
        # Arrow's buffers are read-only; the tensors share them instead of copying, as
        # Ray's do (writing into a batch tensor in place needs .clone() first). torch warns
        # about that once per process: let the first batch take the warning, silently.
        _quiet = True
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
            return _tensors(batch, dtypes, device)
    import torch

    out = {}
    cpu = device.type == "cpu"
    for name, array in batch.items():
        dtype = dtypes.get(name) if isinstance(dtypes, dict) else dtypes
        if array.dtype == object:
            array = _stacked(name, array)
        if dtype is None and cpu:
            out[name] = torch.from_numpy(array)  # shares the buffer; as_tensor checks more
        else:
            out[name] = torch.as_tensor(array, dtype=dtype, device=device)
    return out


def _stacked(name: str, array: np.ndarray) -> np.ndarray:
    """An object column as one tensor: rows that are equal-shaped numeric arrays (a list
    column of equal lengths) stack, as in Ray; anything else (ragged rows, strings, objects)
    is an error naming the column."""
    rows = list(array)
    if rows and all(isinstance(r, np.ndarray) and r.dtype != object for r in rows) \
            and len({r.shape for r in rows}) == 1:
        return np.stack(rows)
    kind = ("rows of different shapes (a ragged column)" if rows and all(
        isinstance(r, np.ndarray) for r in rows)
        else f"{type(rows[0]).__name__ if rows else 'object'} values")
    raise TypeError(f"iter_torch_batches(): column {name!r} holds {kind}, which one torch "
                    "tensor cannot hold; drop, pad or encode it first (e.g. map_batches or "
                    "select_columns).")


class _IterableFromIterator:
    """What iter_batches / iter_torch_batches / iter_rows return (Ray's type name, which
    the Transformers integration recognises): each `iter()` of it is a fresh epoch."""

    def __init__(self, make):
        self._make = make

    def __iter__(self):
        return iter(self._make())


class DataIterator:
    """Iterates one dataset (or one shard of a split) epoch after epoch."""

    def __init__(self, dataset, seed: int | None = None, shard: tuple | None = None):
        self._dataset, self._seed, self._shard = dataset, seed, shard
        self._epoch = 0

    def _blocks(self) -> Iterator[pa.Table]:
        ctx = P.ExecCtx(epoch=self._epoch, seed=self._seed)
        self._epoch += 1
        return self._dataset._execute(ctx)

    @staticmethod
    def _check(batch_size, shuffle_size, prefetch_batches) -> None:
        if batch_size is not None and (not isinstance(batch_size, int) or batch_size < 1):
            raise ValueError(f"batch_size={batch_size!r}: expected a positive int or None "
                             "(whole blocks).")
        if shuffle_size is not None and (not isinstance(shuffle_size, int) or shuffle_size < 1):
            raise ValueError(f"local_shuffle_buffer_size={shuffle_size!r}: expected a "
                             "positive int or None.")
        if not isinstance(prefetch_batches, int) or prefetch_batches < 0:
            raise ValueError(f"prefetch_batches={prefetch_batches!r}: expected an int >= 0.")

    def _batches(self, batch_size, drop_last, shuffle_size, shuffle_seed,
                 prefetch: int) -> Iterator[pa.Table]:
        # The prefetch thread executes the plan (reads, decodes, runs the operators): the
        # work that releases the GIL or is the user's. Cutting blocks into batches and
        # converting them stays with the consumer: per batch it is cheap Python, and
        # handing every small batch across threads would cost more than it saves.
        blocks = _prefetched(self._blocks, prefetch) if prefetch else self._blocks()
        if shuffle_size is not None:
            blocks = _local_shuffle(blocks, shuffle_size, batch_size, shuffle_seed)
        return _block.rebatch(blocks, batch_size, drop_last)

    def iter_batches(self, *, prefetch_batches: int = 1, batch_size: int | None = 256,
                     batch_format: str | None = "default", drop_last: bool = False,
                     local_shuffle_buffer_size: int | None = None,
                     local_shuffle_seed: int | None = None) -> Iterator:
        fmt = _block.check_format(batch_format)
        self._check(batch_size, local_shuffle_buffer_size, prefetch_batches)

        def make():
            for table in self._batches(batch_size, drop_last, local_shuffle_buffer_size,
                                       local_shuffle_seed, prefetch_batches):
                yield _block.to_batch(table, fmt)

        return _IterableFromIterator(make)

    def iter_torch_batches(self, *, prefetch_batches: int = 1, batch_size: int | None = 256,
                           dtypes=None, device="auto", collate_fn=None, drop_last: bool = False,
                           local_shuffle_buffer_size: int | None = None,
                           local_shuffle_seed: int | None = None,
                           pin_memory: bool = False) -> Iterator:
        """Batches as dicts of torch tensors (`dtypes`: one torch dtype or a dict per
        column), on `device` ("auto": the training worker's device, else the CPU); with
        `collate_fn`, its value for each batch (a dict of numpy arrays, or a pandas /
        pyarrow batch for the matching collate classes of `reference.data.collate_fn`)."""
        if collate_fn is not None and dtypes is not None:
            raise ValueError("collate_fn cannot be used with dtypes. You should manually "
                             "convert the output Torch tensors to the desired dtype inside "
                             "collate_fn.")
        target = _resolve_device(device)
        fmt = "numpy"
        if collate_fn is not None:
            from reference.data import collate_fn as collate

            fmt = collate.batch_format_of(collate_fn)
        self._check(batch_size, local_shuffle_buffer_size, prefetch_batches)

        def make():
            for table in self._batches(batch_size, drop_last, local_shuffle_buffer_size,
                                       local_shuffle_seed, prefetch_batches):
                batch = _block.to_batch(table, fmt)
                if collate_fn is not None:
                    out = collate_fn(batch)
                    yield out if target.type == "cpu" else _to_device(out, target)
                else:
                    yield _tensors(batch, dtypes, target)

        return _IterableFromIterator(make)

    def iter_rows(self) -> _IterableFromIterator:
        def make():
            for block in self._blocks():
                yield from _block.rows(block)

        return _IterableFromIterator(make)

    def materialize(self):
        """This iterator's rows (one epoch), kept in memory as a MaterializedDataset."""
        return self._dataset._of_table(_block.concat(list(self._blocks())))

    def schema(self):
        return self._dataset.schema()

    def stats(self) -> str:
        return self._dataset.stats()

    def __repr__(self) -> str:
        where = "" if self._shard is None else f"shard {self._shard[0]} of {self._shard[1]}, "
        return f"DataIterator({where}{self._dataset!r})"
