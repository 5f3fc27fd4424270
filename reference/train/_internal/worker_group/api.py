"""The worker-group interface the controller drives, and the messages that cross it.

A `WorkerGroupFactory` starts `WorkerGroup`s of a given size; a group turns what its
workers do into `Event`s, delivered in order through `next_event` (blocking, event-driven:
no polling interval). The controller answers a `Report` with `ack`. `FakeWorkerGroup`
(fake.py) implements this interface from a script, for controller unit tests.
"""

from __future__ import annotations

import abc
import dataclasses
from typing import Any


class GroupStartError(RuntimeError):
    """The group could not be started (placement failed, a worker died while starting)."""


class StartRejected(GroupStartError):
    """The group can never start as configured (a request that cannot fit, a backend
    configuration the backend rejects): retrying would fail the same way. `cause`: the
    exception the backend raised, if it was one (the run's ControllerError carries it)."""

    def __init__(self, message: str, cause: BaseException | None = None):
        super().__init__(message)
        self.cause = cause


class BackendSetupError(GroupStartError):
    """A function the backend ran on a worker while setting the group up raised (a
    process group that cannot form, a bad backend name): the group is gone; `cause` is
    the worker's exception, `rank` the worker."""

    def __init__(self, cause: BaseException, rank: int | None = None):
        where = "" if rank is None else f" on rank {rank}"
        super().__init__(f"backend setup failed{where}: {type(cause).__name__}: {cause}")
        self.cause, self.rank = cause, rank


@dataclasses.dataclass(frozen=True)
class GroupSpec:
    """What a group is asked to run."""

    num_workers: int
    resources_per_worker: dict
    placement_strategy: str
    attempt: int
    experiment_name: str
    #: the run's StorageContext (picklable); workers stage checkpoint files through it
    storage: Any
    #: fs path prefix under the run folder where round k's files are staged
    staging_prefix: str
    #: cloudpickled zero-argument training function
    train_fn: bytes
    #: checkpoint every worker starts from (get_checkpoint()), or None
    checkpoint: Any = None
    backend_config: Any = None
    #: the trainer's `datasets=` (name -> Dataset or a callable making one) and its
    #: DataConfig; split per rank at each start, never sent to the workers whole
    datasets: Any = None
    dataset_config: Any = None
    #: `RunConfig(worker_runtime_env={"env_vars": ...})`, set in every worker's environment
    #: from its start (the accelerator variables the group sets win)
    worker_env: Any = None
    #: the trainer has a `validation_config` (report(validation=...) is allowed)
    has_validation_fn: bool = False


@dataclasses.dataclass(frozen=True)
class WorkerSlot:
    """Where one rank runs: what a backend needs to set up its process group."""

    rank: int
    local_rank: int
    node_rank: int
    world_size: int
    local_world_size: int
    node_id: str
    node_address: str
    accelerator: str | None = None  # "CUDA", "ROCm", "TPU" or None
    accelerator_ids: tuple = ()  # GPU ids / TPU chips of this worker on its node


# ------------------------------------------------------------------ events (worker -> controller)
@dataclasses.dataclass(frozen=True)
class Report:
    rank: int
    index: int
    metrics: Any
    staged: bool  # this rank's checkpoint files are in the round's staging folder
    checkpoint_dir_name: str | None
    #: report(validation=...): False, True or a ValidationTaskConfig
    validation: Any = False


@dataclasses.dataclass(frozen=True)
class Finished:
    rank: int
    value: Any


@dataclasses.dataclass(frozen=True)
class Failed:
    """A worker's training function raised (error set) or its process died (exit set)."""

    rank: int
    error: BaseException | None = None
    traceback: str = ""
    exit_code: int | None = None
    signal: int | None = None
    #: the worker died because its node was preempted (charged to its own budget)
    preempted: bool = False

    def describe(self) -> str:
        if self.error is not None:
            return self.traceback or repr(self.error)
        how = (f"signal {self.signal} ({_signal_name(self.signal)})" if self.signal
               else f"exit code {self.exit_code}")
        return f"worker process of rank {self.rank} died ({how})"


