"""What runs inside a worker process: the session behind `report` and the entry point.

A report is one round trip: the rank stages its checkpoint files (if any) into the round's
staging folder in the run folder, sends a `Report`, and blocks until the controller's `Ack`
says the round was consolidated (checkpoint committed and registered). Every rank writes
into the same staging folder, so files of several ranks merge (last writer wins).
"""

from __future__ import annotations

import dataclasses
import os
import shutil
from typing import Any

import cloudpickle

from reference.train._context import TrainContext
from reference.train._internal.session import Session, set_session
from reference.train._internal.storage import fs_utils
from reference.train._internal.storage.storage_context import validate_checkpoint_dir_name
from reference.train._internal.worker_group.api import Ack, GroupSpec, Report, WorkerSetupError


@dataclasses.dataclass
class WorkerBoot:
    """Everything one worker needs, sent once when it starts."""

    spec: GroupSpec
    context: TrainContext
    env: dict
    setup: list  # callables(context) run before the training function (backend setup)
    teardown: list = dataclasses.field(default_factory=list)


def unserializable_key(metrics: Any) -> str | None:
    if not isinstance(metrics, dict):
        return None
    for key, value in metrics.items():
        try:
            cloudpickle.dumps(value)
        except Exception:  # noqa: BLE001 - any pickling failure names the key
            return key
    return None


def stage_checkpoint(checkpoint, storage, staging: str, move: bool) -> None:
    """Copy (or move) a rank's checkpoint files into the round's staging folder."""
    fs = storage.storage_filesystem
    src_fs, src = checkpoint.filesystem, checkpoint.path
    if fs_utils.is_local(fs) and fs_utils.is_local(src_fs):
        os.makedirs(staging, exist_ok=True)
        if move:
            for name in os.listdir(src):
                target = os.path.join(staging, name)
                if os.path.isdir(target) and not os.path.islink(target):
                    shutil.copytree(os.path.join(src, name), target, dirs_exist_ok=True)
                else:
                    os.replace(os.path.join(src, name), target)
            shutil.rmtree(src, ignore_errors=True)
        else:
            shutil.copytree(src, staging, dirs_exist_ok=True)
        return
    fs.create_dir(staging, recursive=True)
    fs_utils.copy_tree(src_fs, src, fs, staging)


class WorkerSession(Session):
    def __init__(self, boot: WorkerBoot, channel):
        self.boot, self.channel = boot, channel
        self.context = boot.context
        self.checkpoint = boot.spec.checkpoint
        self.index = 0

    def report(self, metrics, checkpoint, checkpoint_dir_name, upload_mode, delete_local,
               upload_fn, validation) -> None:
        if checkpoint_dir_name is not None:
            validate_checkpoint_dir_name(checkpoint_dir_name)
        bad = unserializable_key(metrics)
        if bad is not None:
            raise TypeError(f"report(metrics=...): the value of key {bad!r} cannot be "
                            "serialized; report plain numbers or strings (convert tensors "
                            "with .item()) and save other objects in the checkpoint.")
        spec = self.boot.spec
        index, staged = self.index, checkpoint is not None
        self.index += 1
        if staged:
            from simcluster import worker

            staging = f"{spec.staging_prefix}-a{spec.attempt}-{index}"
            worker.before_upload(staging)  # where a fault plan fails or slows an upload
            stage_checkpoint(checkpoint, spec.storage, staging, move=bool(delete_local))
        self.channel.send(Report(self.context.world_rank, index, metrics, staged,
                                 checkpoint_dir_name))
        ack: Ack = self.channel.recv()
        if ack.checkpoint is not None:
            self.checkpoint = ack.checkpoint

    def get_checkpoint(self):
        return self.checkpoint


def worker_main(boot: WorkerBoot, channel):
    """Run one rank's training function; its return value or exception is the worker's
    outcome (the cluster carries it back to the controller)."""
    os.environ.update(boot.env)
    set_session(WorkerSession(boot, channel))
    try:
        try:
            for setup in boot.setup:
                setup(boot.context)
        except Exception as exc:  # noqa: BLE001 - reported as a setup failure
            raise WorkerSetupError(exc) from exc
        value = cloudpickle.loads(boot.spec.train_fn)()
        for teardown in boot.teardown:
            teardown(boot.context)
        return value
    finally:
        set_session(None)
