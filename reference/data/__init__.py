"""The part of Ray Data that training code touches, over `pyarrow.dataset` and pyarrow
tables: create (`from_*`, `range`, `read_*`), transform lazily (`map_batches`, `map`,
`filter`, ...), consume streaming (`iter_batches`, `iter_torch_batches`, ...), and split
per training worker (`streaming_split`, what `datasets=` on a trainer does)."""

from reference.data._context import DataContext, ExecutionOptions, ExecutionResources
from reference.data._dataset import Dataset, Schema
from reference.data._iterator import DataIterator
from reference.data._read_api import (
    from_arrow,
    from_items,
    from_numpy,
    from_pandas,
    range,  # noqa: A004 - Ray's name
    read_csv,
    read_json,
    read_parquet,
)

__all__ = [
    "DataContext",
    "DataIterator",
    "Dataset",
    "ExecutionOptions",
    "ExecutionResources",
    "Schema",
    "from_arrow",
    "from_items",
    "from_numpy",
    "from_pandas",
    "range",
    "read_csv",
    "read_json",
    "read_parquet",
]
