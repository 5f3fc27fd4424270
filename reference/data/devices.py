"""What `iter_torch_batches(device="auto")` means: the training layer, where a training
function runs, installs its own resolver (`reference.train.torch.get_device`, as in Ray);
everywhere else "auto" is the CPU."""

from __future__ import annotations

from typing import Callable

_resolver: Callable | None = None


def set_auto_device(resolver: Callable | None) -> None:
    global _resolver
    _resolver = resolver


def auto_device():
    import torch

    if _resolver is None:
        return torch.device("cpu")
    try:
        return _resolver()
    except RuntimeError:  # not inside a training function (any more)
        return torch.device("cpu")
