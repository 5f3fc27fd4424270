"""The environment a worker gets for the accelerator devices its bundle holds.

The variables are the ones the real stacks read: CUDA_VISIBLE_DEVICES (CUDA),
HIP_VISIBLE_DEVICES (ROCm: what Ray sets for AMD GPUs), and for TPU hosts
TPU_VISIBLE_CHIPS, plus the chip and host bounds when a worker holds one or two chips.
A worker holding every chip of a TPU node gets none of the three: the runtime then uses the
whole host. A worker on an accelerator node that holds no device sees an empty list.
"""

from __future__ import annotations

from collections.abc import Sequence

from .._spec import NodeSpec

VISIBLE_DEVICES_VAR = {"CUDA": "CUDA_VISIBLE_DEVICES", "ROCm": "HIP_VISIBLE_DEVICES",
                       "TPU": "TPU_VISIBLE_CHIPS"}
# TPU_CHIPS_PER_HOST_BOUNDS of the sub-host allocations that get bounds at all.
TPU_SUBHOST_CHIP_BOUNDS = {1: "1,1,1", 2: "1,2,1"}
TPU_SINGLE_HOST_BOUNDS = "1,1,1"


def visible_devices_env(spec: NodeSpec, device_ids: Sequence[int]) -> dict[str, str]:
    """Environment variables that make exactly `device_ids` visible on a node like `spec`."""
    var = VISIBLE_DEVICES_VAR.get(spec.accelerator or "")
    if var is None:
        return {}
    chips = sorted(set(device_ids))
    if spec.accelerator != "TPU" or not chips:
        return {var: ",".join(str(i) for i in chips)}
    # What Ray's `TPUAcceleratorManager.set_current_process_visible_accelerator_ids`
    # (ray/_private/accelerators/tpu.py) writes into a fresh worker process: nothing for
    # the whole node, bounds only for 1 or 2 chips. The reference's TPU manager keeps the
    # same rule, with the clean-up of bounds an earlier allocation left behind.
    if len(device_ids) == spec.tpus:
        return {}
    env = {var: ",".join(str(i) for i in chips)}
    if len(chips) in TPU_SUBHOST_CHIP_BOUNDS:
        env["TPU_CHIPS_PER_HOST_BOUNDS"] = TPU_SUBHOST_CHIP_BOUNDS[len(chips)]
        env["TPU_HOST_BOUNDS"] = TPU_SINGLE_HOST_BOUNDS
    return env
