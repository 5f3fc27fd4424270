"""CPU: the manager of workers that hold no accelerator.

It has no visible-devices variable: every process sees every core, and the CPU resource
is only a scheduling count.
"""

from __future__ import annotations

import os

from reference.train._internal.accelerators.api import AcceleratorManager


class CPUManager(AcceleratorManager):
    name = "CPU"
    resource_name = "CPU"

    @classmethod
    def num_node_devices(cls) -> int:
        # The cores this process may run on (a container or taskset narrows them), not the
        # machine's count, which is what a scheduler can actually use.
        try:
            return len(os.sched_getaffinity(0))
        except AttributeError:  # not on Linux
            return os.cpu_count() or 1
