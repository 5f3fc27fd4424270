"""TPU: Google TPU chips, requested as the "TPU" resource, limited by TPU_VISIBLE_CHIPS.

A process that holds part of a TPU host also needs the bounds variables that tell the
runtime the shape of what it holds: TPU_CHIPS_PER_HOST_BOUNDS ("1,1,1" for one chip,
"1,2,1" for two) and TPU_HOST_BOUNDS ("1,1,1": a single host). Ray writes them only for
one- and two-chip allocations; a process holding the whole node gets no TPU_VISIBLE_CHIPS
at all (the runtime then uses every chip), and bounds left over from an earlier one- or
two-chip allocation are removed when the new one is larger.

Slices: a slice of topology "AxB[xC]" has A*B*C chips; a host holds 4 of them, except the
single-host v5e/v6e topologies (1x1, 2x2, 2x4), whose one host holds all. A multi-worker
TPU job runs whole slices, so its worker count is a multiple of the workers per slice.
The slice arithmetic is shared with ScalingConfig's validation.
"""

from __future__ import annotations

import glob
import os
import re
from collections.abc import Mapping, Sequence

from reference.train._internal.accelerators.api import AcceleratorManager
from reference.train._validation import (
    tpu_chips,
    tpu_chips_per_host,
    tpu_generation,
    tpu_slice_workers,
)

CHIPS_PER_HOST_BOUNDS_VAR = "TPU_CHIPS_PER_HOST_BOUNDS"
HOST_BOUNDS_VAR = "TPU_HOST_BOUNDS"
SINGLE_HOST_BOUNDS = "1,1,1"
# Chip bounds of the sub-host allocations the bounds variables are written for.
SUBHOST_CHIP_BOUNDS = {1: "1,1,1", 2: "1,2,1"}
# Chip counts a worker may request from one host.
VALID_CHIP_REQUESTS = (1, 2, 4, 8)
DEFAULT_MEGASCALE_PORT = "8081"
# Generations with one TensorCore per chip; the others have two.
_ONE_CORE_PER_CHIP = ("v5litepod", "v6e")
_POD_TYPE = re.compile(r"^(v|tpu)\d+[a-zA-Z]*-\d+$")
_PCI_VENDOR_GOOGLE = "0x1ae0"


def _cube_topologies(max_x: int, max_y: int, max_z: int) -> set[str]:
    """3D topologies beyond the small ones grow in steps of 4 chips along every side."""
    return {f"{x}x{y}x{z}" for x in range(4, max_x + 1, 4) for y in range(4, max_y + 1, 4)
            for z in range(4, max_z + 1, 4)}


_SMALL_3D = {"2x2x1", "2x2x2", "2x2x4", "2x4x4"}
_LITE_2D = {"1x1", "2x2", "2x4", "2x8", "4x4", "4x8", "8x8", "8x16", "16x16"}
VALID_TOPOLOGIES = {
    "v2": {"4x4", "4x8", "8x8", "8x16", "16x16"},
    "v3": {"4x4", "4x8", "8x8", "8x16", "16x16", "16x32", "32x32"},
    "v4": _SMALL_3D | _cube_topologies(12, 12, 16),
    "v5p": _SMALL_3D | _cube_topologies(16, 16, 24),
    "v5litepod": _LITE_2D,
    "v6e": _LITE_2D,
    "v7x": _SMALL_3D | {"4x4x4", "4x4x8", "4x8x8", "8x8x8", "8x8x16", "8x16x16"},
}


def is_valid_pod_type(pod_type: str) -> bool:
    """'v4-32', 'v5litepod-16', 'tpu7x-16': a generation, a dash and a core/chip count."""
    return bool(_POD_TYPE.match(pod_type))


def normalize_generation(accelerator_type: str) -> str:
    """'TPU-V6E' -> 'v6e', 'tpu7x-8' -> 'v7x', 'v5p-16' -> 'v5p' (the size is dropped)."""
    spelled = re.sub(r"^tpu-?v?", "v", accelerator_type.strip().lower())
    return spelled.split("-")[0]


