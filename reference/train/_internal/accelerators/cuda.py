"""CUDA: NVIDIA GPUs, requested as the "GPU" resource, limited by CUDA_VISIBLE_DEVICES.

Detection reads the driver's procfs entries (one directory per GPU) instead of loading
NVML or torch, so asking costs nothing on a machine without the driver.
"""

from __future__ import annotations

import os

from reference.train._internal.accelerators.api import AcceleratorManager

PROC_GPUS = "/proc/driver/nvidia/gpus"


class CUDAManager(AcceleratorManager):
    name = "CUDA"
    resource_name = "GPU"
    visible_devices_var = "CUDA_VISIBLE_DEVICES"
    noset_var = "RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES"

    @classmethod
    def num_node_devices(cls) -> int:
        try:
            return sum(1 for entry in os.scandir(PROC_GPUS) if entry.is_dir())
        except OSError:
            return 0
