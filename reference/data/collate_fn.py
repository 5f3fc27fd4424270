"""Collate functions for `iter_torch_batches(collate_fn=...)` that choose the batch format
they receive: a plain function (or a `NumpyBatchCollateFn`) gets a dict of numpy arrays, an
`ArrowBatchCollateFn` a `pyarrow.Table`, a `PandasBatchCollateFn` a `pandas.DataFrame`."""

from __future__ import annotations

import abc

__all__ = ["ArrowBatchCollateFn", "CollateFn", "NumpyBatchCollateFn", "PandasBatchCollateFn"]


class CollateFn(abc.ABC):
    """Base class: subclasses implement `__call__(batch)`."""

    batch_format = "numpy"

    @abc.abstractmethod
    def __call__(self, batch): ...


class NumpyBatchCollateFn(CollateFn):
    batch_format = "numpy"


class ArrowBatchCollateFn(CollateFn):
    batch_format = "pyarrow"


class PandasBatchCollateFn(CollateFn):
    batch_format = "pandas"


def batch_format_of(collate_fn) -> str:
    if not callable(collate_fn):
        raise TypeError(f"collate_fn={collate_fn!r}: expected a callable.")
    return collate_fn.batch_format if isinstance(collate_fn, CollateFn) else "numpy"
