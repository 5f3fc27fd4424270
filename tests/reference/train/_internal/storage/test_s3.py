"""Storage on `s3://` against a real S3-protocol server (moto's standalone server) on loopback.

The server runs as a separate process speaking HTTP, so these tests exercise pyarrow's real S3
client: object stores have no rename, so persistence writes under the final prefix and the
snapshot decides what exists (see persist.py's design note).
"""

import os
import socket
import subprocess
import sys

import pyarrow.fs as pafs
import pytest

from conformance import s3_server
from reference.train._internal.storage import (
    CheckpointManager,
    CheckpointManagerInitializationError,
    StorageContext,
    persist_checkpoint,
    read_result_state,
    remove_temporaries,
)

pytest.importorskip("moto.server", reason=s3_server.MISSING)

pytestmark = pytest.mark.slow

ACCESS_KEY, SECRET_KEY, REGION = s3_server.ACCESS_KEY, s3_server.SECRET_KEY, s3_server.REGION


@pytest.fixture
def endpoint(s3_endpoint):
    return s3_endpoint


def read(fs, path):
    with fs.open_input_stream(path) as f:
        return f.read()


def listing(fs, path):
    infos = fs.get_file_info(pafs.FileSelector(path, recursive=True, allow_not_found=True))
    return sorted(i.path[len(path) + 1:] for i in infos if i.type == pafs.FileType.File)


def make_source(root, files):
    root.mkdir(parents=True)
    for name, data in files.items():
        (root / name).write_bytes(data)
    return str(root)


class Config:
    num_to_keep = 2
    checkpoint_score_attribute = "acc"
    checkpoint_score_order = "max"


def test_storage_context_with_an_explicit_s3_filesystem(s3):
    fs, bucket = s3
    storage = StorageContext(f"{bucket}/prefix/", "run", storage_filesystem=fs)
    assert storage.storage_fs_path == f"{bucket}/prefix"
    assert storage.experiment_fs_path == f"{bucket}/prefix/run"
    assert listing(fs, storage.experiment_fs_path) == [".validate_storage_marker"]
    assert remove_temporaries(storage) == []


def test_persist_merges_ranks_under_the_final_prefix(s3, tmp_path):
    fs, bucket = s3
    storage = StorageContext(bucket, "run", storage_filesystem=fs)
    big = os.urandom(12 * 1024 * 1024)  # above the multipart threshold
    r0 = make_source(tmp_path / "r0", {"model.bin": big, "shared": b"rank0"})
    r1 = make_source(tmp_path / "r1", {"shared": b"rank1", "extra": b"1"})
    path = persist_checkpoint(storage, [r0, r1], "epochs/1", mode="move")
    assert path == f"{bucket}/run/epochs/1"
    assert listing(fs, path) == ["extra", "model.bin", "shared"]
    assert read(fs, f"{path}/model.bin") == big
    assert read(fs, f"{path}/shared") == b"rank1"
    # "move" only renames on one local filesystem; uploads leave the sources alone.
    assert sorted(os.listdir(r0)) == ["model.bin", "shared"]


def test_manager_retention_snapshot_and_restore_on_s3(s3, tmp_path):
    fs, bucket = s3
    storage = StorageContext(f"{bucket}/results", "run", storage_filesystem=fs)
    manager = CheckpointManager(storage, Config())
    for i, acc in enumerate([0.5, 0.9, 0.1, 0.7]):
        src = make_source(tmp_path / f"s{i}", {"w": bytes([i]) * 100})
        manager.register_checkpoint(persist_checkpoint(storage, src, f"c{i}"), {"acc": acc})
    assert [r.dir_name for r in manager.checkpoint_results] == ["c3", "c1"]
    run = storage.experiment_fs_path
    top = {p.split("/")[0] for p in listing(fs, run)}
    assert top == {".validate_storage_marker", "checkpoint_manager_snapshot.json", "c1", "c3"}

    resumed = CheckpointManager(StorageContext(f"{bucket}/results", "run",
                                               storage_filesystem=fs), Config())
    assert [r.dir_name for r in resumed.checkpoint_results] == ["c3", "c1"]
    assert resumed.latest_checkpoint_result.dir_name == "c3"
    assert resumed.current_report_index == 4

    state = read_result_state(fs, run)
    assert state.latest == (f"{run}/c3", {"acc": 0.7})
    assert [m["acc"] for _, m in state.best] == [0.7, 0.9]
    checkpoint, metrics = resumed.best_checkpoints[-1]
    assert checkpoint.filesystem is fs and checkpoint.path == f"{run}/c1"
    assert read(fs, f"{checkpoint.path}/w") == bytes([1]) * 100


