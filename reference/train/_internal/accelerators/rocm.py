"""ROCm: AMD GPUs, requested as the "GPU" resource, limited by HIP_VISIBLE_DEVICES.

Ray sets HIP_VISIBLE_DEVICES for AMD GPUs and refuses a process that only has
ROCR_VISIBLE_DEVICES (a lower-level variable it does not manage), so the check is here.
Detection counts the GPU nodes of the kernel driver's (KFD) topology: CPU nodes there
report zero SIMD units.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from reference.train._internal.accelerators.api import AcceleratorManager

KFD_NODES = "/sys/class/kfd/kfd/topology/nodes"


class ROCmManager(AcceleratorManager):
    name = "ROCm"
    resource_name = "GPU"
    visible_devices_var = "HIP_VISIBLE_DEVICES"
    noset_var = "RAY_EXPERIMENTAL_NOSET_HIP_VISIBLE_DEVICES"

    @classmethod
    def visible_ids(cls, environ: Mapping[str, str] | None = None) -> list[str] | None:
        environ = os.environ if environ is None else environ
        if cls.visible_devices_var not in environ and "ROCR_VISIBLE_DEVICES" in environ:
            raise RuntimeError(
                f"Please use {cls.visible_devices_var} instead of ROCR_VISIBLE_DEVICES")
        return super().visible_ids(environ)

    @classmethod
    def num_node_devices(cls) -> int:
        try:
            nodes = os.listdir(KFD_NODES)
        except OSError:
            return 0
        count = 0
        for node in nodes:
            try:
                with open(os.path.join(KFD_NODES, node, "properties")) as f:
                    props = dict(line.split(None, 1) for line in f if " " in line.strip())
            except OSError:
                continue
            if int(props.get("simd_count", "0").strip() or 0) > 0:
                count += 1
        return count
