"""TPU slices: a multi-host TPU job reserves whole slices, atomically, as Ray does.

With `ScalingConfig(use_tpu=True, topology=..., accelerator_type=...)` a group of n workers
runs on n / workers-per-slice slices; every slice is used whole (all its hosts) or not at
all. The cluster's nodes say which slice they belong to by their labels (Ray's
``ray.io/tpu-slice-name``, ``ray.io/tpu-worker-id``, ``ray.io/tpu-topology``; see
`simcluster.tpu`), and each host holds a resource that pins a bundle to it. A group's
placement is one request whose bundles pin, slice by slice, host by host, so it is granted
whole or not at all, and world ranks follow the slices, then the hosts' worker ids.

A slice with a host that is down (node loss) is not a slice any more: it is never chosen,
and a job on it fails over to another complete slice (or waits for one). The elastic
capacity is counted in whole slices.
"""

from __future__ import annotations

import dataclasses

from reference.train._internal.accelerators import tpu

EPSILON = 1e-6


@dataclasses.dataclass(frozen=True)
class SliceRequest:
    accelerator_type: str
    topology: str
    per_slice: int  # workers in one slice
    per_host: int  # workers on one host
    hosts: int  # hosts of one slice

    @classmethod
    def from_scaling_config(cls, scaling_config) -> SliceRequest | None:
        """The request of a TPU slice job; None when the job is not one (no topology)."""
        sc = scaling_config
        if not (sc.use_tpu and sc.topology and sc.accelerator_type):
            return None
        per_slice, _ = tpu.slice_workers(sc.topology, sc.accelerator_type,
                                         sc.resources_per_worker)
        hosts = tpu.slice_hosts(sc.topology, sc.accelerator_type)
        if per_slice < hosts or per_slice % hosts:
            raise ValueError(
                f"ScalingConfig(resources_per_worker={sc.resources_per_worker!r}, topology="
                f"{sc.topology!r}): {per_slice} workers cannot cover the slice's {hosts} hosts "
                "evenly; a worker runs on one host, so ask for at most one host's chips "
                "(the default is exactly one host's).")
        return cls(sc.accelerator_type, sc.topology, per_slice, per_slice // hosts, hosts)

    def complete_slices(self, nodes) -> dict[str, list]:
        """{slice name: its up nodes by worker id} for the slices of this kind whose every
        host is up, in the order the cluster lists them."""
        from simcluster import tpu as sim_tpu

        by_slice: dict[str, dict[int, object]] = {}
        for node in nodes:
            labels = node.spec.labels
            name = labels.get(sim_tpu.SLICE_LABEL)
            if (name is None or node.state != "up"
                    or labels.get(sim_tpu.TOPOLOGY_LABEL) != self.topology
                    or (node.spec.accelerator_type or "").upper() != self.accelerator_type.upper()):
                continue
            by_slice.setdefault(name, {})[int(labels.get(sim_tpu.WORKER_ID_LABEL, -1))] = node
        return {name: [hosts[i] for i in range(self.hosts)]
                for name, hosts in by_slice.items() if sorted(hosts) == list(range(self.hosts))}

    def capacity(self, nodes) -> int:
        return len(self.complete_slices(nodes)) * self.per_slice

    def bundles(self, num_workers: int, nodes, available: dict,
                resources_per_worker: dict) -> list[dict]:
        """Bundles pinning num_workers workers to whole slices, free ones first (a slice
        another job holds would make the request wait)."""
        from simcluster import tpu as sim_tpu

        wanted = num_workers // self.per_slice
        complete = self.complete_slices(nodes)

        def free(name: str) -> bool:
            return all(available.get(sim_tpu.host_resource(name, i), 0.0) >= 1 - EPSILON
                       for i in range(self.hosts))

        chosen = sorted(complete, key=lambda name: not free(name))[:wanted]
        share = 1.0 / self.per_host
        return [{**resources_per_worker, sim_tpu.host_resource(name, w // self.per_host): share}
                for name in chosen for w in range(self.per_slice)]
