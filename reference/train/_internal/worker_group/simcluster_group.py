"""Worker groups on simcluster: placement, rank assignment, events, teardown.

Ranks follow the Train API's rule: workers are grouped by node in order of first
appearance in the placement, world ranks are contiguous per node, local ranks count within
the node (ordered by lowest accelerator id), node ranks number the nodes in that order.

Events are pushed, never polled: simcluster calls us the moment a worker sends a message
or exits; both land in the group's queue, which the controller blocks on. Messages carry
the group id, so a late message of a torn-down group is dropped instead of confusing the
next attempt.

Backend hooks (reference/train/backend.py) run in `start`, between the workers' start and
their training function, through an `ExecutionGroup` whose calls travel as `Execute`
messages and come back as `Executed`; a worker that exits fails its pending calls with
RayActorError. A worker serves calls while its training function runs too (a thread of its
own, as a Ray actor serves calls beside its training thread), so `shutdown` runs the
backend's on_shutdown on every live rank: one past its training function (it sent
`Finished`) is then stopped, one still inside it (a failed attempt) is killed.

Hazard: a worker's socket can close (it was SIGKILLed) a moment before simcluster holds its
exit as final, so a send to a worker whose `exit` is still None can raise ChannelClosed.
That is the worker's failure, reported through its exit event, never the caller's error.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import logging
import math
import queue
import signal
import socket
import threading
import uuid
from concurrent.futures import Future

from reference.exceptions import RayActorError, RayTaskError
from reference.train._context import TrainContext
from reference.train._internal.accelerators import launch_env
from reference.train._internal.controller.controller import NeverSchedulable
from reference.train._internal.worker_group.api import (
    BackendSetupError,
    Collective,
    CollectiveResult,
    Execute,
    Executed,
    Failed,
    Finished,
    GroupSpec,
    GroupStartError,
    ShardOpened,
    ShardReady,
    StartRejected,
    StartTraining,
    Stop,
    WorkerGroup,
    WorkerGroupFactory,
    WorkerSlot,
)
from reference.train._internal.worker_group.execution import (
    DistributedContext,
    ExecutionGroup,
    Worker,
    WorkerGroupContext,
    WorkerMetadata,
    tried,
)
from reference.train._internal.worker_group.exit_routing import route_exit
from reference.train._internal.worker_group.worker import (
    WorkerBoot,
    install_dataset_shards,
    simcluster_rank_entry,
)

logger = logging.getLogger(__name__)

PLACEMENT_TIMEOUT_S = 30.0
SHUTDOWN_TIMEOUT_S = 10.0
#: how long stopped workers get to return before they are killed
STOP_GRACE_S = 2.0


def assign_ranks(node_ids: list[str], accelerator_ids: list[list[int]]) -> list[int]:
    """Bundle index of each world rank (contiguous per node, nodes by first appearance)."""
    first = {nid: k for k, nid in enumerate(dict.fromkeys(node_ids))}
    return sorted(range(len(node_ids)),
                  key=lambda i: (first[node_ids[i]], min(accelerator_ids[i], default=-1), i))


class SimclusterGroup(WorkerGroup):
    def __init__(self, factory: SimclusterGroupFactory, spec: GroupSpec, placement):
        self.id = uuid.uuid4().hex[:12]
        self.factory, self.spec, self.placement = factory, spec, placement
        self.world_size = spec.num_workers
        self.events: queue.SimpleQueue = queue.SimpleQueue()
        self.workers: dict[int, object] = {}  # rank -> WorkerHandle
        self.boots: dict[int, tuple] = {}  # rank -> (node id, WorkerBoot, bundle index)
        self.slots: list[WorkerSlot] = []
        self.execution: ExecutionGroup | None = None
        self.training = False  # StartTraining was sent
        self.finished: set[int] = set()  # ranks past their training function
        self.closed = False
        self._calls = itertools.count()
        self._pending: dict[int, tuple[int, Future]] = {}  # call id -> (rank, future)
        self._collectives: dict[int, dict[int, Collective]] = {}  # seq -> rank -> entry
        self._lock = threading.Lock()

    # -- backend calls -----------------------------------------------------------------------
    def submit(self, rank: int, blob: bytes) -> Future:
        """Send one call to rank's worker (see execution.py)."""
        from simcluster import ChannelClosed

        future: Future = Future()
        handle = self.workers.get(rank)
        if handle is None or handle.exit is not None or self.closed:
            future.set_exception(RayActorError(f"the worker of rank {rank} is gone"))
            return future
        with self._lock:
            call = next(self._calls)
            self._pending[call] = (rank, future)
        try:
            self.factory.cluster.send(handle.id, Execute(call, blob))
        except ChannelClosed:
            self._kill(handle)  # its exit fails the call (on_exit)
        return future

    def on_executed(self, reply: Executed) -> None:
        with self._lock:
            rank, future = self._pending.pop(reply.call, (None, None))
        if future is not None:
            tried(reply.outcome, rank, future)

    def _fail_calls(self, rank: int | None, why: str) -> None:
        with self._lock:
            gone = [c for c, (r, _) in self._pending.items() if rank is None or r == rank]
            futures = [self._pending.pop(c) for c in gone]
        for r, future in futures:
            future.set_exception(RayActorError(f"the worker of rank {r} {why}"))

    def start_training(self) -> None:
        self.training = True
        self._send_all(sorted(self.workers), StartTraining())

    def _send_all(self, ranks: list[int], message) -> None:
        """One message to many ranks in one request (a gone rank's exit is on the queue)."""
        live = [self.workers[r].id for r in ranks if self.workers[r].exit is None]
        self.factory.cluster.send_many(live, message)

    def _send(self, rank: int, message) -> None:
        from simcluster import ChannelClosed

        handle = self.workers.get(rank)
        if handle is None or handle.exit is not None:
            return  # its exit is already on the queue
        try:
            self.factory.cluster.send(handle.id, message)
        except ChannelClosed:
            # The worker's socket closed before its exit became final (it is dying), or
            # the connection broke under a live worker. Either way this rank can no longer
            # take part: make sure it is gone, and its exit, queued by on_exit like any
            # death, is the failure the controller charges.
            self._kill(handle)

    # -- events ------------------------------------------------------------------------------
    def next_event(self, timeout: float | None):
        try:
            return self.events.get(timeout=timeout) if timeout != 0 else \
                self.events.get_nowait()
        except queue.Empty:
            return None

    def on_message(self, event) -> None:
        if isinstance(event, Executed):
            self.on_executed(event)
            return
        if isinstance(event, ShardOpened):
            for rank in sorted(self.workers):
                if rank != event.rank:
                    self._send(rank, ShardReady(event.name))
            return
        if isinstance(event, Collective):
            self.on_collective(event)
            return
        if isinstance(event, Finished):
            self.finished.add(event.rank)
        self.events.put(event)

    def on_collective(self, entry: Collective) -> None:
        """File one rank's entry; when every rank has entered, answer them all. A rank that
        dies inside leaves the others waiting until its failure tears the group down."""
        from reference.train._preemption import merge_notices

        entries = self._collectives.setdefault(entry.seq, {})
        entries[entry.rank] = entry
        if len(entries) < self.world_size:
            return
        del self._collectives[entry.seq]
        first = entries[min(entries)]
        if first.kind == "preemption":
            value = merge_notices({rank: e.data for rank, e in entries.items()})
        else:
            value = first.data
        for rank in sorted(entries):
            self._send(rank, CollectiveResult(entry.seq, value))

    def ack(self, rank: int, ack) -> None:
        self._send(rank, ack)

    def on_exit(self, rank: int, exit) -> None:
        # While the backend sets the group up, one death dooms every rank's call (a peer
        # waiting in a rendezvous for the dead rank would wait out its timeout).
        why = f"exited ({exit.reason or exit.code or exit.signal})" if self.training else \
            f"could not finish: rank {rank} exited during the backend's setup"
        self._fail_calls(rank if self.training else None, why)
        if rank in self.finished:
            return  # past its training function: its value is in already
        if exit.error is not None:
            self.events.put(Failed(rank, error=exit.error, traceback=exit.traceback))
        elif exit.ok and self.training:
            # The function returned without a Finished message (a worker runtime that
            # does not stay up): its value is the exit's.
            self.finished.add(rank)
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

    def shutdown(self, graceful: bool = True) -> None:
        if self.closed:
            return
        error = None
        if graceful and self.execution is not None:
            error = run_backend_shutdown(self.factory.backend, self.execution,
                                         self.spec.backend_config)
        if self.execution is not None:
            self.execution.close()
        self.closed = True
        handles = list(self.workers.values())
        if graceful:
            self._send_all(sorted(self.finished), Stop())
            for rank in sorted(self.finished):
                try:
                    self.workers[rank].wait(STOP_GRACE_S)
                except TimeoutError:
                    pass
        for h in handles:
            self._kill(h)
        for h in handles:
            try:
                h.wait(SHUTDOWN_TIMEOUT_S)
            except TimeoutError:
                pass
        self._fail_calls(None, "was stopped with its group")
        self.placement.release()
        self.factory.forget(self)
        if error is not None:
            raise error


def run_backend_shutdown(backend, execution: ExecutionGroup, config) -> Exception | None:
    """on_shutdown, as Ray's backend-setup callback runs it: a worker's RayTaskError or
    RayActorError is logged (expected when a worker crashed); any other error is returned
    for the caller to raise once the workers are stopped."""
    try:
        backend.on_shutdown(execution, config)
    except (RayActorError, RayTaskError) as exc:
        # Ray's words; its traceback (a worker that died or is still running) only at DEBUG
        logger.warning("Graceful shutdown of backend failed. This is expected if one of "
                       "the workers has crashed. (%s)", exc)
        logger.debug("The backend's on_shutdown raised:", exc_info=True)
    except Exception as exc:  # noqa: BLE001 - raised after the workers are gone
        return exc
    return None


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
