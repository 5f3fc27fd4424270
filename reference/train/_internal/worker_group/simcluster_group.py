"""Worker groups on simcluster: placement, rank assignment, events, teardown.

Ranks follow the Train API's rule: workers are grouped by node in order of first
appearance in the placement, world ranks are contiguous per node, local ranks count within
the node (ordered by lowest accelerator id), node ranks number the nodes in that order.

Events are pushed, never polled: simcluster calls us the moment a worker sends a message
or exits; both land in the group's queue, which the controller blocks on. Messages carry
the group id, so a late message of a torn-down group is dropped instead of confusing the
next attempt.

Hazard: a worker's socket can close (it was SIGKILLed) a moment before simcluster holds its
exit as final, so a send to a worker whose `exit` is still None can raise ChannelClosed.
That is the worker's failure, reported through its exit event, never the caller's error.
"""

from __future__ import annotations

import math
import queue
import signal
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor

from reference.train._context import TrainContext
from reference.train._internal.controller.controller import NeverSchedulable
from reference.train._internal.worker_group.api import (
    Failed,
    Finished,
    GroupSpec,
    GroupStartError,
    StartRejected,
    WorkerGroup,
    WorkerGroupFactory,
    WorkerSetupError,
    WorkerSlot,
)
from reference.train._internal.worker_group.worker import WorkerBoot, worker_main

PLACEMENT_TIMEOUT_S = 30.0
SHUTDOWN_TIMEOUT_S = 10.0


def _worker_entry(group_id: str, boot: WorkerBoot):
    from simcluster import worker

    return worker_main(boot, _TaggedChannel(group_id, worker.channel()))


class _TaggedChannel:
    def __init__(self, group_id: str, channel):
        self.group_id, self.channel = group_id, channel

    def send(self, obj) -> None:
        self.channel.send((self.group_id, obj))

    def recv(self, timeout: float | None = None):
        return self.channel.recv(timeout)


def assign_ranks(node_ids: list[str], accelerator_ids: list[list[int]]) -> list[int]:
    """Bundle index of each world rank (contiguous per node, nodes by first appearance)."""
    order = list(dict.fromkeys(node_ids))
    return sorted(range(len(node_ids)),
                  key=lambda i: (order.index(node_ids[i]), min(accelerator_ids[i], default=-1), i))


class SimclusterGroup(WorkerGroup):
    def __init__(self, factory: SimclusterGroupFactory, spec: GroupSpec, placement):
        self.id = uuid.uuid4().hex[:12]
        self.factory, self.spec, self.placement = factory, spec, placement
        self.world_size = spec.num_workers
        self.events: queue.SimpleQueue = queue.SimpleQueue()
        self.workers: dict[int, object] = {}  # rank -> WorkerHandle
        self.boots: dict[int, tuple] = {}  # rank -> (node id, WorkerBoot, bundle index)
        self.closed = False

    def next_event(self, timeout: float | None):
        try:
            return self.events.get(timeout=timeout) if timeout != 0 else \
                self.events.get_nowait()
        except queue.Empty:
            return None

    def ack(self, rank: int, ack) -> None:
        from simcluster import ChannelClosed

        handle = self.workers.get(rank)
        if handle is None or handle.exit is not None:
            return  # its exit is already on the queue
        try:
            self.factory.cluster.send(handle.id, ack)
        except ChannelClosed:
            # The worker's socket closed before its exit became final (it is dying), or
            # the connection broke under a live worker. Either way this rank can no longer
            # take part: make sure it is gone, and its exit, queued by on_exit like any
            # death, is the failure the controller charges.
            self._kill(handle)

    def on_exit(self, rank: int, exit) -> None:
        if exit.error is not None:
            self.events.put(Failed(rank, error=exit.error, traceback=exit.traceback,
                                   setup=isinstance(exit.error, WorkerSetupError)))
        elif exit.ok:
            self.events.put(Finished(rank, exit.result))
        else:
            self.events.put(Failed(rank, exit_code=exit.code, signal=exit.signal,
                                   preempted=exit.reason == "preempted"))

    @staticmethod
    def _kill(handle) -> None:
        if handle.exit is None:
            try:
                handle.kill(signal.SIGKILL)
            except Exception:  # noqa: BLE001 - already gone (its node died)
                pass

    def shutdown(self) -> None:
        if self.closed:
            return
        self.closed = True
        handles = list(self.workers.values())
        for h in handles:
            self._kill(h)
        for h in handles:
            try:
                h.wait(SHUTDOWN_TIMEOUT_S)
            except TimeoutError:
                pass
        self.placement.release()
        self.factory.forget(self)


