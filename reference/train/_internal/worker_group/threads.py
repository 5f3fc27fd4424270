"""A worker's OpenMP thread count: the floor of its CPUs (at least 1), as Ray sets it.

Ray gives every worker process `OMP_NUM_THREADS` = floor(CPUs assigned to it), or 1 when it
holds no CPU or less than one, unless the variable is already set (ray/_private/utils.py:
set_omp_num_threads_if_unset). So a `ScalingConfig(num_workers=2)` worker (1 CPU) runs
torch, xgboost and LightGBM on one thread, and N workers on an N-core host do not fight
over its cores.

Setting the variable is not enough here: workers fork from node supervisors that may have
imported torch or xgboost already, and an OpenMP runtime reads the variable once, when it
is loaded. So the count is also applied to every OpenMP runtime already loaded in this
process (xgboost bundles its own libgomp beside the system's), and to torch if imported.
"""

from __future__ import annotations

import ctypes
import math
import os
import sys

VAR = "OMP_NUM_THREADS"


def thread_count(resources_per_worker: dict) -> int:
    cpus = resources_per_worker.get("CPU")
    return 1 if not cpus else max(math.floor(cpus), 1)


def loaded_openmp_runtimes() -> list[str]:
    """Paths of the OpenMP runtimes mapped into this process."""
    try:
        with open("/proc/self/maps", "rb") as maps:
            text = maps.read()
    except OSError:
        return []
    if b"libgomp" not in text and b"libiomp" not in text and b"libomp" not in text:
        return []  # the common case, found without splitting hundreds of lines per worker
    paths = {line.split()[-1].decode(errors="replace") for line in text.splitlines()
             if b"/lib" in line and (b"libgomp" in line or b"libiomp" in line
                                     or b"libomp" in line)}
    return sorted(p for p in paths if p.startswith("/"))


def apply(resources_per_worker: dict) -> int | None:
    """Set this worker's thread count unless OMP_NUM_THREADS is already set; returns the
    count set, or None when the variable was left as it was."""
    if VAR in os.environ:
        return None
    n = thread_count(resources_per_worker)
    os.environ[VAR] = str(n)
    for path in loaded_openmp_runtimes():
        try:
            ctypes.CDLL(path).omp_set_num_threads(n)
        except (OSError, AttributeError):
            pass
    torch = sys.modules.get("torch")
    if torch is not None and hasattr(torch, "set_num_threads"):
        torch.set_num_threads(n)
    return n
