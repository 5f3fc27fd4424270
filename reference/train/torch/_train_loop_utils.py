"""What a PyTorch training function calls: devices, model and data-loader preparation.

Each works in a worker of a distributed run and in local mode (where the devices are the
current CUDA device or the CPU); outside a training function, get_device(s) and the
prepare functions raise RuntimeError.
"""

from __future__ import annotations

import logging
import os
import random
from typing import Any, Optional, Union

import torch
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import (
    DataLoader,
    DistributedSampler,
    IterableDataset,
    RandomSampler,
    SequentialSampler,
)

from reference.train._internal.local_mode import LocalSession
from reference.train._internal.session import get_session
from reference.train.torch import _devices
from reference.train.torch._data_loader import DeviceDataLoader

logger = logging.getLogger(__name__)

_AMP_DEPRECATED = (
    "The `accelerate`, `backward`, and `prepare_optimizer` utility methods in the "
    "`ray.train.torch` module are deprecated and will be removed in a future release. "
    "Please use the native PyTorch mixed precision API directly, or a library such as "
    "Lightning or HuggingFace Transformers/Accelerate. See this issue for more context: "
    "https://github.com/ray-project/ray/issues/49454"
)
_FSDP_NEEDS_GPU = (
    "FSDP is only available with GPU-enabled training. Set `use_gpu=True` in your Trainer "
    "to train with GPUs."
)


def get_devices() -> list[torch.device]:
    """The torch devices of this worker: its GPUs (lowest id first), else [cpu]."""
    session = get_session("get_devices")
    if isinstance(session, LocalSession):
        return _devices.local_devices()
    return _devices.worker_devices()


def get_device() -> torch.device:
    """The first of `get_devices()`."""
    get_session("get_device")
    return get_devices()[0]


def _context():
    return get_session("get_context").context


def _log(rank: int, message: str, *args) -> None:
    # Every rank does the same thing; say it once.
    logger.log(logging.INFO if rank == 0 else logging.DEBUG, message, *args)


def prepare_model(
    model: torch.nn.Module,
    move_to_device: Union[bool, torch.device] = True,
    parallel_strategy: Optional[str] = "ddp",
    parallel_strategy_kwargs: Optional[dict[str, Any]] = None,
) -> torch.nn.Module:
    """Move the model to this worker's device and, with more than one worker, wrap it in
    DistributedDataParallel ("ddp") or FullyShardedDataParallel ("fsdp"; any other truthy
    value too). `parallel_strategy=None` leaves it unwrapped; `parallel_strategy_kwargs`
    go to the wrapper."""
    context = _context()
    rank = context.get_local_rank()
    kwargs = dict(parallel_strategy_kwargs or {})
    device = move_to_device if isinstance(move_to_device, torch.device) else get_device()
    if torch.cuda.is_available() and device.type == "cuda":
        torch.cuda.set_device(device)
    if move_to_device:
        _log(rank, "Moving model to device: %s", device)
        model = model.to(device)
    if not parallel_strategy or context.get_world_size() <= 1:
        return model
    if parallel_strategy == "ddp":
        wrapper = DistributedDataParallel
        if torch.cuda.is_available() and device.type != "cpu":
            kwargs = {"device_ids": [device], "output_device": device, **kwargs}
    else:
        if not torch.cuda.is_available():
            raise RuntimeError(_FSDP_NEEDS_GPU)
        from torch.distributed.fsdp import FullyShardedDataParallel as wrapper
    _log(rank, "Wrapping provided model in %s.", wrapper.__name__)
    return wrapper(model, **kwargs)


def _with_distributed_sampler(loader: DataLoader, rank: int) -> DataLoader:
    # DataLoader keeps no `shuffle` flag: the default sampler it built tells (Sequential
    # means shuffle=False). A sampler of the user's own is replaced, with a warning.
    shuffle = not isinstance(loader.sampler, SequentialSampler)
    if not isinstance(loader.sampler, (SequentialSampler, RandomSampler)) and rank == 0:
        logger.warning(
            "The %s will be overwritten with a DistributedSampler. You can disable this by "
            "passing `add_dist_sampler=False` to `prepare_data_loader`.",
            type(loader.sampler).__name__)
    extra = {}
    if loader.num_workers > 0:
        # Worker-process settings are only valid (and only kept) with loader workers.
        extra = dict(prefetch_factor=loader.prefetch_factor,
                     persistent_workers=loader.persistent_workers,
                     multiprocessing_context=loader.multiprocessing_context)
    return DataLoader(
        dataset=loader.dataset, batch_size=loader.batch_size, shuffle=False,
        sampler=DistributedSampler(loader.dataset, shuffle=shuffle),
        num_workers=loader.num_workers, collate_fn=loader.collate_fn,
        pin_memory=loader.pin_memory, drop_last=loader.drop_last, timeout=loader.timeout,
        worker_init_fn=loader.worker_init_fn, generator=loader.generator, **extra)


def prepare_data_loader(
    data_loader: DataLoader,
    add_dist_sampler: bool = True,
    move_to_device: bool = True,
    auto_transfer: bool = True,
) -> DataLoader:
    """Give each worker its share of the data and deliver batches on its device.

    With more than one worker, the loader is rebuilt around a DistributedSampler (same
    shuffle setting; call `loader.sampler.set_epoch(epoch)` each epoch to reshuffle)
    unless it already has one, the dataset is iterable, or add_dist_sampler is False.
    auto_transfer copies the next batch on a side CUDA stream (ignored on the CPU).
    """
    context = _context()
    if (add_dist_sampler and context.get_world_size() > 1
            and not isinstance(data_loader.sampler, DistributedSampler)
            and not isinstance(getattr(data_loader, "dataset", None), IterableDataset)):
        data_loader = _with_distributed_sampler(data_loader, context.get_world_rank())
    if move_to_device:
        data_loader = DeviceDataLoader(data_loader, get_device(), auto_transfer)
    return data_loader


def enable_reproducibility(seed: int = 0) -> None:
    """Seed torch, random and numpy; make torch pick deterministic algorithms.

    This cannot make every run identical (see PyTorch's notes on randomness).
    """
    import numpy as np

    torch.manual_seed(seed)
    random.seed(seed)
    np.random.seed(seed)
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.benchmark = False
    # cuBLAS refuses deterministic mode without a fixed workspace configuration.
    os.environ["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"


def accelerate(amp: bool = False) -> None:
    """Deprecated: raises DeprecationWarning."""
    raise DeprecationWarning(_AMP_DEPRECATED)


def prepare_optimizer(optimizer: torch.optim.Optimizer) -> torch.optim.Optimizer:
    """Deprecated: raises DeprecationWarning."""
    raise DeprecationWarning(_AMP_DEPRECATED)


def backward(tensor: torch.Tensor) -> None:
    """Deprecated: raises DeprecationWarning."""
    raise DeprecationWarning(_AMP_DEPRECATED)
