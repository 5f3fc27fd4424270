"""RayTrainReportCallback on its own: the hook, what it reports, and the order of save,
report, barrier and cleanup, with a stand-in trainer and session."""

from __future__ import annotations

import os

import lightning.pytorch as pl
import pytest
import torch

from reference.train import CheckpointUploadMode, TrainContext
from reference.train._internal.session import Session, set_session
from reference.train.lightning import RayTrainReportCallback


class RecordingSession(Session):
    def __init__(self, events: list, rank: int = 0):
        self.events = events
        self.context = TrainContext(experiment_name="cb-test", world_size=2, world_rank=rank)

    def report(self, metrics, checkpoint, checkpoint_dir_name, upload_mode, delete_local,
               upload_fn, validation) -> None:
        files = sorted(os.listdir(checkpoint.path))
        self.events.append(("report", metrics, files, upload_mode, validation))

    def get_checkpoint(self):
        return None

    def get_all_reported_checkpoints(self, consistency_mode, timeout_s) -> list:
        return []


class FakeStrategy:
    def __init__(self, events):
        self.events = events

    def barrier(self, *args, **kwargs):
        self.events.append(("barrier",))


class FakeTrainer:
    def __init__(self, events, rank: int):
        self.events, self.rank = events, rank
        self.callback_metrics = {"loss": torch.tensor(1.5), "epoch": torch.tensor(9.0)}
        self.current_epoch, self.global_step = 3, 12
        self.strategy = FakeStrategy(events)

    def save_checkpoint(self, path, weights_only=None):
        self.events.append(("save", os.path.basename(path), weights_only))
        if self.rank == 0:  # Lightning writes the file on global rank 0 only
            with open(path, "w") as f:
                f.write("state")


@pytest.fixture
def session_of():
    def install(events, rank=0):
        set_session(RecordingSession(events, rank))

    yield install
    set_session(None)


def test_only_the_epoch_end_hook():
    hooks = [n for n in dir(pl.Callback) if n.startswith("on_")
             and getattr(RayTrainReportCallback, n) is not getattr(pl.Callback, n)]
    assert hooks == ["on_train_epoch_end"]


@pytest.mark.parametrize("rank,files", [(0, ["checkpoint.ckpt"]), (1, [])])
def test_save_report_barrier_then_delete(session_of, rank, files):
    events: list = []
    session_of(events, rank)
    callback = RayTrainReportCallback()
    assert callback.checkpoint_upload_mode is CheckpointUploadMode.SYNC
    assert callback.tmpdir_prefix.endswith(f"-name=cb-test-world_rank={rank}")
    callback.on_train_epoch_end(FakeTrainer(events, rank), None)
    # epoch and step overwrite the logged values; tensors became numbers.
    assert events == [("save", "checkpoint.ckpt", False),
                      ("report", {"loss": 1.5, "epoch": 3, "step": 12}, files,
                       CheckpointUploadMode.SYNC, False),
                      ("barrier",)]
    assert not os.path.exists(os.path.join(callback.tmpdir_prefix, "3"))


@pytest.mark.parametrize("mode,kept", [(CheckpointUploadMode.ASYNC, True),
                                       (CheckpointUploadMode.NO_UPLOAD, False)])
def test_only_an_async_upload_keeps_the_folder(session_of, mode, kept):
    events: list = []
    session_of(events)
    callback = RayTrainReportCallback(checkpoint_upload_mode=mode, validation=True)
    callback.on_train_epoch_end(FakeTrainer(events, 0), None)
    assert events[1][3:] == (mode, True)
    assert os.path.exists(os.path.join(callback.tmpdir_prefix, "3")) is kept


def test_a_new_callback_removes_what_a_previous_worker_left(session_of):
    session_of([])
    stale = os.path.join(RayTrainReportCallback().tmpdir_prefix, "7")
    os.makedirs(stale)
    RayTrainReportCallback()
    assert not os.path.exists(os.path.dirname(stale))
