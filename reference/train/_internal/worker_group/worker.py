"""What runs inside a worker process: the session behind `report` and the entry point.

A report is one round trip: the rank stages its checkpoint files (if any) into the round's
staging folder in the run folder, sends a `Report`, and blocks until the controller's `Ack`
says the round was consolidated (checkpoint committed and registered). Every rank writes
into the same staging folder, so files of several ranks merge (last writer wins).

Design note
-----------
Everything that can be wrong with a report is checked here, on the reporting rank, before a
file is staged: the checkpoint_dir_name (inside the run folder, each part short enough for
the file system), and, on rank 0 when it passes a checkpoint, metrics that the run snapshot
can store (rank 0's metrics are what gets registered). A failure found later, in the driver,
would come after the round's files were committed.

`CheckpointUploadMode.NO_UPLOAD`: the checkpoint already is a folder inside the run folder.
The rank contributes an empty staging folder and names the checkpoint's own folder as the
round's checkpoint_dir_name, so the commit merges nothing into it and registers it where it
is; `get_checkpoint()` on that rank is then the very object passed to `report()`. The
controller takes rank 0's name, so this holds when rank 0 reports the folder in place (Ray
requires the ranks that pass a checkpoint in one round to pass the same folder); a round in
which only another rank does is registered under rank 0's name, without that rank's files.

`get_all_reported_checkpoints()` reads the run snapshot. It is exact without asking the
controller: `report()` returns only after the round was acknowledged, and the controller
writes the snapshot (the retained checkpoints, worst to best, with their validation
bookkeeping) before it acknowledges; the next round cannot be registered before this rank
reports again. In VALIDATED mode it reads the snapshot again until no checkpoint is
pending validation (the controller rewrites it as each validation settles). Metrics come back in the form the snapshot stores them (JSON: tuples and sets
as lists, non-finite floats as None), which is also what a resumed run holds.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import pickle
import threading
from typing import Any

import cloudpickle

from reference.train import _validation as v
from reference.train._context import TrainContext
from reference.train._internal.session import Session, set_session
from reference.train._internal.storage.snapshot import encode_json
from reference.train._internal.storage.storage_context import validate_checkpoint_dir_name
from reference.train._internal.worker_group import threads
from reference.train._internal.worker_group.api import (
    Ack,
    Collective,
    CollectiveResult,
    Execute,
    Executed,
    Finished,
    GroupSpec,
    Report,
    ShardOpened,
    ShardReady,
    StartTraining,
    Stop,
)
from reference.train._internal.worker_group.execution import run_call
from reference.train._internal.worker_group.reported import (
    reported_checkpoints,
    wait_for_validations,
)
from reference.train._internal.worker_group.staging import (
    name_in_run_folder,
    name_max,
    stage_checkpoint,
    stage_nothing,
)
from reference.train._report_config import (
    CheckpointConsistencyMode,
    CheckpointUploadMode,
)
from simcluster import ChannelClosed


@dataclasses.dataclass
class WorkerBoot:
    """Everything one worker needs, sent once when it starts."""

    spec: GroupSpec
    context: TrainContext
    env: dict


def unserializable_key(metrics: Any) -> str | None:
    if not isinstance(metrics, dict):
        return None
    try:  # the common case, plain values: the C pickler takes them all at once
        pickle.dumps(metrics, protocol=5)
        return None
    except Exception:  # noqa: BLE001 - then cloudpickle, which pickles more, value by value
        pass
    for key, value in metrics.items():
        try:
            cloudpickle.dumps(value)
        except Exception:  # noqa: BLE001 - any pickling failure names the key
            return key
    return None


def check_storable_metrics(metrics: Any) -> None:
    """Metrics registered with a checkpoint go into the run snapshot: a TypeError naming the
    key and the value's type for anything the snapshot cannot hold."""
    if not isinstance(metrics, dict):
        raise TypeError(
            f"report(metrics={metrics!r}, checkpoint=...): metrics reported with a "
            f"checkpoint must be a dict, got {type(metrics).__name__}; they are stored "
            "with the checkpoint. Report a dict such as {'loss': 0.1}."
        )
    for key, value in metrics.items():
        # the snapshot's own encoder: plain values go through the C encoder, so a large
        # metric costs this rank what it will cost the driver, not a Python walk
        encode_json(value, f"report(metrics=...): the value of key {key!r}")


def preemption_notice() -> tuple[str, float | None]:
    """This rank's part of get_preemption_info(): its node id and the deadline of a
    preemption notice for that node (UNIX seconds), or None."""
    import time

    from simcluster import worker

    deadline = worker.preemption()  # a time.monotonic() value
    unix = None if deadline is None else time.time() + (deadline - time.monotonic())
    return worker.current().node_id, unix


