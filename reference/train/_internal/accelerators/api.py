"""The interface of an accelerator manager, and how a worker learns what it was given.

An accelerator manager is a small class of facts about one kind of device: the resource
name a worker requests it by, the environment variable that limits which devices a
process sees, how that variable is written for a given set of device ids, and how many
such devices this machine has. There is one per kind (cpu.py, cuda.py, rocm.py, tpu.py);
`registry.py` looks them up by the name simcluster gives a node's accelerator.

What a worker was given travels in two variables, ACCELERATOR_VAR ("CUDA", "ROCm", "TPU"
or "") and ACCELERATOR_IDS_VAR ("0,3"). Ray answers the same question (`ray.get_gpu_ids()`)
from its core worker; here no process-wide service exists, and the visible-devices variable
cannot carry it because a backend may widen it (the torch backend shares
CUDA_VISIBLE_DEVICES across the GPU workers of a node).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

ACCELERATOR_VAR = "REFERENCE_TRAIN_ACCELERATOR"
ACCELERATOR_IDS_VAR = "REFERENCE_TRAIN_ACCELERATOR_IDS"

# Values a visible-devices variable takes when a process may use no device at all.
_NO_DEVICES = ("", "NoDevFiles")


def parse_ids(value: str | None) -> list[str] | None:
    """'0,2' -> ['0', '2']; '' and 'NoDevFiles' -> []; unset (None) -> None, i.e. no limit."""
    if value is None:
        return None
    if value in _NO_DEVICES:
        return []
    return [part.strip() for part in value.split(",") if part.strip()]


class AcceleratorManager:
    """Facts about one kind of device. Subclasses set the class attributes and may refine
    `visible_devices_env` (TPU) or `visible_ids` (ROCm's checks)."""

    #: the name a simulated node's `accelerator` carries ("CPU" for none)
    name: str = ""
    #: the resource a worker requests these devices by ("GPU", "TPU")
    resource_name: str = ""
    #: the variable that limits which devices a process sees (None: nothing to limit)
    visible_devices_var: str | None = None
    #: when this variable is true, Ray leaves the visible-devices variable alone
    noset_var: str | None = None

    @classmethod
    def visible_ids(cls, environ: Mapping[str, str] | None = None) -> list[str] | None:
        """The device ids this process may use per its visible-devices variable."""
        if cls.visible_devices_var is None:
            return None
        environ = os.environ if environ is None else environ
        return parse_ids(environ.get(cls.visible_devices_var))

    @classmethod
    def visible_devices_env(cls, ids: Sequence, node_devices: int | None = None,
                            environ: Mapping[str, str] | None = None) -> dict[str, str | None]:
        """The variables a process holding device `ids` gets (None as a value: unset it).

        `node_devices` is how many devices of this kind the node has; only TPU uses it.
        """
        if cls.visible_devices_var is None:
            return {}
        environ = os.environ if environ is None else environ
        if cls.noset_var and environ.get(cls.noset_var, "").lower() in ("1", "true"):
            return {}
        return {cls.visible_devices_var: ",".join(str(i) for i in ids)}

    @classmethod
    def num_node_devices(cls) -> int:
        """How many devices of this kind this machine has (0 when none or unknown)."""
        return 0

    @classmethod
    def is_available(cls) -> bool:
        return cls.num_node_devices() > 0
