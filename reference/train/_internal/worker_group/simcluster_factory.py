"""The factory of worker groups on simcluster: the cluster's capacity, placement of a
group's bundles, the launch of its workers (one command per node), the backend's set-up
and the dataset shards, then the group (simcluster_group.py) takes over. It routes the
cluster's messages and exits to the group they belong to."""

from __future__ import annotations

import dataclasses
import functools
import math
import socket
import threading

from reference.exceptions import RayActorError, RayTaskError
from reference.train._context import TrainContext
from reference.train._internal.accelerators import launch_env
from reference.train._internal.controller.controller import NeverSchedulable
from reference.train._internal.worker_group.api import (
    BackendSetupError,
    GroupSpec,
    GroupStartError,
    StartRejected,
    WorkerGroupFactory,
    WorkerSlot,
)
from reference.train._internal.worker_group.execution import (
    DistributedContext,
    ExecutionGroup,
    Worker,
    WorkerGroupContext,
    WorkerMetadata,
)
from reference.train._internal.worker_group.exit_routing import route_exit
from reference.train._internal.worker_group.simcluster_group import (
    SimclusterGroup,
    assign_ranks,
)
from reference.train._internal.worker_group.worker import (
    WorkerBoot,
    install_dataset_shards,
    simcluster_rank_entry,
)

PLACEMENT_TIMEOUT_S = 30.0


def _worker_info(slot: WorkerSlot, handle, resources: dict) -> Worker:
    kind = {"CUDA": "GPU", "ROCm": "GPU", "TPU": "TPU"}.get(slot.accelerator or "")
    ids = {"GPU": [], "TPU": []}
    if kind is not None:
        ids[kind] = list(slot.accelerator_ids)
    return Worker(
        metadata=WorkerMetadata(hostname=socket.gethostname(), node_id=slot.node_id,
                                node_ip=slot.node_address, pid=handle.pid,
                                accelerator_ids=ids),
        distributed_context=DistributedContext(
            world_rank=slot.rank, world_size=slot.world_size, local_rank=slot.local_rank,
            local_world_size=slot.local_world_size, node_rank=slot.node_rank),
        resources=dict(resources), submit=None)


