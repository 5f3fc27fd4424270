"""Blocks and batches: a block is a `pyarrow.Table`; batches are what user functions see.

Batch formats (Ray's names): "numpy" (the default, "default") is a dict of column name to
`numpy.ndarray`, "pandas" a `pandas.DataFrame`, "pyarrow" a `pyarrow.Table`. Columns of
multi-dimensional arrays travel as Arrow fixed-shape tensors, so a numpy batch gets its
ndarray back with the shape it had.
"""

from __future__ import annotations

from typing import Any, Iterator

import numpy as np
import pyarrow as pa

FORMATS = ("default", "numpy", "pandas", "pyarrow")


def check_format(batch_format: str | None, arg: str = "batch_format") -> str:
    if batch_format is None:
        return "pyarrow"  # Ray: None means the block's own format
    if batch_format not in FORMATS:
        raise ValueError(f"{arg}={batch_format!r}: expected one of {', '.join(map(repr, FORMATS))}"
                         " (or None for the block's own format).")
    return "numpy" if batch_format == "default" else batch_format


def _column_to_numpy(column: pa.ChunkedArray) -> np.ndarray:
    chunk = column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()
    if isinstance(column.type, pa.FixedShapeTensorType):
        return chunk.to_numpy_ndarray()
    return chunk.to_numpy(zero_copy_only=False)


def to_numpy(table: pa.Table) -> dict[str, np.ndarray]:
    return {name: _column_to_numpy(table.column(name)) for name in table.column_names}


def _array(values: Any) -> pa.Array:
    if isinstance(values, (pa.Array, pa.ChunkedArray)):
        return values
    array = np.asarray(values) if not isinstance(values, np.ndarray) else values
    if array.ndim > 1:
        return pa.FixedShapeTensorArray.from_numpy_ndarray(np.ascontiguousarray(array))
    return pa.array(array)


def from_batch(batch: Any, where: str) -> pa.Table:
    """A user function's batch (dict of arrays, DataFrame or Table) as a block."""
    if isinstance(batch, pa.Table):
        return batch
    if isinstance(batch, pa.RecordBatch):
        return pa.Table.from_batches([batch])
    if isinstance(batch, dict):
        try:
            return pa.table({str(k): _array(v) for k, v in batch.items()})
        except (pa.ArrowInvalid, ValueError) as exc:
            raise ValueError(f"{where} returned a dict whose columns are not arrays of one "
                             f"length: {exc}") from exc
    try:
        import pandas as pd
    except ImportError:  # pragma: no cover - pandas is a dependency of the data layer
        pd = None
    if pd is not None and isinstance(batch, pd.DataFrame):
        return pa.Table.from_pandas(batch, preserve_index=False)
    raise TypeError(f"{where} returned {type(batch).__name__}; a batch function must return "
                    "a dict of column name to array, a pandas.DataFrame or a pyarrow.Table.")


def to_batch(table: pa.Table, batch_format: str) -> Any:
    if batch_format == "numpy":
        return to_numpy(table)
    if batch_format == "pandas":
        return table.to_pandas()
    return table


def rows(table: pa.Table) -> Iterator[dict]:
    tensor = [n for n in table.column_names if isinstance(table.column(n).type,
                                                          pa.FixedShapeTensorType)]
    if not tensor:
        yield from table.to_pylist()
        return
    arrays = {n: _column_to_numpy(table.column(n)) for n in tensor}
    plain = table.drop_columns(tensor).to_pylist()
    for i, row in enumerate(plain):
        row.update({n: a[i] for n, a in arrays.items()})
        yield {n: row[n] for n in table.column_names}


def from_rows(items: list[dict], where: str) -> pa.Table:
    if not items:
        return pa.table({})
    if not all(isinstance(r, dict) for r in items):
        bad = next(r for r in items if not isinstance(r, dict))
        raise TypeError(f"{where} returned {type(bad).__name__}; a row function must return "
                        "a dict of column name to value.")
    columns = list(dict.fromkeys(k for r in items for k in r))
    return pa.table({c: _array_of_values([r.get(c) for r in items]) for c in columns})


def _array_of_values(values: list) -> pa.Array:
    if values and all(isinstance(v, np.ndarray) and v.ndim >= 1 for v in values):
        return _array(np.stack(values))
    return pa.array(values)


def rebatch(blocks: Iterator[pa.Table], batch_size: int | None,
            drop_last: bool = False) -> Iterator[pa.Table]:
    """Tables of exactly `batch_size` rows (the last one shorter unless drop_last); with
    batch_size None, each non-empty block as it comes."""
    if batch_size is None:
        for block in blocks:
            if block.num_rows:
                yield block
        return
    pending: list[pa.Table] = []
    have = 0
    for block in blocks:
        offset = 0
        if pending and have + block.num_rows >= batch_size:
            need = batch_size - have
            yield pa.concat_tables(pending + [block.slice(0, need)]).combine_chunks()
            pending, have, offset = [], 0, need
        while block.num_rows - offset >= batch_size:
            yield block.slice(offset, batch_size)
            offset += batch_size
        if offset < block.num_rows:
            pending.append(block.slice(offset))
            have += block.num_rows - offset
    if have and not drop_last:
        yield pa.concat_tables(pending).combine_chunks()


def concat(blocks: list[pa.Table]) -> pa.Table:
    blocks = [b for b in blocks if b.num_columns]
    if not blocks:
        return pa.table({})
    return pa.concat_tables(blocks, promote_options="default")