def test_corrupt_and_dangling_snapshots_on_s3(s3, tmp_path):
    fs, bucket = s3
    storage = StorageContext(bucket, "run", storage_filesystem=fs)
    manager = CheckpointManager(storage)
    src = make_source(tmp_path / "s", {"w": b"1"})
    manager.register_checkpoint(persist_checkpoint(storage, src, "c0"), {})
    fs.delete_dir(f"{storage.experiment_fs_path}/c0")
    with pytest.raises(CheckpointManagerInitializationError, match="does not exist anymore"):
        CheckpointManager(storage)
    with fs.open_output_stream(storage.checkpoint_manager_snapshot_path) as f:
        f.write(b"{not json")
    with pytest.raises(CheckpointManagerInitializationError, match="is corrupt"):
        CheckpointManager(storage)


def test_s3_uri_with_the_endpoint_from_the_environment(endpoint, s3, tmp_path, monkeypatch):
    fs, bucket = s3
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://{endpoint}")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    monkeypatch.setenv("AWS_REGION", REGION)
    storage = StorageContext(f"s3://{bucket}/uri", "run")
    assert isinstance(storage.storage_filesystem, pafs.S3FileSystem)
    assert storage.experiment_fs_path == f"{bucket}/uri/run"
    manager = CheckpointManager(storage, Config())
    src = make_source(tmp_path / "s", {"w": b"via uri"})
    manager.register_checkpoint(persist_checkpoint(storage, src, "c0"), {"acc": 1})
    assert read(fs, f"{bucket}/uri/run/c0/w") == b"via uri"
    resumed = CheckpointManager(StorageContext(f"s3://{bucket}/uri", "run"), Config())
    assert [r.dir_name for r in resumed.checkpoint_results] == ["c0"]


# ----- the run-folder lease (storage/s3_lease.py) -------------------------------------------

LOCK_CHILD = os.path.join(os.path.dirname(__file__), "lock_child.py")


def lease_of(fs, storage):
    return f"{storage.experiment_fs_path}/.run_owner.json"


def put_lease(fs, path, **fields):
    import json

    doc = {"host": "elsewhere", "pid": 1, "started_at": 0.0, "token": "t"} | fields
    with fs.open_output_stream(path) as f:
        f.write(json.dumps(doc).encode())


