"""Which torch devices a worker computes on, and which process-group backend it uses.

A worker holding GPUs finds its devices by position: its own GPU ids (what it was given,
see reference.train._internal.accelerators) looked up in CUDA_VISIBLE_DEVICES, which the
torch backend widens to every GPU of the group on the node. So with CUDA_VISIBLE_DEVICES
"0,1,2,3" the worker holding GPU 2 computes on cuda:2, and with "2,3" on cuda:0. Ray reads
CUDA_VISIBLE_DEVICES for AMD GPUs too: torch's ROCm build names them "cuda" as well.

Simulated accelerators. simcluster gives a worker the GPU or TPU ids of its simulated
node while the process itself computes on the CPU. Where torch cannot see the
accelerator (no CUDA device; no torch_tpu), the worker's devices are [cpu] and an NCCL or
TPU process-group backend becomes gloo, so a training function written for GPUs runs
unchanged on a machine without them. On a machine that has them nothing changes.
"""

from __future__ import annotations

import logging
import os

import torch

from reference.train._internal.accelerators import (
    CPUManager,
    TPUManager,
    current_assignment,
    parse_ids,
)

logger = logging.getLogger(__name__)

DEFAULT_BACKENDS = {"GPU": "nccl", "TPU": "tpu_dist"}


def _has_torch_tpu() -> bool:
    try:
        import torch_tpu  # noqa: F401
    except ImportError:
        return False
    return True


def cuda_device_indices(gpu_ids: list[str], cuda_visible_devices: str | None) -> list[int]:
    """Positions of the worker's GPU ids in CUDA_VISIBLE_DEVICES (cuda:<position>)."""
    if not gpu_ids:
        return [0]
    visible = parse_ids(cuda_visible_devices) or []
    indices = []
    for gpu_id in gpu_ids:
        if str(gpu_id) not in visible:
            raise RuntimeError(
                f"CUDA_VISIBLE_DEVICES set incorrectly. Got {cuda_visible_devices}, expected "
                f"to include {gpu_id}. Did you override the `CUDA_VISIBLE_DEVICES` "
                "environment variable? Leave it as the trainer set it.")
        indices.append(visible.index(str(gpu_id)))
    return indices


def is_simulated(manager) -> bool:
    """True when the worker holds devices of `manager`'s kind that torch cannot use."""
    if manager.resource_name == "GPU":
        return not torch.cuda.is_available()
    if manager is TPUManager:
        return not _has_torch_tpu()
    return False


def worker_devices() -> list[torch.device]:
    """The devices of a worker of a distributed run (get_devices() without the session)."""
    manager, ids = current_assignment()
    if manager is CPUManager or is_simulated(manager):
        return [torch.device("cpu")]
    if manager is TPUManager:
        # The TPU runtime binds a process to one device; which one is its business.
        return [torch.device("tpu")]
    indices = cuda_device_indices(ids, os.environ.get("CUDA_VISIBLE_DEVICES"))
    return [torch.device(f"cuda:{i}") for i in indices]


def local_devices() -> list[torch.device]:
    """The devices of local mode: the current CUDA device, or the CPU."""
    if torch.cuda.is_available():
        return [torch.device(f"cuda:{torch.cuda.current_device()}")]
    return [torch.device("cpu")]


def uses_nccl(backend: str) -> bool:
    """'nccl', or a per-device list such as 'cpu:gloo,cuda:nccl' that names it for CUDA."""
    return backend == "nccl" or any(
        item.split(":", 1)[1] == "nccl" for item in backend.split(",")
        if item.startswith("cuda:") and ":" in item)


def resolve_backend(requested: str | None) -> str:
    """The process-group backend this worker initializes."""
    manager, _ = current_assignment()
    backend = requested or DEFAULT_BACKENDS.get(manager.resource_name, "gloo")
    if (uses_nccl(backend) or backend == "tpu_dist") and manager is not CPUManager \
            and is_simulated(manager):
        logger.warning("This worker's %s devices are simulated (torch cannot see them): "
                       "using the gloo backend instead of %r.", manager.name, backend)
        return "gloo"
    return backend
