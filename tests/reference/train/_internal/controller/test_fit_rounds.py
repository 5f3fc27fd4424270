"""Distributed fits whose report rounds do not complete: what they leave in the run folder
and what they log while a round waits."""

import logging
import os
import signal
import threading
import time

import pyarrow.fs as pafs
import pytest

import reference
import reference.train as t

pytestmark = pytest.mark.slow

DEADLINE_S = 30.0


@pytest.fixture(scope="module", autouse=True)
def cluster():
    reference.shutdown()
    reference.init(num_cpus=4)
    yield
    reference.shutdown()


def _wait_until(predicate, what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not predicate():
        assert time.monotonic() < deadline, f"{what} within {DEADLINE_S} s"
        time.sleep(0.01)


def _checkpoint(folder: str, rank: int, step: int):
    os.makedirs(folder)
    with open(os.path.join(folder, f"shard-{rank}"), "w") as f:
        f.write(str(step))
    return t.Checkpoint.from_directory(folder)


def _die_after_peer_staged(config):
    """Rank 0 reports a checkpoint; rank 1 waits until rank 0's files are in the round's
    staging folder, then SIGKILLs itself (once per test: a marker file remembers)."""
    ctx = t.get_context()
    rank, run = ctx.get_world_rank(), config["run"]
    local = os.path.join(config["tmp"], f"r{rank}-{os.getpid()}")
    if rank == 1 and not os.path.exists(config["marker"]):
        def staged():
            names = os.listdir(run) if os.path.isdir(run) else []
            return any(n.startswith(".tmp-stage") and os.path.exists(
                os.path.join(run, n, "shard-0")) for n in names)

        _wait_until(staged, "rank 0 staged its checkpoint")
        open(config["marker"], "w").close()
        os.kill(os.getpid(), signal.SIGKILL)
    t.report({"step": 0}, checkpoint=_checkpoint(local, rank, 0), checkpoint_dir_name="ckpt-0")
    return rank


def _fit(tmp_path, train_fn, max_failures=0, storage_filesystem=None, storage_path=None):
    config = {"tmp": str(tmp_path), "run": str(tmp_path / "s" / "run"),
              "marker": str(tmp_path / "killed")}
    return t.DataParallelTrainer(
        train_fn, train_loop_config=config, scaling_config=t.ScalingConfig(num_workers=2),
        run_config=t.RunConfig(storage_path=storage_path or str(tmp_path / "s"), name="run",
                               storage_filesystem=storage_filesystem,
                               failure_config=t.FailureConfig(max_failures))).fit()


def _temporaries(run_dir) -> list[str]:
    return sorted(n for n in os.listdir(run_dir) if n.startswith(".tmp-"))


def test_a_fit_that_fails_mid_round_leaves_no_staging(tmp_path):
    with pytest.raises(t.WorkerGroupError):
        _fit(tmp_path, _die_after_peer_staged)
    assert os.path.exists(tmp_path / "killed")
    assert _temporaries(tmp_path / "s" / "run") == []


def test_a_restarted_fit_leaves_no_staging_of_its_failed_attempt(tmp_path):
    result = _fit(tmp_path, _die_after_peer_staged, max_failures=1)
    assert os.path.exists(tmp_path / "killed")
    assert result.checkpoint is not None
    assert _temporaries(tmp_path / "s" / "run") == []


def _two_rounds(config):
    rank = t.get_context().get_world_rank()
    for step in range(2):
        local = os.path.join(config["tmp"], f"r{rank}-s{step}-{os.getpid()}")
        t.report({"step": step}, checkpoint=_checkpoint(local, rank, step),
                 checkpoint_dir_name=f"ckpt-{step}")


def test_a_filesystem_without_directory_rename_keeps_no_staging(tmp_path):
    # A SubTreeFileSystem commits by copying: the staging folder is left to the caller.
    fs = pafs.SubTreeFileSystem(str(tmp_path), pafs.LocalFileSystem())
    result = _fit(tmp_path, _two_rounds, storage_filesystem=fs, storage_path="s")
    assert result.checkpoint is not None
    assert _temporaries(tmp_path / "s" / "run") == []
    assert sorted(os.listdir(tmp_path / "s" / "run" / "ckpt-1")) == ["shard-0", "shard-1"]


# ------------------------------------------------------------ a round some ranks miss
class _Seen(logging.Handler):
    def __init__(self, needle: str):
        super().__init__(logging.WARNING)
        self.needle, self.event, self.messages = needle, threading.Event(), []

    def emit(self, record):
        message = record.getMessage()
        self.messages.append(message)
        if self.needle in message:
            self.event.set()


def _rank1_late(config):
    rank = t.get_context().get_world_rank()
    if rank == 1:
        _wait_until(lambda: os.path.exists(config["marker"]), "the test let rank 1 report")
    t.report({"step": 0})
    return rank


def test_a_waiting_round_is_logged_naming_the_missing_ranks(tmp_path, monkeypatch):
    monkeypatch.setenv("RAY_TRAIN_COLLECTIVE_WARN_INTERVAL_S", "0.2")
    seen = _Seen("for world ranks [1]")
    logger = logging.getLogger("reference.train._internal.controller.controller")
    logger.addHandler(seen)
    box = {}
    fit = threading.Thread(target=lambda: box.update(result=_fit(tmp_path, _rank1_late)),
                           daemon=True)
    fit.start()
    try:
        warned = seen.event.wait(DEADLINE_S)
    finally:
        open(tmp_path / "killed", "w").close()  # rank 1 reports now: the round completes
        fit.join(DEADLINE_S)
        logger.removeHandler(seen)
    assert warned, f"no warning naming rank 1 within {DEADLINE_S} s; logged: {seen.messages}"
    assert not fit.is_alive() and box["result"].return_value == 0
    assert "RAY_TRAIN_COLLECTIVE_WARN_INTERVAL_S" in seen.messages[0]
    assert "every 0.2 s" in seen.messages[0]