@dataclasses.dataclass(frozen=True)
class ShardOpened:
    """Rank 0 called get_dataset_shard(name) for the first time (the other ranks wait for
    it, as in Ray); the group answers them with `ShardReady`, not the controller."""

    rank: int
    name: str


@dataclasses.dataclass(frozen=True)
class Collective:
    """A rank entered collective number `seq` of its attempt (``reference.train.collective``
    or get_preemption_info): `kind` is "barrier", "broadcast" or "preemption"; `data` is
    what it contributes. The group answers every rank with `CollectiveResult` once all have
    entered, not the controller."""

    rank: int
    seq: int
    kind: str
    data: Any


Event = Report | Finished | Failed


@dataclasses.dataclass(frozen=True)
class Executed:
    """A worker's answer to `Execute` (see execution.run_call)."""

    call: int
    outcome: tuple


# ------------------------------------------------------------------ replies (controller -> worker)
@dataclasses.dataclass(frozen=True)
class Ack:
    index: int
    checkpoint: Any  # the persisted Checkpoint of the round, or None


@dataclasses.dataclass(frozen=True)
class Execute:
    """Run a cloudpickled (fn, args, kwargs) and answer with `Executed(call, ...)`."""

    call: int
    blob: bytes


@dataclasses.dataclass(frozen=True)
class ShardReady:
    """Rank 0 opened dataset `name`: a rank waiting in get_dataset_shard(name) may go on.
    It can arrive while a rank waits for anything else; the worker files it and goes on
    waiting."""

    name: str


@dataclasses.dataclass(frozen=True)
class CollectiveResult:
    """Every rank entered collective `seq`: its value (rank 0's data for a broadcast, the
    merged PreemptionInfo or None for "preemption", None for a barrier)."""

    seq: int
    value: Any


@dataclasses.dataclass(frozen=True)
class StartTraining:
    """The backend is set up: run the training function."""


@dataclasses.dataclass(frozen=True)
class Stop:
    """The group is shutting down: return."""


class WorkerGroup(abc.ABC):
    world_size: int

    @abc.abstractmethod
    def next_event(self, timeout: float | None) -> Event | None:
        """The next event, waiting at most timeout seconds (None: forever)."""

    @abc.abstractmethod
    def ack(self, rank: int, ack: Ack) -> None:
        """Answer rank's Report. Never raises for a worker that is gone or unreachable: that
        worker's failure arrives as its `Failed` event, charged like any death."""

    def ack_all(self, ranks: list[int], ack: Ack) -> None:
        """Answer every Report of one round with the same `ack` (a group may send it once
        for all of them); as `ack`, never raises for a worker that is gone."""
        for rank in ranks:
            self.ack(rank, ack)

    def offer_inline(self, handler) -> None:
        """The controller's handler of the events it can handle on the thread that
        delivers them, while it waits in `next_event` (see inbox.py). A group that
        delivers on the controller's own thread has no thread switch to save: ignored."""

    @abc.abstractmethod
    def shutdown(self, graceful: bool = True) -> None:
        """Stop every worker (idempotent); the group's resources are free when it returns.
        `graceful`: the backend's on_shutdown runs first (not on Ctrl-C / abort). An
        exception from on_shutdown (other than a worker's RayTaskError or RayActorError,
        which are logged) is raised after the workers were stopped."""


class WorkerGroupFactory(abc.ABC):
    @abc.abstractmethod
    def capacity(self, resources_per_worker: dict) -> int:
        """How many workers of this size the cluster could hold if nothing else ran."""

    @abc.abstractmethod
    def start(self, spec: GroupSpec) -> WorkerGroup:
        """Start a group and its backend, then its training function (raises
        GroupStartError; BackendSetupError when a backend's function failed on a worker;
        StartRejected when the backend's hooks raised in the driver)."""

    def wait_for_change(self, timeout: float) -> None:
        """Block until the cluster may have changed (a node added or freed), or timeout."""
        import time

        time.sleep(timeout)


def _signal_name(number: int) -> str:
    import signal

    try:
        return signal.Signals(number).name
    except ValueError:
        return "unknown signal"