def install_dataset_shards(shards: dict, data_context) -> None:
    """Run on each worker (an `Execute` call) at every group start: its DataIterators."""
    from reference.data import DataContext
    from reference.train._internal.session import get_session

    if data_context is not None:
        DataContext._set_current(data_context)
    get_session("get_dataset_shard").shards = dict(shards)


class WorkerSession(Session):
    distributed = True

    def __init__(self, boot: WorkerBoot, channel):
        self.boot, self.channel = boot, channel
        self.context = boot.context
        self.checkpoint = boot.spec.checkpoint
        self.index = 0
        self.shards: dict = {}  # name -> DataIterator, installed before training starts
        self.opened: set[str] = set()  # names get_dataset_shard returned on this rank
        self.ready: set[str] = set()  # names rank 0 has opened (ShardReady arrived)
        self.collectives = 0  # collectives this rank entered in this attempt

    def recv(self):
        """The next reply for this rank, filing ShardReady notices that come first."""
        while True:
            message = self.channel.recv()
            if isinstance(message, ShardReady):
                self.ready.add(message.name)
                continue
            return message

    def get_dataset_shard(self, name):
        if name not in self.shards:  # Ray's message
            raise KeyError(f"Dataset shard for '{name}' not found. Please ensure that the "
                           "dataset is passed through the Trainer `datasets` argument.")
        if name not in self.opened:
            # A barrier, as in Ray: the other ranks get their shard once rank 0 asked.
            if self.context.world_rank == 0:
                self.channel.send(ShardOpened(0, name))
            else:
                while name not in self.ready:
                    message = self.channel.recv()
                    if not isinstance(message, ShardReady):
                        raise RuntimeError(f"get_dataset_shard({name!r}) received {message!r}"
                                           " while waiting for rank 0 to open the dataset")
                    self.ready.add(message.name)
            self.opened.add(name)
        return self.shards[name]

    def report(self, metrics, checkpoint, checkpoint_dir_name, upload_mode, delete_local,
               upload_fn, validation) -> None:
        spec = self.boot.spec
        if validation and not spec.has_validation_fn:  # Ray's message, then the fix
            raise ValueError(
                "`validation_config` was not set on the trainer, but a validation was "
                f"requested. Got report(validation={validation!r}); pass "
                "validation_config=ValidationConfig(fn) to the trainer, or drop validation=.")
        in_place = checkpoint is not None and upload_mode is CheckpointUploadMode.NO_UPLOAD
        if checkpoint_dir_name is not None and not in_place:
            validate_checkpoint_dir_name(checkpoint_dir_name)
            limit = name_max(spec.storage)
            if limit is not None:
                v.check_name_component_sizes("checkpoint_dir_name", checkpoint_dir_name, limit)
        if in_place:
            checkpoint_dir_name = name_in_run_folder(checkpoint, spec.storage)
        bad = unserializable_key(metrics)
        if bad is not None:
            raise TypeError(f"report(metrics=...): the value of key {bad!r} cannot be "
                            "serialized; report plain numbers or strings (convert tensors "
                            "with .item()) and save other objects in the checkpoint.")
        if checkpoint is not None and self.context.world_rank == 0:
            check_storable_metrics(metrics)
        index, staged = self.index, checkpoint is not None
        self.index += 1
        if staged:
            staging = f"{spec.staging_prefix}-a{spec.attempt}-{index}"
            if in_place:
                stage_nothing(spec.storage, staging)
            else:
                from simcluster import worker

                worker.before_upload(staging)  # where a fault plan fails or slows an upload
                stage_checkpoint(checkpoint, spec.storage, staging, move=bool(delete_local))
        self.channel.send(Report(self.context.world_rank, index, metrics, staged,
                                 checkpoint_dir_name, validation if staged else False))
        ack: Ack = self.recv()
        if ack.checkpoint is not None:
            # The object passed in, when the round registered its folder (rank 0's name
            # decides; see the design note).
            kept = in_place and ack.checkpoint.path == spec.storage.build_checkpoint_path_from_name(
                checkpoint_dir_name)
            self.checkpoint = checkpoint if kept else ack.checkpoint

    def get_checkpoint(self):
        return self.checkpoint

    def collective(self, kind: str, data: Any) -> Any:
        if kind == "preemption":
            data = preemption_notice()
        seq, self.collectives = self.collectives, self.collectives + 1
        self.channel.send(Collective(self.context.world_rank, seq, kind, data))
        reply = self.recv()
        if not isinstance(reply, CollectiveResult) or reply.seq != seq:
            raise RuntimeError(f"rank {self.context.world_rank} waited for collective {seq} "
                               f"({kind}) and received {reply!r}: every rank must make the "
                               "same collective calls in the same order.")
        return reply.value

    def get_all_reported_checkpoints(self, consistency_mode, timeout_s) -> list:
        # COMMITTED holds already: every report of this rank was acknowledged (registered)
        # before report() returned. VALIDATED also waits, as Ray does, until the run has no
        # pending validation (the controller rewrites the snapshot as each one settles), or
        # timeout_s passed (then the current list, pending ones included).
        v.check_consistency_mode(consistency_mode, CheckpointConsistencyMode)
        storage = self.boot.spec.storage
        if consistency_mode is CheckpointConsistencyMode.COMMITTED:
            return reported_checkpoints(storage)
        return wait_for_validations(storage, timeout_s)


