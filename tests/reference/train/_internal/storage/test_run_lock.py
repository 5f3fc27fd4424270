"""One owner per run folder (storage/run_lock.py) on local disk, with two real processes."""

import logging
import os
import pickle
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.fs as pafs
import pytest

from reference.train._internal.storage import StorageContext

CHILD = str(Path(__file__).with_name("lock_child.py"))
DEADLINE_S = 120.0


def start_holder(storage_path, name="run"):
    """A child process that owns the run folder until it reads a line; returns it once held."""
    child = subprocess.Popen([sys.executable, CHILD, "lock", str(storage_path), name],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    line = child.stdout.readline()  # the child prints as soon as it holds the lock
    assert line.startswith("HELD"), f"lock child printed {line!r}, exit code {child.poll()}"
    return child


def stop(child):
    if child.poll() is None:
        child.kill()
    child.wait(DEADLINE_S)


def wait_for(path, process):
    deadline = time.monotonic() + DEADLINE_S
    while not os.path.exists(path):
        assert process.poll() is None, f"the fit process exited with {process.returncode}"
        assert time.monotonic() < deadline, f"{path} did not appear within {DEADLINE_S} s"
        time.sleep(0.05)  # poll interval, with a deadline


def acquire(storage_path, name="run"):
    from reference.train._internal.storage.run_lock import acquire_run_lock

    return acquire_run_lock(StorageContext(str(storage_path), name))


def test_a_second_process_is_refused_at_once_naming_the_first(tmp_path):
    from reference.train._exceptions import RunFolderInUseError

    holder = start_holder(tmp_path)
    try:
        started = time.monotonic()
        with pytest.raises(RunFolderInUseError) as info:
            acquire(tmp_path)
        # a lock that waited for its owner would wait until the owner ends (never, here)
        assert time.monotonic() - started < 10.0, "refusing must not wait for the owner"
        message = str(info.value)
        assert f"pid {holder.pid} on host {socket.gethostname()!r}" in message
        assert "name='run'" in message and "choose another RunConfig(name=...)" in message
        assert info.value.owner.pid == holder.pid
        assert info.value.run_path == f"{tmp_path}/run"
        back = pickle.loads(pickle.dumps(info.value))
        assert str(back) == message and back.owner == info.value.owner

        holder.stdin.write("\n")
        holder.stdin.flush()
        assert holder.stdout.readline().strip() == "RELEASED"
        holder.wait(DEADLINE_S)
    finally:
        stop(holder)
    lock = acquire(tmp_path)
    assert lock.owner.pid == os.getpid()
    lock.release()
    lock.release()  # idempotent
    assert sorted(os.listdir(tmp_path / "run")) == [".validate_storage_marker"]


def test_the_lock_of_a_sigkilled_owner_is_taken_over_with_a_warning(tmp_path, caplog):
    holder = start_holder(tmp_path)
    try:
        assert ".run_owner.json" in os.listdir(tmp_path / "run")
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(DEADLINE_S)
    finally:
        stop(holder)
    with caplog.at_level(logging.WARNING):
        lock = acquire(tmp_path)
    try:
        assert f"from pid {holder.pid} on host" in caplog.text
        assert "ended without releasing it" in caplog.text
        with open(tmp_path / "run" / ".run_owner.json") as f:
            assert f'"pid": {os.getpid()}' in f.read()
    finally:
        lock.release()
    assert not os.path.exists(tmp_path / "run" / ".run_owner.json")


def test_two_locks_in_one_process_exclude_each_other(tmp_path):
    from reference.train._exceptions import RunFolderInUseError

    lock = acquire(tmp_path)
    try:
        with pytest.raises(RunFolderInUseError, match=f"pid {os.getpid()} "):
            acquire(tmp_path)
        acquire(tmp_path, name="other").release()  # another run folder is free
    finally:
        lock.release()


def test_the_start_up_clean_up_keeps_the_owner_record(tmp_path):
    from reference.train._internal.storage import CheckpointManager, remove_temporaries

    lock = acquire(tmp_path)
    try:
        storage = StorageContext(str(tmp_path), "run")
        remove_temporaries(storage)
        CheckpointManager(storage)
        assert ".run_owner.json" in os.listdir(tmp_path / "run")
    finally:
        lock.release()


def test_a_filesystem_without_locks_runs_unlocked_with_a_warning(caplog):
    from reference.train._internal.storage.run_lock import acquire_run_lock

    fs = pafs._MockFileSystem()
    with caplog.at_level(logging.WARNING):
        lock = acquire_run_lock(StorageContext("bucket", "run", storage_filesystem=fs))
    assert "is not locked" in caplog.text and "'mock'" in caplog.text
    lock.release()


def test_ray_reads_a_folder_while_a_fit_owns_it(tmp_path):
    pytest.importorskip("ray")
    from ray.train.v2.api.result import Result as RayResult

    from reference.train._internal.storage import CheckpointManager

    lock = acquire(tmp_path)
    try:
        storage = StorageContext(str(tmp_path), "run")
        manager = CheckpointManager(storage)
        os.makedirs(storage.build_checkpoint_path_from_name("c0"))
        manager.register_checkpoint(storage.build_checkpoint_path_from_name("c0"), {"x": 1})
        assert ".run_owner.json" in os.listdir(storage.experiment_fs_path)
        result = RayResult.from_path(storage.experiment_fs_path)
        assert result.metrics == {"x": 1} and result.checkpoint.path.endswith("/c0")
    finally:
        lock.release()


def test_a_fit_that_fails_at_start_up_releases_the_folder(tmp_path):
    import reference.train as t

    run = tmp_path / "run"
    run.mkdir()
    (run / "checkpoint_manager_snapshot.json").write_text("{not json")
    trainer = t.DataParallelTrainer(
        lambda: None, scaling_config=t.ScalingConfig(num_workers=1),
        run_config=t.RunConfig(storage_path=str(tmp_path), name="run"))
    with pytest.raises(Exception, match="is corrupt"):
        trainer.fit()
    acquire(tmp_path).release()  # not held any more
    assert not (run / ".run_owner.json").exists()


@pytest.mark.slow
def test_a_second_fit_on_a_running_fits_folder_fails_and_one_after_it_resumes(tmp_path):
    import reference
    import reference.train as t

    storage, signals = tmp_path / "storage", tmp_path / "signals"
    signals.mkdir()
    first = subprocess.Popen([sys.executable, CHILD, "fit", str(storage), "run", str(signals)],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_for(signals / "ready", first)
        run = storage / "run"
        before = sorted(os.listdir(run))
        snapshot = (run / "checkpoint_manager_snapshot.json").read_bytes()

        def second():
            t.report({"second": True},
                     checkpoint=t.Checkpoint.from_directory(str(signals / "ckpt-0")))

        trainer = t.DataParallelTrainer(
            second, scaling_config=t.ScalingConfig(num_workers=1),
            run_config=t.RunConfig(storage_path=str(storage), name="run"))
        started = time.monotonic()
        with pytest.raises(Exception) as info:
            trainer.fit()
        assert type(info.value).__name__ == "RunFolderInUseError", info.value
        assert f"owned by pid {first.pid} on host {socket.gethostname()!r}" in str(info.value)
        assert time.monotonic() - started < 30.0  # not waiting for the owner (it never ends)
        # The running fit's files are untouched: its staging folder, checkpoint and snapshot.
        assert sorted(os.listdir(run)) == before
        assert (run / "checkpoint_manager_snapshot.json").read_bytes() == snapshot

        (signals / "go").touch()
        output, _ = first.communicate(timeout=DEADLINE_S)
        assert first.returncode == 0 and "DONE" in output, output
    finally:
        stop(first)

    def third():
        with t.get_checkpoint().as_directory() as d:
            with open(os.path.join(d, "w")) as f:
                return f.read()

    try:
        result = t.DataParallelTrainer(
            third, scaling_config=t.ScalingConfig(num_workers=1),
            run_config=t.RunConfig(storage_path=str(storage), name="run")).fit()
    finally:
        reference.shutdown()
    assert result.return_value == "1"  # resumed from the first fit's latest checkpoint
    assert sorted(os.listdir(storage / "run")) == [
        ".validate_storage_marker", "checkpoint_manager_snapshot.json", "step-0", "step-1"]
