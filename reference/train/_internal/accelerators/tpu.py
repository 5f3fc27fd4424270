"""TPU: Google TPU chips, requested as the "TPU" resource, limited by TPU_VISIBLE_CHIPS.

A process that holds part of a TPU host also needs the bounds variables that tell the
runtime the shape of what it holds: TPU_CHIPS_PER_HOST_BOUNDS ("1,1,1" for one chip,
"1,2,1" for two) and TPU_HOST_BOUNDS ("1,1,1": a single host). Ray writes them only for
one- and two-chip allocations; a process holding the whole node gets no TPU_VISIBLE_CHIPS
at all (the runtime then uses every chip), and bounds left over from an earlier one- or
two-chip allocation are removed when the new one is larger.

Slices: a slice of topology "AxB[xC]" has A*B*C chips; a host holds 4 of them, except the
single-host v5e/v6e topologies (1x1, 2x2, 2x4), whose one host holds all. A multi-worker
TPU job runs whole slices, so its worker count is a multiple of the workers per slice;
ScalingConfig's validation asks `slice_workers` for that number.
"""

from __future__ import annotations

import glob
import math
import os
from collections.abc import Mapping, Sequence

from reference.train._internal.accelerators.api import AcceleratorManager

CHIPS_PER_HOST_BOUNDS_VAR = "TPU_CHIPS_PER_HOST_BOUNDS"
HOST_BOUNDS_VAR = "TPU_HOST_BOUNDS"
SINGLE_HOST_BOUNDS = "1,1,1"
# Chip bounds of the sub-host allocations the bounds variables are written for.
SUBHOST_CHIP_BOUNDS = {1: "1,1,1", 2: "1,2,1"}
_PCI_VENDOR_GOOGLE = "0x1ae0"

# ---------------------------------------------------------------------------- slices
# The rules of ray/util/tpu.py `get_tpu_worker_resources` (with one slice and one TPU
# resource per chip) and of `get_tpu_version_from_type` / `get_chips_per_host` in
# ray/_private/accelerators/tpu.py.

GENERATIONS = ("v2", "v3", "v4", "v5p", "v5litepod", "v6e", "v7x")
_ALL_CHIPS_ON_ONE_HOST = ("v5litepod", "v6e")
_SINGLE_HOST_TOPOLOGIES = ("1x1", "2x2", "2x4")
_DEFAULT_CHIPS_PER_HOST = 4


def _generation(accelerator_type: str) -> str:
    """'TPU-V6E' -> 'v6e', 'TPU4' -> 'v4', 'v5p' -> 'v5p'; ValueError for other names."""
    lowered = accelerator_type.lower()
    if lowered.startswith("tpu-"):
        generation = lowered.replace("tpu-", "")
    elif lowered.startswith("tpu"):
        generation = lowered.replace("tpu", "v")
    else:
        generation = lowered
    if generation not in GENERATIONS:
        raise ValueError(
            f"accelerator_type={accelerator_type!r} is not a TPU type; must be one of "
            f"{list(GENERATIONS)}, optionally prefixed with 'TPU-'."
        )
    return generation


def _slice_chips(topology: str) -> int:
    """'4x4' -> 16, '2x2x2' -> 8; ValueError when a side is not a number."""
    return math.prod(int(side) for side in topology.strip().lower().split("x"))


def _chips_per_host(topology: str, generation: str) -> int:
    if (generation in _ALL_CHIPS_ON_ONE_HOST
            and topology.strip().lower() in _SINGLE_HOST_TOPOLOGIES):
        return _slice_chips(topology)
    return _DEFAULT_CHIPS_PER_HOST


def slice_hosts(topology: str, accelerator_type: str) -> int:
    """How many hosts a slice of `topology` has."""
    return max(1, _slice_chips(topology) // _chips_per_host(topology, _generation(accelerator_type)))


def slice_workers(topology: str, accelerator_type: str,
                  resources_per_worker: dict | None = None) -> tuple[int, dict]:
    """(workers in one slice, resources of one worker) for a slice of `topology`.

    Each worker gets one host's chips unless resources_per_worker says otherwise, plus one
    CPU unless it names a CPU count. ValueError for an unknown accelerator_type, a
    topology that is not "AxB[xC]", or a TPU count that is not positive or does not divide
    the slice's chips.
    """
    per_host = _chips_per_host(topology, _generation(accelerator_type))
    chips = _slice_chips(topology)
    resources = resources_per_worker.copy() if resources_per_worker else {}
    resources.setdefault("CPU", 1)
    resources.setdefault("TPU", per_host)
    tpus = resources["TPU"]
    if tpus <= 0:
        raise ValueError(f"TPU resources must be positive; got TPU={tpus!r}.")
    if chips % tpus != 0:
        raise ValueError(
            f"the {chips} TPU chips of topology={topology!r} do not divide evenly into "
            f"workers of TPU={tpus!r} each."
        )
    return int(chips // tpus), resources


# ---------------------------------------------------------------------------- the manager


class TPUManager(AcceleratorManager):
    name = "TPU"
    resource_name = "TPU"
    visible_devices_var = "TPU_VISIBLE_CHIPS"
    noset_var = "RAY_EXPERIMENTAL_NOSET_TPU_VISIBLE_CHIPS"

    @classmethod
    def visible_devices_env(cls, ids: Sequence, node_devices: int | None = None,
                            environ: Mapping[str, str] | None = None) -> dict[str, str | None]:
        # The rule of `TPUAcceleratorManager.set_current_process_visible_accelerator_ids`
        # in ray/_private/accelerators/tpu.py (one TPU resource per chip): bounds only for
        # 1 or 2 chips, nothing for the whole node. simcluster/driver/accelerators.py keeps
        # the fresh-process half of the same rule for its simulated TPU nodes.
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