class SimclusterGroupFactory(WorkerGroupFactory):
    def __init__(self, cluster, backend):
        self.cluster, self.backend = cluster, backend
        self._groups: dict[str, SimclusterGroup] = {}
        self._lock = threading.Lock()
        self._changed = threading.Condition()
        cluster.on_message(self._on_message)
        cluster.on_worker_exit(self._on_exit)

    # -- routing (called on simcluster's delivery thread: quick, never blocking) ----------
    def _on_message(self, worker_id: str, obj) -> None:
        group_id, event = obj
        group = self._groups.get(group_id)
        if group is not None and not group.closed:
            group.events.put(event)

    def _on_exit(self, exit) -> None:
        group_id, _, rank = exit.name.partition(":rank")
        group = self._groups.get(group_id)
        if group is not None and not group.closed:
            group.on_exit(int(rank), exit)
        with self._changed:
            self._changed.notify_all()

    def forget(self, group: SimclusterGroup) -> None:
        with self._lock:
            self._groups.pop(group.id, None)
        with self._changed:
            self._changed.notify_all()

    # -- WorkerGroupFactory --------------------------------------------------------------------
    def capacity(self, resources_per_worker: dict) -> int:
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

        bundles = [dict(spec.resources_per_worker)] * spec.num_workers
        try:
            placement = self.cluster.place(bundles, spec.placement_strategy,
                                           timeout_s=PLACEMENT_TIMEOUT_S)
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
            group.shutdown()
            raise GroupStartError(f"starting the workers failed: {exc}") from exc
        except Exception as exc:  # the backend rejected its configuration: never retried
            group.shutdown()
            raise StartRejected(f"{type(exc).__name__}: {exc}") from exc
        return group

    def _launch(self, group: SimclusterGroup, placement) -> None:
        spec, n = group.spec, group.world_size
        accel = [list(placement.gpu_ids[i]) or list(placement.tpu_ids[i]) for i in range(n)]
        order = assign_ranks(placement.node_ids, accel)
        nodes = {node.id: node for node in self.cluster.nodes}
        node_order = list(dict.fromkeys(placement.node_ids[i] for i in order))
        per_node = {nid: [i for i in order if placement.node_ids[i] == nid] for nid in node_order}
        slots = []
        for rank, i in enumerate(order):
            nid = placement.node_ids[i]
            node = nodes[nid]
            slots.append(WorkerSlot(
                rank=rank, local_rank=per_node[nid].index(i), node_rank=node_order.index(nid),
                world_size=n, local_world_size=len(per_node[nid]), node_id=nid,
                node_address=node.address, accelerator=node.spec.accelerator,
                accelerator_ids=tuple(accel[i])))
        config = spec.backend_config
        envs = self.backend.worker_env(config, slots)
        setup = [f for f in (self.backend.worker_setup(config),) if f is not None]
        teardown = [f for f in (self.backend.worker_teardown(config),) if f is not None]
        def start(slot_env):
            slot, env = slot_env
            context = TrainContext(
                experiment_name=spec.experiment_name, world_size=n, world_rank=slot.rank,
                local_rank=slot.local_rank, local_world_size=slot.local_world_size,
                node_rank=slot.node_rank, storage=spec.storage)
            boot = WorkerBoot(spec=spec, context=context, env={k: str(v) for k, v in env.items()},
                              setup=setup, teardown=teardown)
            group.boots[slot.rank] = (slot.node_id, boot, order[slot.rank])
            group.workers[slot.rank] = self.cluster.start_worker(
                slot.node_id, _worker_entry, args=(group.id, boot), env=boot.env,
                bundle=placement[order[slot.rank]], name=f"{group.id}:rank{slot.rank}")

        # Each start waits for its worker to run; overlapping them hides those waits.
        pairs = list(zip(slots, envs, strict=True))
        if len(pairs) <= 2:
            for pair in pairs:
                start(pair)
            return
        with ThreadPoolExecutor(max_workers=min(16, len(pairs))) as pool:
            for future in [pool.submit(start, pair) for pair in pairs]:
                future.result()