def serve_calls(session: WorkerSession) -> object:
    """Run the functions the driver sends (the backend's hooks), one at a time, until a
    message that is not a call arrives; return it. (session.recv files the ShardReady
    notices: one can overtake StartTraining when rank 0 started first and opened its
    dataset at once.)"""
    while True:
        message = session.recv()
        if not isinstance(message, Execute):
            return message
        session.channel.send(Executed(message.call, run_call(message.blob)))


def simcluster_entry(group_id: str, boot: WorkerBoot):
    """What a simcluster worker runs: `worker_main` on the worker's channel, every message
    tagged with its group's id. It lives here, beside the rest of the worker side, so that
    the function a worker unpickles is one its node supervisor preloaded
    (`reference.PRELOAD`), not a driver-side module with the controller behind it."""
    from simcluster import worker

    return worker_main(boot, _TaggedChannel(group_id, worker.channel()))


def simcluster_rank_entry(group_id: str, spec: GroupSpec, context: TrainContext, env: dict):
    """`simcluster_entry` for a group started at once (`Cluster.start_workers`): the spec,
    the same for every rank, travels pickled once; the context and env are the rank's."""
    return simcluster_entry(group_id, WorkerBoot(spec=spec, context=context, env=env))


class _TaggedChannel:
    def __init__(self, group_id: str, channel):
        self.group_id, self.channel = group_id, channel

    def send(self, obj, **options) -> None:
        self.channel.send((self.group_id, obj), **options)

    def recv(self, timeout: float | None = None, **options):
        return self.channel.recv(timeout, **options)


def _is_call(type_name: str) -> bool:
    return type_name == Execute.__name__


def _not_a_call(type_name: str) -> bool:
    return type_name != Execute.__name__


class _ServingCalls:
    """The training thread's channel while a thread of its own serves the backend's calls.

    In Ray the training function runs in a thread of the worker actor, which goes on serving
    method calls meanwhile: a backend's on_shutdown reaches a rank whose function has not
    returned (the controller failed, a peer died). Here the function runs on the worker's
    main thread and `_serve` runs the `Execute` calls on another, one at a time in the order
    sent. simcluster's WorkerChannel splits the messages by type (`accept`) and sends under a
    lock; the serving thread leaves injected faults (`faults=False`) to the training thread,
    and a closed channel reaches the training thread at its next send or recv."""

    def __init__(self, channel):
        self.channel = channel
        threading.Thread(target=self._serve, name="train-worker-calls", daemon=True).start()

    def send(self, obj) -> None:
        self.channel.send(obj)

    def recv(self, timeout: float | None = None):
        return self.channel.recv(timeout, accept=_not_a_call)

    def _serve(self) -> None:
        try:
            while True:
                call = self.channel.recv(accept=_is_call, faults=False)
                self.channel.send(Executed(call.call, run_call(call.blob)), faults=False)
        except ChannelClosed:
            return  # the driver is gone
        except BaseException:  # e.g. a call's SystemExit: as a Ray actor, the worker exits
            logging.getLogger(__name__).exception("A call ended the worker's call thread")
            os._exit(1)


def worker_main(boot: WorkerBoot, channel):
    """One rank's life: serve the backend's setup calls, run the training function when
    told to (serving the backend's calls beside it, `_ServingCalls`), report its value,
    return when stopped.

    The training function's exception is the worker's outcome (the cluster carries it
    back to the controller); its value is sent as `Finished`, so the worker stays up for
    on_shutdown."""
    os.environ.update(boot.env)
    threads.apply(boot.spec.resources_per_worker)
    session = WorkerSession(boot, channel)
    set_session(session)
    try:
        try:
            message = serve_calls(session)
        except ChannelClosed:
            return None  # the group was torn down during setup
        if not isinstance(message, StartTraining):
            return None  # Stop: the backend failed to set up on another rank
        session.channel = _ServingCalls(channel)
        value = cloudpickle.loads(boot.spec.train_fn)()
        session.channel.send(Finished(boot.context.world_rank, value))
        try:
            while not isinstance(session.recv(), Stop):
                pass
        except ChannelClosed:
            pass
        return None
    finally:
        set_session(None)
