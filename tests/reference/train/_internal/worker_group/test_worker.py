"""The worker session behind report(), in process: a loopback channel plays the controller
(commit the round's staging folder, register it, acknowledge), as run.py wires it."""

from __future__ import annotations

import os
import time
import uuid

import pytest

from reference.train import (
    Checkpoint,
    CheckpointConfig,
    CheckpointConsistencyMode,
    CheckpointUploadMode,
    ReportedCheckpoint,
    ReportedCheckpointStatus,
)
from reference.train._context import TrainContext
from reference.train._internal.storage import fs_utils, snapshot
from reference.train._internal.storage.checkpoint_manager import CheckpointManager
from reference.train._internal.storage.persist import persist_as_checkpoint
from reference.train._internal.storage.storage_context import StorageContext
from reference.train._internal.worker_group.api import Ack, GroupSpec
from reference.train._internal.worker_group.worker import WorkerBoot, WorkerSession


class Loopback:
    """The controller's end of one rank's channel, for a group of one."""

    def __init__(self, storage: StorageContext, prefix: str, config=None):
        self.storage, self.prefix = storage, prefix
        self.manager = CheckpointManager(storage, config)
        self.reports: list = []

    def send(self, report) -> None:
        self.reports.append(report)
        checkpoint = None
        if report.staged:
            name = report.checkpoint_dir_name or self.storage.make_default_checkpoint_dir_name()
            staged = (self.storage.storage_filesystem, f"{self.prefix}-a0-{report.index}")
            checkpoint = persist_as_checkpoint(self.storage, [staged], name, mode="move")
            self.manager.register_checkpoint(checkpoint, report.metrics)
        else:
            self.manager.record_report_without_checkpoint()
        self._ack = Ack(report.index, checkpoint)

    def recv(self, timeout=None):
        return self._ack


def session(tmp_path, *, rank=0, name="run", config=None):
    storage = StorageContext(str(tmp_path / "storage"), name)
    prefix = fs_utils.join(storage.experiment_fs_path, f"{fs_utils.TEMP_PREFIX}stage-t")
    channel = Loopback(storage, prefix, config)
    spec = GroupSpec(num_workers=1, resources_per_worker={"CPU": 1}, placement_strategy="PACK",
                     attempt=0, experiment_name=name, storage=storage, staging_prefix=prefix,
                     train_fn=b"", checkpoint=channel.manager.latest_checkpoint)
    context = TrainContext(experiment_name=name, world_size=2, world_rank=rank,
                           storage=storage)
    return WorkerSession(WorkerBoot(spec=spec, context=context, env={}), channel)


def local_checkpoint(tmp_path, content: str = "x") -> Checkpoint:
    folder = tmp_path / f"local-{uuid.uuid4().hex[:8]}"
    folder.mkdir()
    (folder / "data.txt").write_text(content)
    return Checkpoint.from_directory(str(folder))


def report(s, metrics, checkpoint=None, name=None, mode=CheckpointUploadMode.SYNC):
    s.report(metrics, checkpoint, name, mode, None, None, False)


def listing(s, mode=CheckpointConsistencyMode.VALIDATED):
    return [(os.path.basename(r.checkpoint.path), r.metrics, r.status)
            for r in s.get_all_reported_checkpoints(mode, None)]


def run_entries(s) -> list[str]:
    return sorted(os.listdir(s.boot.spec.storage.experiment_fs_path))


COMMITTED = ReportedCheckpointStatus.COMMITTED


# ------------------------------------------------------------- get_all_reported_checkpoints
def test_lists_the_retained_checkpoints_worst_to_best_after_each_report(tmp_path):
    s = session(tmp_path, config=CheckpointConfig(num_to_keep=2))
    assert listing(s) == []
    seen = []
    for step, passed in enumerate([True, False, True, True]):
        report(s, {"step": step}, local_checkpoint(tmp_path) if passed else None,
               f"ckpt-{step}")
        seen.append(listing(s, CheckpointConsistencyMode.COMMITTED))
    assert seen == [
        [("ckpt-0", {"step": 0}, COMMITTED)],
        [("ckpt-0", {"step": 0}, COMMITTED)],
        [("ckpt-0", {"step": 0}, COMMITTED), ("ckpt-2", {"step": 2}, COMMITTED)],
        [("ckpt-2", {"step": 2}, COMMITTED), ("ckpt-3", {"step": 3}, COMMITTED)],
    ]
    (first, second) = s.get_all_reported_checkpoints(CheckpointConsistencyMode.VALIDATED, 0)
    assert isinstance(first, ReportedCheckpoint) and isinstance(first.checkpoint, Checkpoint)
    assert second.checkpoint.path == s.get_checkpoint().path


def test_a_resumed_run_lists_the_previous_runs_checkpoints(tmp_path):
    first = session(tmp_path, name="again")
    report(first, {"step": 0}, local_checkpoint(tmp_path), "ckpt-0")
    second = session(tmp_path, name="again")
    assert listing(second) == [("ckpt-0", {"step": 0}, COMMITTED)]
    assert second.get_checkpoint().path.endswith("ckpt-0")


