"""Worker groups on simcluster: rank assignment, events, teardown (their placement and
launch: simcluster_factory.py).

Ranks follow the Train API's rule: workers are grouped by node in order of first
appearance in the placement, world ranks are contiguous per node, local ranks count within
the node (ordered by lowest accelerator id), node ranks number the nodes in that order.

Events are pushed, never polled: simcluster calls us the moment a worker sends a message
or exits; both land in the group's inbox, which the controller blocks on (a metrics-only
report is consolidated right there while it waits: inbox.py). Messages carry the group id,
so a late message of a torn-down group is dropped instead of confusing the next attempt.

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

import itertools
import logging
import signal
import threading
import uuid
from concurrent.futures import Future
from typing import TYPE_CHECKING

from reference.exceptions import RayActorError, RayTaskError
from reference.train._internal.worker_group.api import (
    Collective,
    CollectiveResult,
    Execute,
    Executed,
    Failed,
    Finished,
    GroupSpec,
    ShardOpened,
    ShardReady,
    StartTraining,
    Stop,
    WorkerGroup,
    WorkerSlot,
)
from reference.train._internal.worker_group.execution import (
    ExecutionGroup,
    tried,
)
from reference.train._internal.worker_group.inbox import Inbox, InboxEvents

if TYPE_CHECKING:
    from reference.train._internal.worker_group.simcluster_factory import (
        SimclusterGroupFactory,
    )

logger = logging.getLogger(__name__)

SHUTDOWN_TIMEOUT_S = 10.0
#: how long stopped workers get to return before they are killed
STOP_GRACE_S = 2.0


def assign_ranks(node_ids: list[str], accelerator_ids: list[list[int]]) -> list[int]:
    """Bundle index of each world rank (contiguous per node, nodes by first appearance)."""
    first = {nid: k for k, nid in enumerate(dict.fromkeys(node_ids))}
    return sorted(range(len(node_ids)),
                  key=lambda i: (first[node_ids[i]], min(accelerator_ids[i], default=-1), i))


class SimclusterGroup(InboxEvents, WorkerGroup):
    def __init__(self, factory: SimclusterGroupFactory, spec: GroupSpec, placement):
        self.id = uuid.uuid4().hex[:12]
        self.factory, self.spec, self.placement = factory, spec, placement
        self.world_size = spec.num_workers
        self.events = Inbox()  # what on_message and on_exit deliver, next_event takes
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

    # -- events (next_event and offer_inline: InboxEvents) -----------------------------------
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

    def ack_all(self, ranks: list[int], ack) -> None:
        self._send_all(ranks, ack)  # pickled once, one request

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