def is_valid_topology(accelerator_type: str, topology: str) -> bool:
    generation = normalize_generation(accelerator_type)
    return topology.strip().lower() in VALID_TOPOLOGIES.get(generation, ())


def cores_per_chip(generation: str) -> int:
    return 1 if generation.lower().startswith(_ONE_CORE_PER_CHIP) else 2


def chips_per_host(topology: str, accelerator_type: str) -> int:
    return tpu_chips_per_host(topology, tpu_generation(accelerator_type))


def workers_per_slice(topology: str, accelerator_type: str,
                      resources_per_worker: dict | None = None) -> int:
    """Workers one slice holds when each gets one host's chips (or resources_per_worker)."""
    return tpu_slice_workers(topology, accelerator_type, resources_per_worker)[0]


def slice_chips(topology: str) -> int:
    return tpu_chips(topology)


def multislice_env(coordinator_address: str, num_slices: int, slice_id: int,
                   port: str = DEFAULT_MEGASCALE_PORT) -> dict[str, str]:
    """What the workers of slice `slice_id` need to find each other across slices."""
    return {"MEGASCALE_COORDINATOR_ADDRESS": coordinator_address,
            "MEGASCALE_PORT": str(port),
            "MEGASCALE_NUM_SLICES": str(num_slices),
            "MEGASCALE_SLICE_ID": str(slice_id)}


class TPUManager(AcceleratorManager):
    name = "TPU"
    resource_name = "TPU"
    visible_devices_var = "TPU_VISIBLE_CHIPS"
    noset_var = "RAY_EXPERIMENTAL_NOSET_TPU_VISIBLE_CHIPS"

    @classmethod
    def visible_devices_env(cls, ids: Sequence, node_devices: int | None = None,
                            environ: Mapping[str, str] | None = None) -> dict[str, str | None]:
        environ = os.environ if environ is None else environ
        if environ.get(cls.noset_var, "").lower() in ("1", "true"):
            return {}
        chips = sorted({int(i) for i in ids})
        # Bounds written for a smaller allocation would confine this one to 1 or 2 chips.
        stale = (len(chips) not in SUBHOST_CHIP_BOUNDS
                 and environ.get(CHIPS_PER_HOST_BOUNDS_VAR) in SUBHOST_CHIP_BOUNDS.values())
        env: dict[str, str | None] = {}
        if stale:
            env[CHIPS_PER_HOST_BOUNDS_VAR] = env[HOST_BOUNDS_VAR] = None
        if node_devices is not None and len(ids) == node_devices:
            env[cls.visible_devices_var] = None
            return env
        env[cls.visible_devices_var] = ",".join(str(c) for c in chips)
        if len(chips) in SUBHOST_CHIP_BOUNDS:
            bounds = SUBHOST_CHIP_BOUNDS[len(chips)]
            if environ.get(CHIPS_PER_HOST_BOUNDS_VAR) != bounds:
                env[CHIPS_PER_HOST_BOUNDS_VAR] = bounds
                env[HOST_BOUNDS_VAR] = SINGLE_HOST_BOUNDS
            elif HOST_BOUNDS_VAR not in environ:
                env[HOST_BOUNDS_VAR] = SINGLE_HOST_BOUNDS
        return env

    @classmethod
    def num_node_devices(cls) -> int:
        # Chips appear as /dev/accelN character devices; newer NVIDIA drivers create a
        # /dev/accel *directory*, which must not count. Without /dev/accel*, chips bound to
        # VFIO count when their IOMMU group holds a Google PCI device.
        chips = [p for p in glob.glob("/dev/accel*") if not os.path.isdir(p)]
        if chips:
            return len(chips)
        try:
            groups = [g for g in os.listdir("/dev/vfio") if g.isdigit()]
        except OSError:
            return 0
        count = 0
        for group in groups:
            vendors = glob.glob(f"/sys/kernel/iommu_groups/{group}/devices/*/vendor")
            for path in vendors:
                try:
                    with open(path) as f:
                        if f.read().strip().lower() == _PCI_VENDOR_GOOGLE:
                            count += 1
                            break
                except OSError:
                    continue
        return count