def test_a_lease_refuses_a_second_process_and_a_sigkilled_owner_is_taken_over(
        endpoint, s3, caplog):
    import logging
    import signal

    from reference.train._exceptions import RunFolderInUseError
    from reference.train._internal.storage.run_lock import acquire_run_lock

    fs, bucket = s3
    child = subprocess.Popen(
        [sys.executable, LOCK_CHILD, "lock", f"{bucket}/runs", "run", endpoint, ACCESS_KEY,
         SECRET_KEY, REGION], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        line = child.stdout.readline()
        assert line.startswith("HELD"), f"lock child printed {line!r}, exit {child.poll()}"
        storage = StorageContext(f"{bucket}/runs", "run", storage_filesystem=fs)
        with pytest.raises(RunFolderInUseError) as info:
            acquire_run_lock(storage)
        message = str(info.value)
        assert f"owned by pid {child.pid} on host {socket.gethostname()!r}" in message
        assert f"delete s3://{bucket}/runs/run/.run_owner.json" in message
        assert "REFERENCE_TRAIN_TAKE_OVER_RUN=1" in message
        os.kill(child.pid, signal.SIGKILL)
        child.wait(30)
    finally:
        if child.poll() is None:
            child.kill()
        child.wait(30)
    assert fs.get_file_info(lease_of(fs, storage)).type == pafs.FileType.File  # left behind
    with caplog.at_level(logging.WARNING):
        lock = acquire_run_lock(storage)
    assert f"from pid {child.pid} on host" in caplog.text and "it is dead" in caplog.text
    assert lock.owner.pid == os.getpid()
    lock.release()
    assert fs.get_file_info(lease_of(fs, storage)).type == pafs.FileType.NotFound


def test_a_lease_of_another_host_is_taken_over_only_when_asked(s3, caplog):
    import logging

    from reference.train._exceptions import RunFolderInUseError
    from reference.train._internal.storage.run_lock import acquire_run_lock

    fs, bucket = s3
    storage = StorageContext(bucket, "run", storage_filesystem=fs)
    put_lease(fs, lease_of(fs, storage), host="elsewhere", pid=4242)
    with pytest.raises(RunFolderInUseError, match="pid 4242 on host 'elsewhere'"):
        acquire_run_lock(storage)
    with caplog.at_level(logging.WARNING):
        taken = acquire_run_lock(storage, take_over=True)
    assert "REFERENCE_TRAIN_TAKE_OVER_RUN=1 is set" in caplog.text
    # A fit whose lease was taken over leaves the new owner's lease alone when it ends.
    newer = acquire_run_lock(storage, take_over=True)
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        taken.release()
    assert "was taken over by another fit" in caplog.text
    assert fs.get_file_info(lease_of(fs, storage)).type == pafs.FileType.File
    newer.release()
    assert fs.get_file_info(lease_of(fs, storage)).type == pafs.FileType.NotFound


def test_a_store_without_conditional_writes_runs_unlocked_with_a_warning(s3, caplog,
                                                                          monkeypatch):
    import logging

    from reference.train._internal.storage import s3_lease
    from reference.train._internal.storage.run_lock import acquire_run_lock

    def refuse(fs):
        raise s3_lease._Unsupported("the store does not support conditional writes (501)")

    monkeypatch.setattr(s3_lease, "client_for", refuse)
    fs, bucket = s3
    with caplog.at_level(logging.WARNING):
        lock = acquire_run_lock(StorageContext(bucket, "run", storage_filesystem=fs))
    assert "is not locked: the store does not support conditional writes" in caplog.text
    lock.release()


def test_a_fit_on_s3_holds_the_lease_while_it_runs(endpoint, s3, monkeypatch):
    import reference
    import reference.train as t

    fs, bucket = s3
    for var, value in (("AWS_ENDPOINT_URL", f"http://{endpoint}"),
                       ("AWS_ACCESS_KEY_ID", ACCESS_KEY), ("AWS_SECRET_ACCESS_KEY", SECRET_KEY),
                       ("AWS_DEFAULT_REGION", REGION), ("AWS_REGION", REGION)):
        monkeypatch.setenv(var, value)
    seen = []

    class Probe(t.UserCallback):
        def after_report(self, run_context, metrics, checkpoint):
            seen.append(fs.get_file_info(f"{bucket}/fit/run/.run_owner.json").type)

    def train():
        t.report({"x": 1})

    try:
        t.DataParallelTrainer(
            train, scaling_config=t.ScalingConfig(num_workers=1),
            run_config=t.RunConfig(storage_path=f"s3://{bucket}/fit", name="run",
                                   callbacks=[Probe()])).fit()
    finally:
        reference.shutdown()
    assert seen == [pafs.FileType.File]
    assert fs.get_file_info(f"{bucket}/fit/run/.run_owner.json").type == pafs.FileType.NotFound