def test_status_comes_from_the_validation_bookkeeping_of_the_snapshot(tmp_path):
    storage = StorageContext(str(tmp_path / "storage"), "ray-written")
    names = ["pending", "timed-out", "failed", "validated", "plain"]
    for name in names:
        os.makedirs(storage.build_checkpoint_path_from_name(name))
    entries = [snapshot.SnapshotEntry(n, {"n": n}) for n in names]
    snapshot.write_snapshot(storage, snapshot.ManagerSnapshot(
        checkpoint_results=entries, checkpoint_report_indices=list(range(5)),
        current_report_index=5, latest_checkpoint_result=entries[-1],
        pending_training_results=[entries[0]], pending_validation_specs=[True],
        timed_out_validation_checkpoint_dir_names=["timed-out"],
        failed_validation_checkpoint_dir_names=["failed"],
        validated_checkpoint_dir_names=["validated"]))
    s = session(tmp_path, name="ray-written")
    # COMMITTED: VALIDATED mode would wait for the pending one (no controller settles it)
    assert [status for _, _, status in listing(s, CheckpointConsistencyMode.COMMITTED)] == [
        ReportedCheckpointStatus.PENDING_VALIDATION, ReportedCheckpointStatus.VALIDATION_TIMEOUT,
        ReportedCheckpointStatus.VALIDATION_FAILED, ReportedCheckpointStatus.VALIDATED,
        COMMITTED]


def test_validated_mode_waits_for_a_pending_validation_until_its_timeout(tmp_path):
    storage = StorageContext(str(tmp_path / "storage"), "pending")
    os.makedirs(storage.build_checkpoint_path_from_name("ckpt"))
    entry = snapshot.SnapshotEntry("ckpt", {"n": 1})
    snapshot.write_snapshot(storage, snapshot.ManagerSnapshot(
        checkpoint_results=[entry], checkpoint_report_indices=[0], current_report_index=1,
        latest_checkpoint_result=entry, pending_training_results=[entry],
        pending_validation_specs=[True]))
    s = session(tmp_path, name="pending")
    start = time.monotonic()
    found = s.get_all_reported_checkpoints(CheckpointConsistencyMode.VALIDATED, 0.3)
    assert 0.3 <= time.monotonic() - start < 5
    assert [r.status for r in found] == [ReportedCheckpointStatus.PENDING_VALIDATION]


def test_consistency_mode_must_be_one_of_the_modes(tmp_path):
    s = session(tmp_path)
    with pytest.raises(ValueError, match="consistency_mode='COMMITTED'.*CheckpointConsistency"):
        s.get_all_reported_checkpoints("COMMITTED", None)


def test_local_mode_lists_nothing():
    from reference.train._internal.local_mode import LocalSession

    s = LocalSession(TrainContext(experiment_name="local"))
    s.report({"a": 1}, object(), None, CheckpointUploadMode.SYNC, None, None, False)
    assert s.get_all_reported_checkpoints(CheckpointConsistencyMode.VALIDATED, None) == []


# ------------------------------------------------------------- NO_UPLOAD
def test_no_upload_registers_the_folder_in_place_and_keeps_the_object(tmp_path):
    s = session(tmp_path)
    run = s.boot.spec.storage.experiment_fs_path
    os.makedirs(os.path.join(run, "mine", "epoch-1"))
    with open(os.path.join(run, "mine", "epoch-1", "model.bin"), "w") as f:
        f.write("weights")
    passed = Checkpoint.from_directory(os.path.join(run, "mine", "epoch-1"))
    report(s, {"step": 1}, passed, "ignored-name", CheckpointUploadMode.NO_UPLOAD)
    assert s.get_checkpoint() is passed
    assert listing(s) == [("epoch-1", {"step": 1}, COMMITTED)]
    assert s.channel.manager.latest_checkpoint.path == passed.path
    assert run_entries(s) == [".validate_storage_marker", "checkpoint_manager_snapshot.json",
                              "mine"]
    assert os.listdir(passed.path) == ["model.bin"]


def test_no_upload_of_a_folder_outside_the_run_folder_raises_before_anything(tmp_path):
    s = session(tmp_path)
    with pytest.raises(ValueError, match="not inside the run folder.*NO_UPLOAD only registers"):
        report(s, {"step": 1}, local_checkpoint(tmp_path), None, CheckpointUploadMode.NO_UPLOAD)
    assert s.channel.reports == [] and s.get_checkpoint() is None
    assert run_entries(s) == [".validate_storage_marker"]


