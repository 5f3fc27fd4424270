"""The training function of the accelerator checks (`conformance/checks/check_accelerators.py`).

`accelerator_view` journals what a worker sees of its accelerators. Whether a real CUDA
device answers is asked of the CUDA driver first (`libcuda`, through ctypes): where there is
no driver or it counts no device, torch cannot reach one either, and the worker is spared
importing torch (seconds per process) just to hear "no". Only where the driver counts a
device does torch answer, as it decides what the worker can use.
"""

from __future__ import annotations

import ctypes
import importlib
import importlib.util
import os

from conformance.probe import Journal


def cuda_driver_devices() -> int:
    """How many CUDA devices the driver library lets this process see (it honours
    CUDA_VISIBLE_DEVICES); 0 where there is no driver library or it cannot start."""
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return 0
    count = ctypes.c_int(0)
    try:
        if lib.cuInit(0) != 0 or lib.cuDeviceGetCount(ctypes.byref(count)) != 0:
            return 0
    except AttributeError:  # not a CUDA driver library
        return 0
    return count.value


def real_cuda() -> bool | None:
    """Whether torch reaches a real CUDA device here (None: torch is not installed)."""
    if importlib.util.find_spec("torch") is None:
        return None
    if cuda_driver_devices() == 0:
        return False
    import torch

    return bool(torch.cuda.is_available())


def accelerator_view(config: dict) -> None:
    """A training function that journals (`accelerator` events) what its worker sees of
    accelerators: its world rank, node rank and node id (`config["node_id"]`, a function,
    where the adapter has one), CUDA_VISIBLE_DEVICES, HIP_VISIBLE_DEVICES and the TPU
    variables as the function starts, and whether a real CUDA device answers (torch, where
    installed).

    With `config["torch_module"]` (the implementation's `train.torch`) it also journals
    `get_devices()`, `get_device()` and the process group's backend; with
    `config["prepare"]` the device of a tiny model's parameters after `prepare_model` and of
    a batch of `prepare_data_loader`, and, on an NCCL group, the result of an all_reduce of
    a tensor on the worker's device. What those calls raise is journalled as `error`
    (the implementation's behaviour, for the check to judge), never raised."""
    train = importlib.import_module(config["train_module"])
    real = real_cuda()
    ctx = train.get_context()
    row = dict(ev="accelerator", rank=ctx.get_world_rank(), node_rank=ctx.get_node_rank(),
               node=config["node_id"]() if config.get("node_id") else None,
               cuda=os.environ.get("CUDA_VISIBLE_DEVICES"),
               hip=os.environ.get("HIP_VISIBLE_DEVICES"),
               tpu=os.environ.get("TPU_VISIBLE_CHIPS"),
               tpu_chip_bounds=os.environ.get("TPU_CHIPS_PER_HOST_BOUNDS"),
               tpu_host_bounds=os.environ.get("TPU_HOST_BOUNDS"), real_cuda=real)
    if config.get("torch_module"):
        try:
            _torch_device_view(importlib.import_module(config["torch_module"]),
                               bool(config.get("prepare")), row)
        except Exception as exc:  # the implementation's answer, judged by the check
            row["error"] = f"{type(exc).__name__}: {exc}"[:500]
    Journal(config["journal"]).record(**row)


def _torch_device_view(tt, prepare: bool, out: dict) -> None:
    """Fills `out` step by step, so what a failing step leaves is what came before it."""
    import torch
    import torch.distributed as dist

    out["backend"] = dist.get_backend() if dist.is_initialized() else None
    out["devices"] = [str(d) for d in tt.get_devices()]
    out["device"] = str(tt.get_device())
    if not prepare:
        return
    model = tt.prepare_model(torch.nn.Linear(4, 2))
    out["model_device"] = str(next(model.parameters()).device)
    data = torch.utils.data.TensorDataset(torch.arange(16.0).reshape(8, 2))
    batch = next(iter(tt.prepare_data_loader(torch.utils.data.DataLoader(data, batch_size=2))))
    out["batch_device"] = str(batch[0].device)
    if out["backend"] == "nccl":
        total = torch.ones(1, device=tt.get_device())
        dist.all_reduce(total)
        out["all_reduce"] = float(total.item())
