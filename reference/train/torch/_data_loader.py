"""A DataLoader whose batches arrive on the worker's device.

The wrapper is a view of the loader it wraps: it shares that loader's attributes (so
`loader.sampler.set_epoch(epoch)` reaches the DistributedSampler, and `len()`,
`batch_size`, `dataset` read the same) and only moves each batch, recursively through
dicts, lists and tuples. On a CUDA device with auto_transfer, batch k+1 is copied on a
side stream while batch k is used: before handing a batch out, the compute stream waits
for its copy, and each tensor is marked as used by the compute stream so the allocator
does not recycle its memory while the side stream still owns it.
"""

from __future__ import annotations

import collections.abc
import logging

import torch
from torch.utils.data import DataLoader

logger = logging.getLogger(__name__)

_END = object()


def _is_namedtuple(item) -> bool:
    return isinstance(item, tuple) and hasattr(item, "_fields")


def move_to_device(item, device: torch.device, non_blocking: bool = False):
    """item with every tensor inside it (dicts, lists, tuples) moved to device."""
    if isinstance(item, torch.Tensor):
        return item.to(device, non_blocking=non_blocking)
    if isinstance(item, collections.abc.Mapping):
        return {k: move_to_device(v, device, non_blocking) for k, v in item.items()}
    if _is_namedtuple(item):
        return type(item)(*(move_to_device(v, device, non_blocking) for v in item))
    if isinstance(item, (tuple, list)):
        return type(item)(move_to_device(v, device, non_blocking) for v in item)
    return item


def _tensors(item):
    if isinstance(item, torch.Tensor):
        yield item
    elif isinstance(item, collections.abc.Mapping):
        for value in item.values():
            yield from _tensors(value)
    elif isinstance(item, (tuple, list)):
        for value in item:
            yield from _tensors(value)


class DeviceDataLoader(DataLoader):
    """Iterates `loader`, yielding its batches on `device`."""

    def __init__(self, loader: DataLoader, device: torch.device, auto_transfer: bool):
        # Deliberately not DataLoader.__init__: sharing the wrapped loader's state is what
        # keeps its sampler, dataset and batch size visible through this object.
        self.__dict__.update(getattr(loader, "__dict__", {}))
        self._loader = loader
        self.device = device
        self._stream = None
        if device.type == "cuda" and auto_transfer:
            self._stream = torch.cuda.Stream(device)

    def __len__(self) -> int:
        return len(self._loader)

    def __iter__(self):
        if self._stream is None:
            for batch in self._loader:
                yield move_to_device(batch, self.device)
            return
        yield from self._iter_prefetched(iter(self._loader))

    def _copy_next(self, iterator):
        batch = next(iterator, _END)
        if batch is _END:
            return _END
        with torch.cuda.stream(self._stream):
            return move_to_device(batch, self.device, non_blocking=True)

    def _iter_prefetched(self, iterator):
        upcoming = self._copy_next(iterator)
        while upcoming is not _END:
            batch = upcoming
            compute = torch.cuda.current_stream(self.device)
            compute.wait_stream(self._stream)
            for tensor in _tensors(batch):
                if tensor.device.type == "cuda":
                    tensor.record_stream(compute)
            upcoming = self._copy_next(iterator)
            yield batch