class SimclusterGroupFactory(WorkerGroupFactory):
    def __init__(self, cluster, backend, slices=None):
        self.cluster, self.backend = cluster, backend
        #: a TPU slice job's SliceRequest (slices.py): whole slices only; None otherwise
        self.slices = slices
        self._groups: dict[str, SimclusterGroup] = {}
        self._lock = threading.Lock()
        self._changed = threading.Condition()
        cluster.on_message(self._on_message)
        cluster.on_worker_exit(self._on_exit)

    # -- routing (called on simcluster's delivery thread: quick, never blocking) ----------
    def _on_message(self, worker_id: str, obj) -> None:
        if not (isinstance(obj, tuple) and len(obj) == 2 and isinstance(obj[0], str)):
            return  # a message of another user of this cluster endpoint (e.g. a Tune trial)
        group_id, event = obj
        group = self._groups.get(group_id)
        if group is not None and not group.closed:
            group.on_message(event)

    def _on_exit(self, exit) -> None:
        routed = route_exit(self._groups, exit)  # never drops one of ours (see its module)
        if routed is not None:
            routed[0].on_exit(routed[1], exit)
        with self._changed:
            self._changed.notify_all()

    def forget(self, group: SimclusterGroup) -> None:
        with self._lock:
            self._groups.pop(group.id, None)
        with self._changed:
            self._changed.notify_all()

    # -- WorkerGroupFactory --------------------------------------------------------------------
    def capacity(self, resources_per_worker: dict) -> int:
        if self.slices is not None:
            return self.slices.capacity(self.cluster.nodes)
        total = 0
        for node in self.cluster.nodes:
            if node.state != "up":
                continue
            have = node.resources
            fits = [math.floor(have.get(k, 0.0) / v + 1e-9)
                    for k, v in resources_per_worker.items() if v > 0]
            total += min(fits) if fits else 0
        return total

    def wait_for_change(self, timeout: float) -> None:
        with self._changed:
            self._changed.wait(timeout)

    def start(self, spec: GroupSpec) -> SimclusterGroup:
        from simcluster import PlacementTimeout, SimclusterError, Unschedulable

        if self.slices is not None:
            bundles = self.slices.bundles(spec.num_workers, self.cluster.nodes,
                                          self.cluster.available_resources(),
                                          dict(spec.resources_per_worker))
            if len(bundles) < spec.num_workers:
                raise GroupStartError(f"{spec.num_workers} workers need "
                                      f"{spec.num_workers // self.slices.per_slice} whole TPU "
                                      f"slices of topology {self.slices.topology!r}; fewer are "
                                      "complete now")
        else:
            bundles = [dict(spec.resources_per_worker)] * spec.num_workers
        # Pinned slice bundles land where they are pinned whatever the strategy; PACK lets
        # several workers share a host when the TPU request is below a host's chips.
        strategy = "PACK" if self.slices is not None else spec.placement_strategy
        try:
            placement = self.cluster.place(bundles, strategy, timeout_s=PLACEMENT_TIMEOUT_S)
        except PlacementTimeout as exc:
            raise GroupStartError(str(exc)) from exc
        except (Unschedulable, ValueError) as exc:
            raise NeverSchedulable(str(exc)) from exc
        group = SimclusterGroup(self, spec, placement)
        with self._lock:
            self._groups[group.id] = group
        try:
            self._launch(group, placement)
        except SimclusterError as exc:
            group.shutdown(graceful=False)
            raise GroupStartError(f"starting the workers failed: {exc}") from exc
        try:
            self._start_backend(group)
        except BaseException:
            group.shutdown(graceful=False)
            raise
        group.start_training()
        return group

    def _start_backend(self, group: SimclusterGroup) -> None:
        """on_start and on_training_start, with their errors sorted for the controller."""
        spec, backend = group.spec, self.backend
        context = WorkerGroupContext(
            num_workers=group.world_size, resources_per_worker=dict(spec.resources_per_worker),
            placement_strategy=spec.placement_strategy,
            num_slices=1 if self.slices is None else group.world_size // self.slices.per_slice)
        workers = []
        for slot in group.slots:
            worker = _worker_info(slot, group.workers[slot.rank], spec.resources_per_worker)
            worker.submit = lambda blob, rank=slot.rank: group.submit(rank, blob)
            workers.append(worker)
        group.execution = ExecutionGroup(workers, context)
        try:
            backend.on_start(group.execution, spec.backend_config)
            backend.on_training_start(group.execution, spec.backend_config)
            self._install_datasets(group)
        except RayActorError as exc:  # a worker died while the backend set it up
            raise GroupStartError(f"a worker died while the backend set the group up: "
                                  f"{exc}") from exc
        except RayTaskError as exc:  # a function the backend ran on a worker raised
            raise BackendSetupError(exc.cause, exc.rank) from exc
        except Exception as exc:  # the backend rejected its configuration: never retried
            raise StartRejected(f"{type(exc).__name__}: {exc}", exc) from exc

    @staticmethod
    def _install_datasets(group: SimclusterGroup) -> None:
        """Split the trainer's datasets for this group (callables made anew, as at every
        start in Ray) and give each rank its DataIterators."""
        spec = group.spec
        if not spec.datasets:
            return
        from reference.data import DataContext
        from reference.train._data_config import DataConfig

        datasets = {name: ds() if callable(ds) else ds for name, ds in spec.datasets.items()}
        config = spec.dataset_config or DataConfig()
        shards = config.configure(datasets, world_size=group.world_size, worker_handles=None,
                                  worker_node_ids=[slot.node_id for slot in group.slots])
        context = DataContext.get_current()
        futures = [group.execution.execute_single_async(rank, install_dataset_shards,
                                                        shards[rank], context)
                   for rank in range(group.world_size)]
        for future in futures:
            future.result()

    def _launch(self, group: SimclusterGroup, placement) -> None:
        spec, n = group.spec, group.world_size
        accel = [list(placement.gpu_ids[i]) or list(placement.tpu_ids[i]) for i in range(n)]
        order = assign_ranks(placement.node_ids, accel)
        nodes = {node.id: node for node in self.cluster.nodes}
        per_node: dict[str, list[int]] = {}  # node id -> bundle indices, in rank order
        for i in order:
            per_node.setdefault(placement.node_ids[i], []).append(i)
        node_rank, local_rank = ({nid: r for r, nid in enumerate(per_node)},
                                 {i: lr for ids in per_node.values() for lr, i in enumerate(ids)})
        slots = []
        for rank, i in enumerate(order):
            node = nodes[nid := placement.node_ids[i]]
            slots.append(WorkerSlot(
                rank=rank, local_rank=local_rank[i], node_rank=node_rank[nid],
                world_size=n, local_world_size=len(per_node[nid]), node_id=nid,
                node_address=node.address, accelerator=node.spec.accelerator,
                accelerator_ids=tuple(accel[i])))
        group.slots = slots
        envs = launch_env(slots, self.backend.share_cuda_visible_devices)
        # the datasets reach the workers split, through _install_datasets
        boot_spec = dataclasses.replace(spec, datasets=None, dataset_config=None)
        starts = []
        for slot, env in zip(slots, envs, strict=True):
            context = TrainContext(
                experiment_name=spec.experiment_name, world_size=n, world_rank=slot.rank,
                local_rank=slot.local_rank, local_world_size=slot.local_world_size,
                node_rank=slot.node_rank, storage=spec.storage)
            env = {**(spec.worker_env or {}), **{k: str(v) for k, v in env.items()}}
            boot = WorkerBoot(spec=boot_spec, context=context, env=env)
            group.boots[slot.rank] = (slot.node_id, boot, order[slot.rank])
            tags = {"run": spec.experiment_name or "", "attempt": spec.attempt, "rank": slot.rank}
            starts.append(dict(  # tags: what fault plans and pictures select Train workers by
                node_id=slot.node_id, args=(context, env), env=env, tags=tags,
                bundle=placement[order[slot.rank]], name=f"{group.id}:rank{slot.rank}"))
        # One call for all: each node forks its workers in one round, and the spec (the
        # training function with it) is pickled once, not once per rank.
        handles = self.cluster.start_workers(
            functools.partial(simcluster_rank_entry, group.id, boot_spec), starts)
        group.workers.update(enumerate(handles))