# ------------------------------------------------------------- checks before staging
@pytest.mark.parametrize("name", ["a" * 256, "a" * 300, "ok/" + "b" * 256, "é" * 128])
def test_an_over_long_name_component_raises_before_staging(tmp_path, name):
    s = session(tmp_path)
    with pytest.raises(ValueError, match=r"checkpoint_dir_name=.* bytes long.* at most 255 "
                                         r"bytes per folder name"):
        report(s, {"step": 0}, local_checkpoint(tmp_path), name)
    assert s.channel.reports == []
    assert run_entries(s) == [".validate_storage_marker"]


@pytest.mark.parametrize("name", ["a" * 255, "é" * 127, "x/" + "b" * 255])
def test_names_within_the_limit_are_fine(tmp_path, name):
    s = session(tmp_path)
    report(s, {"step": 0}, local_checkpoint(tmp_path), name)
    assert s.get_checkpoint().path.endswith(name)


class Opaque:
    """Pickles, but is not JSON."""


@pytest.mark.parametrize("metrics, key, kind", [
    ({"loss": 0.1, "obj": Opaque()}, "obj", "Opaque"),
    ({"nested": {"deep": Opaque()}}, "nested", "Opaque"),
])
def test_unstorable_metrics_with_a_checkpoint_raise_on_rank_0_before_staging(
        tmp_path, metrics, key, kind):
    s = session(tmp_path)
    with pytest.raises(TypeError, match=rf"report\(metrics=\.\.\.\): the value of key "
                                        rf"'{key}'.* of type {kind}"):
        report(s, metrics, local_checkpoint(tmp_path), "ckpt-0")
    assert s.channel.reports == []
    assert run_entries(s) == [".validate_storage_marker"]


def test_non_dict_metrics_with_a_checkpoint_raise_on_rank_0(tmp_path):
    s = session(tmp_path)
    with pytest.raises(TypeError, match="must be a dict, got list"):
        report(s, [1, 2], local_checkpoint(tmp_path))
    assert s.channel.reports == []


@pytest.mark.parametrize("metrics", [{"s": {1, 2}, "t": (1, 2)}, {"x": float("nan")}])
def test_metrics_the_snapshot_converts_are_accepted(tmp_path, metrics):
    s = session(tmp_path)
    report(s, metrics, local_checkpoint(tmp_path), "ckpt-0")
    assert len(s.channel.reports) == 1


class Recorder:
    """A channel that acknowledges without registering (another rank's metrics are stored)."""

    def __init__(self):
        self.reports: list = []

    def send(self, report) -> None:
        self.reports.append(report)

    def recv(self, timeout=None):
        return Ack(self.reports[-1].index, None)


@pytest.mark.parametrize("rank, passes_checkpoint", [(1, True), (0, False)])
def test_metrics_that_are_not_stored_are_not_checked(tmp_path, rank, passes_checkpoint):
    s = session(tmp_path, rank=rank)
    s.channel = Recorder()
    report(s, {"obj": Opaque()}, local_checkpoint(tmp_path) if passes_checkpoint else None)
    assert [r.staged for r in s.channel.reports] == [passes_checkpoint]


class Scripted:
    """A channel whose messages from the driver are a list; what the rank sends is kept."""

    def __init__(self, incoming: list):
        self.incoming, self.sent = list(incoming), []

    def recv(self, timeout=None):
        return self.incoming.pop(0)

    def send(self, message) -> None:
        self.sent.append(message)


def test_a_shard_notice_that_overtakes_start_training_is_kept(tmp_path):
    # rank 0 may start first and open its dataset before rank 1 got StartTraining
    from reference.train._internal.worker_group.api import ShardReady, StartTraining
    from reference.train._internal.worker_group.worker import serve_calls

    s = session(tmp_path, rank=1)
    s.shards = {"train": "rank 1's iterator"}
    s.channel = Scripted([ShardReady("train"), StartTraining()])
    assert isinstance(serve_calls(s), StartTraining)
    assert s.get_dataset_shard("train") == "rank 1's iterator"  # returns without waiting
    assert s.channel.incoming == [] and s.channel.sent == []


def test_rank_0_announces_its_first_call_only_and_others_wait_for_it(tmp_path):
    from reference.train._internal.worker_group.api import Ack, ShardOpened, ShardReady

    zero = session(tmp_path, rank=0)
    zero.shards, zero.channel = {"train": 0}, Scripted([])
    zero.get_dataset_shard("train")
    zero.get_dataset_shard("train")
    assert zero.channel.sent == [ShardOpened(0, "train")]
    one = session(tmp_path, rank=1, name="run1")
    one.shards = {"train": 1, "valid": 2}
    # a notice for another dataset first, then the one it waits for, then a report's Ack
    one.channel = Scripted([ShardReady("valid"), ShardReady("train"), Ack(0, None)])
    assert one.get_dataset_shard("train") == 1
    assert one.ready == {"train", "valid"} and one.get_dataset_shard("valid") == 2
    assert one.channel.incoming == [Ack(0, None)]
    with pytest.raises(KeyError, match="Dataset shard for 'nope' not found"):
        one.get_dataset_shard("nope")
