"""Simulated TPU slices: the hosts of one slice as NodeSpecs, labelled as the platform does.

A TPU slice (pod type such as ``v4-32`` or ``v6e-16``) is a set of hosts that only work
together: a job uses all of them or none. `tpu_slice(name, "TPU-V4", "2x2x4")` returns one
NodeSpec per host (the slice's chips over hosts of `chips_per_host`), each with:

- its chips (`tpus`), `accelerator_type` (the `accelerator_type:TPU-V4` resource);
- labels ``ray.io/tpu-slice-name``, ``ray.io/tpu-worker-id``, ``ray.io/tpu-pod-type``,
  ``ray.io/tpu-topology`` (Ray's TPU node labels);
- the environment a TPU VM gives its processes: ``TPU_NAME``, ``TPU_WORKER_ID``,
  ``TPU_ACCELERATOR_TYPE`` (the pod type), ``TPU_TOPOLOGY``, ``TPU_WORKER_HOSTNAMES``
  (simulated host names ``<name>-w-<i>``);
- resources: ``TPU-<pod type>-head: 1`` on host 0 (as Ray's TPU head host has), and
  ``host_resource(name, i): 1`` on host i, which a placement requests a share of to pin a
  bundle to that host: a scheduler reserves a whole slice atomically with one placement
  whose bundles pin every host.

Pod types count TensorCores: two per chip on v2, v3, v4 and v5p, one on v5e (v5litepod),
v6e and v7x.
"""

from __future__ import annotations

import math

from ._spec import NodeSpec

#: TensorCores per chip by generation (the number in a pod type counts cores)
CORES_PER_CHIP = {"v2": 2, "v3": 2, "v4": 2, "v5p": 2, "v5litepod": 1, "v6e": 1, "v7x": 1}
SLICE_LABEL = "ray.io/tpu-slice-name"
WORKER_ID_LABEL = "ray.io/tpu-worker-id"
POD_TYPE_LABEL = "ray.io/tpu-pod-type"
TOPOLOGY_LABEL = "ray.io/tpu-topology"


def generation(accelerator_type: str) -> str:
    """'TPU-V4' -> 'v4', 'TPU-V6E' -> 'v6e'."""
    lowered = accelerator_type.lower()
    gen = lowered[4:] if lowered.startswith("tpu-") else lowered
    if gen not in CORES_PER_CHIP:
        raise ValueError(f"accelerator_type={accelerator_type!r}: expected 'TPU-' and one of "
                         f"{sorted(CORES_PER_CHIP)}, such as 'TPU-V4'")
    return gen


def chips(topology: str) -> int:
    try:
        sides = [int(side) for side in topology.lower().split("x")]
    except ValueError:
        sides = []
    if not sides or any(s < 1 for s in sides):
        raise ValueError(f"topology={topology!r}: expected sides such as '2x2x4' or '4x4'")
    return math.prod(sides)


def pod_type(accelerator_type: str, topology: str) -> str:
    """'TPU-V4', '2x2x4' -> 'v4-32'; 'TPU-V6E', '4x4' -> 'v6e-16'."""
    gen = generation(accelerator_type)
    return f"{gen}-{chips(topology) * CORES_PER_CHIP[gen]}"


def host_resource(slice_name: str, host: int) -> str:
    """The resource that pins a bundle to host `host` of slice `slice_name`."""
    return f"tpu-host:{slice_name}:{host}"


def tpu_slice(name: str, accelerator_type: str = "TPU-V4", topology: str = "2x2x4", *,
              chips_per_host: int = 4, cpus: float = 4) -> list[NodeSpec]:
    """The NodeSpecs of one simulated slice, host 0 first (see the module docstring)."""
    if not isinstance(name, str) or not name or ":" in name:
        raise ValueError(f"tpu_slice(name={name!r}): expected a non-empty name without ':'")
    total = chips(topology)
    if chips_per_host < 1 or total % chips_per_host:
        raise ValueError(f"tpu_slice(chips_per_host={chips_per_host!r}): must divide the "
                         f"{total} chips of topology={topology!r}")
    kind = pod_type(accelerator_type, topology)
    hosts = total // chips_per_host
    hostnames = ",".join(f"{name}-w-{i}" for i in range(hosts))
    specs = []
    for i in range(hosts):
        resources = {host_resource(name, i): 1.0}
        if i == 0:
            resources[f"TPU-{kind}-head"] = 1.0
        specs.append(NodeSpec(
            cpus=cpus, tpus=chips_per_host, accelerator_type=f"TPU-{generation(accelerator_type).upper()}",
            resources=resources,
            labels={SLICE_LABEL: name, WORKER_ID_LABEL: str(i), POD_TYPE_LABEL: kind,
                    TOPOLOGY_LABEL: topology},
            env={"TPU_NAME": name, "TPU_WORKER_ID": str(i), "TPU_ACCELERATOR_TYPE": kind,
                 "TPU_TOPOLOGY": topology, "TPU_WORKER_HOSTNAMES": hostnames}))
    return specs
