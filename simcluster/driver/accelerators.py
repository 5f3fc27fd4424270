"""The environment a worker gets for the accelerator devices its bundle holds.

The variables are the ones the real stacks read: CUDA_VISIBLE_DEVICES (CUDA),
HIP_VISIBLE_DEVICES (ROCm: what Ray sets for AMD GPUs), and for TPU hosts
TPU_VISIBLE_CHIPS with the chip and host bounds a single-host slice of that many chips has.
A worker on an accelerator node that holds no device sees an empty list, as in Ray.
"""

from __future__ import annotations

from collections.abc import Sequence

from .._spec import NodeSpec

VISIBLE_DEVICES_VAR = {"CUDA": "CUDA_VISIBLE_DEVICES", "ROCm": "HIP_VISIBLE_DEVICES",
                       "TPU": "TPU_VISIBLE_CHIPS"}
# Chips per host -> TPU_CHIPS_PER_HOST_BOUNDS (x,y,z) of a single host with that many chips.
_TPU_BOUNDS = {1: "1,1,1", 2: "1,2,1", 4: "2,2,1", 8: "2,4,1"}


def tpu_chip_bounds(chips: int) -> str:
    return _TPU_BOUNDS.get(chips, f"1,{chips},1")


def visible_devices_env(spec: NodeSpec, device_ids: Sequence[int]) -> dict[str, str]:
    """Environment variables that make exactly `device_ids` visible on a node like `spec`."""
    var = VISIBLE_DEVICES_VAR.get(spec.accelerator or "")
    if var is None:
        return {}
    env = {var: ",".join(str(i) for i in sorted(set(device_ids)))}
    if spec.accelerator == "TPU" and device_ids:
        env["TPU_CHIPS_PER_HOST_BOUNDS"] = tpu_chip_bounds(len(set(device_ids)))
        env["TPU_HOST_BOUNDS"] = "1,1,1"
    return env
