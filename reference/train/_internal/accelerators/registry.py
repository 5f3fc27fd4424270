"""Looking managers up: by a node's accelerator name, by what this machine has, and by
what the current worker was given; plus the one rule that spans workers, sharing.

Sharing: a backend may make the devices of every worker on a node visible to each of
them (NCCL needs to see its peers' GPUs on the same node). The visible list of a worker is
then the union of the ids of all workers of the group on its node. Ray sorts the ids as
strings ("10" before "2"); the order only has to agree between the workers of a node,
since a worker finds its own devices by position in that list, so the reference does the
same.
"""

from __future__ import annotations

import collections
import os
from collections.abc import Mapping, Sequence

from reference.train._internal.accelerators.api import (
    ACCELERATOR_IDS_VAR,
    ACCELERATOR_VAR,
    AcceleratorManager,
    parse_ids,
)
from reference.train._internal.accelerators.cpu import CPUManager
from reference.train._internal.accelerators.cuda import CUDAManager
from reference.train._internal.accelerators.rocm import ROCmManager
from reference.train._internal.accelerators.tpu import TPUManager

MANAGERS: dict[str, type[AcceleratorManager]] = {
    m.name: m for m in (CPUManager, CUDAManager, ROCmManager, TPUManager)
}
# Detection order: the kinds a machine rarely has more than one of, most specific first.
_DETECTION_ORDER = (TPUManager, CUDAManager, ROCmManager)


def get_manager(accelerator: str | None) -> type[AcceleratorManager]:
    """The manager of a node accelerator name ("CUDA", "ROCm", "TPU"; None or "" -> CPU)."""
    if not accelerator:
        return CPUManager
    try:
        return MANAGERS[accelerator]
    except KeyError:
        raise ValueError(f"accelerator={accelerator!r}: expected one of "
                         f"{sorted(MANAGERS)} or None") from None


def detect() -> type[AcceleratorManager]:
    """The accelerator this machine has (CPU when none is found)."""
    for manager in _DETECTION_ORDER:
        if manager.is_available():
            return manager
    return CPUManager


def assignment_env(accelerator: str | None, ids: Sequence) -> dict[str, str]:
    """The variables that tell a worker which devices it holds (see api.py)."""
    held = bool(accelerator) and len(ids) > 0
    return {ACCELERATOR_VAR: accelerator if held else "",
            ACCELERATOR_IDS_VAR: ",".join(str(i) for i in ids) if held else ""}


def current_assignment(
    environ: Mapping[str, str] | None = None,
) -> tuple[type[AcceleratorManager], list[str]]:
    """(manager, device ids) of the devices this worker holds; (CPUManager, []) if none."""
    environ = os.environ if environ is None else environ
    ids = parse_ids(environ.get(ACCELERATOR_IDS_VAR)) or []
    manager = get_manager(environ.get(ACCELERATOR_VAR) or None)
    if manager is CPUManager or not ids:
        return CPUManager, []
    return manager, ids


def shared_visible_ids(slots: Sequence, resource_name: str) -> list[str | None]:
    """Per slot: the comma-joined union of the `resource_name` device ids held by the slots
    on its node, or None for a slot that holds none (its visibility is left alone)."""
    def holds(slot) -> bool:
        return (get_manager(slot.accelerator).resource_name == resource_name
                and len(slot.accelerator_ids) > 0)

    per_node: dict[str, set[str]] = collections.defaultdict(set)
    for slot in slots:
        if holds(slot):
            per_node[slot.node_id].update(str(i) for i in slot.accelerator_ids)
    return [",".join(sorted(per_node[slot.node_id])) if holds(slot) else None
            for slot in slots]


#: Ray's switch for sharing (overrides the backend's `share_cuda_visible_devices`)
SHARE_CUDA_VISIBLE_DEVICES_VAR = "TRAIN_ENABLE_SHARE_CUDA_VISIBLE_DEVICES"


def launch_env(slots: Sequence, share_cuda_visible_devices: bool,
               environ: Mapping[str, str] | None = None) -> list[dict[str, str]]:
    """The environment each slot's worker starts with: which devices it holds, and, when
    sharing is on (the backend's flag, or `TRAIN_ENABLE_SHARE_CUDA_VISIBLE_DEVICES` = 1/true
    or anything else for off), CUDA_VISIBLE_DEVICES shared by the GPU workers of a node."""
    environ = os.environ if environ is None else environ
    flag = environ.get(SHARE_CUDA_VISIBLE_DEVICES_VAR)
    share = share_cuda_visible_devices if flag is None else flag.lower() in ("1", "true")
    shared = shared_visible_ids(slots, "GPU") if share else [None] * len(slots)
    envs = []
    for slot, visible in zip(slots, shared, strict=True):
        env = assignment_env(slot.accelerator, slot.accelerator_ids)
        if visible is not None:
            env["CUDA_VISIBLE_DEVICES"] = visible
        envs.append(env)
    return envs
