"""A full disk: failing writes name the path and the run, keep their errno, leave nothing
behind, and a retry after freeing space succeeds. On a real 256 KB tmpfs (needs root and
`mount`; skipped where mounting is not permitted)."""

import errno
import json
import os
import shutil
import subprocess

import pytest

from reference.train._internal.storage import (
    CheckpointManager,
    StorageContext,
    persist_checkpoint,
    read_snapshot,
)

SIZE = 256 * 1024


@pytest.fixture
def small_disk(tmp_path):
    """(mount point, filler file): a 256 KB tmpfs; removing the filler frees 96 KB."""
    mount = tmp_path / "disk"
    mount.mkdir()
    if shutil.which("mount") is None or os.geteuid() != 0:
        pytest.skip("needs root and mount(8) to make a small tmpfs")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={SIZE}", "tmpfs", str(mount)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        filler = mount / "filler"
        filler.write_bytes(b"\0" * 96 * 1024)
        yield mount, filler
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def temporaries(run):
    return [n for n in os.listdir(run) if n.startswith(".tmp-")]


def test_a_snapshot_write_on_a_full_disk_names_the_file_and_run_and_changes_nothing(
        small_disk):
    mount, filler = small_disk
    storage = StorageContext(str(mount), "run")
    manager = CheckpointManager(storage)
    pad = "x" * 20_000  # metrics are stored in the snapshot: it grows by 20 KB per report
    error = None
    for i in range(40):
        path = storage.build_checkpoint_path_from_name(f"c{i}")
        os.makedirs(path)
        try:
            manager.register_checkpoint(path, {"i": i, "pad": pad})
        except OSError as e:
            error, failed = e, path
            break
    assert error is not None, "the disk never filled up"
    assert error.errno == errno.ENOSPC  # still catchable as what the OS raised
    message = str(error)
    assert storage.checkpoint_manager_snapshot_path in message
    assert "run 'run'" in message and f"run folder '{mount}/run'" in message
    assert "No space left on device" in message and "Free space" in message
    assert temporaries(storage.experiment_fs_path) == []

    # Nothing changed: the manager and the snapshot still end at the previous checkpoint.
    assert manager.latest_checkpoint_result.dir_name == f"c{i - 1}"
    assert manager.current_report_index == i
    on_disk = read_snapshot(storage.storage_filesystem, storage.experiment_fs_path)
    assert [e.checkpoint_dir_name for e in on_disk.checkpoint_results] == [
        f"c{j}" for j in range(i)]

    filler.unlink()
    manager.register_checkpoint(failed, {"i": i, "pad": pad})  # the retry
    with open(storage.checkpoint_manager_snapshot_path) as f:
        names = [e["checkpoint_dir_name"] for e in json.load(f)["checkpoint_results"]]
    assert names == [f"c{j}" for j in range(i + 1)]
    assert manager.current_report_index == i + 1
    assert CheckpointManager(StorageContext(str(mount), "run")).current_report_index == i + 1


def test_a_persist_on_a_full_disk_names_the_folder_and_run_and_leaves_nothing(
        small_disk, tmp_path):
    mount, filler = small_disk
    storage = StorageContext(str(mount), "run")
    source = tmp_path / "source"
    source.mkdir()
    (source / "a.bin").write_bytes(os.urandom(64 * 1024))
    (source / "b.bin").write_bytes(os.urandom(150 * 1024))  # more than is free
    with pytest.raises(OSError) as info:
        persist_checkpoint(storage, str(source), "epoch_1")
    assert info.value.errno == errno.ENOSPC
    message = str(info.value)
    final = storage.build_checkpoint_path_from_name("epoch_1")
    assert f"checkpoint 'epoch_1' to {final!r}" in message
    assert "run 'run'" in message and "Free space" in message
    assert sorted(os.listdir(storage.experiment_fs_path)) == [".validate_storage_marker"]

    filler.unlink()
    assert persist_checkpoint(storage, str(source), "epoch_1") == final  # the retry
    assert (mount / "run" / "epoch_1" / "b.bin").read_bytes() == (source / "b.bin").read_bytes()
    assert temporaries(storage.experiment_fs_path) == []


@pytest.mark.slow
def test_a_fit_on_a_full_disk_names_the_snapshot_and_a_retry_resumes(small_disk):
    import reference
    import reference.train as t

    mount, filler = small_disk

    def train():
        import tempfile

        start = t.get_checkpoint()
        for i in range(12):
            folder = tempfile.mkdtemp()
            with open(os.path.join(folder, "w"), "w") as f:
                f.write(str(i))
            t.report({"i": i, "pad": "x" * 20_000}, checkpoint=t.Checkpoint.from_directory(folder))
        return start is not None

    def fit():
        return t.DataParallelTrainer(
            train, scaling_config=t.ScalingConfig(num_workers=1),
            run_config=t.RunConfig(storage_path=str(mount), name="run",
                                   checkpoint_config=t.CheckpointConfig(num_to_keep=4))).fit()

    try:
        with pytest.raises((OSError, t.ControllerError)) as info:
            fit()
        error = getattr(info.value, "controller_failure", info.value)
        assert isinstance(error, OSError) and error.errno == errno.ENOSPC
        assert f"{mount}/run/checkpoint_manager_snapshot.json" in str(error)
        assert "run 'run'" in str(error)
        filler.unlink()
        result = fit()
    finally:
        reference.shutdown()
    assert result.return_value is True  # resumed from the checkpoints the first fit registered
    assert len(result.best_checkpoints) == 4
