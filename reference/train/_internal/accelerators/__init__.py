"""Accelerator managers: CPU, CUDA, ROCm and TPU (see api.py for the interface)."""

from reference.train._internal.accelerators.api import (
    ACCELERATOR_IDS_VAR,
    ACCELERATOR_VAR,
    AcceleratorManager,
    parse_ids,
)
from reference.train._internal.accelerators.cpu import CPUManager
from reference.train._internal.accelerators.cuda import CUDAManager
from reference.train._internal.accelerators.registry import (
    MANAGERS,
    SHARE_CUDA_VISIBLE_DEVICES_VAR,
    assignment_env,
    current_assignment,
    detect,
    get_manager,
    launch_env,
    shared_visible_ids,
)
from reference.train._internal.accelerators.rocm import ROCmManager
from reference.train._internal.accelerators.tpu import TPUManager

__all__ = [
    "ACCELERATOR_IDS_VAR",
    "ACCELERATOR_VAR",
    "AcceleratorManager",
    "CPUManager",
    "CUDAManager",
    "MANAGERS",
    "SHARE_CUDA_VISIBLE_DEVICES_VAR",
    "ROCmManager",
    "TPUManager",
    "assignment_env",
    "current_assignment",
    "detect",
    "get_manager",
    "launch_env",
    "parse_ids",
    "shared_visible_ids",
]
