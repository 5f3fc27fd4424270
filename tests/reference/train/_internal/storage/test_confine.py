"""A fit touches nothing outside its run folder (storage/confine.py): the attacks of another
writer of the storage folder, each as a user meets it through fit()."""

import json
import logging
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pyarrow.fs as pafs
import pytest

import reference.train as t
from reference.train._internal.storage import StorageContext, confine, persist

ROOT = os.geteuid() == 0


@pytest.fixture
def victim(tmp_path):
    """The user's own files, outside the storage folder, and a shared storage folder."""
    home = tmp_path / "home"
    project = home / "project"
    project.mkdir(parents=True)
    (project / "model.pt").write_bytes(b"the user's model")
    (home / "important.txt").write_bytes(b"keep me")
    shared = tmp_path / "shared"
    shared.mkdir()
    return home, shared


def _contents(folder):
    return {p.relative_to(folder).as_posix(): p.read_bytes()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def _fit(shared, fn, name="run", **checkpoint):
    trainer = t.DataParallelTrainer(
        fn, scaling_config=t.ScalingConfig(num_workers=1),
        run_config=t.RunConfig(storage_path=str(shared), name=name,
                               checkpoint_config=t.CheckpointConfig(**checkpoint)))
    return trainer.fit()


def test_a_planted_marker_link_is_refused_and_its_target_not_truncated(victim):
    home, shared = victim
    (shared / "run").mkdir()
    (shared / "run" / ".validate_storage_marker").symlink_to(home / "important.txt")
    with pytest.raises(confine.UnsafeRunFolder, match="validate_storage_marker.*symbolic link"):
        _fit(shared, lambda: None)
    assert (home / "important.txt").read_bytes() == b"keep me"


def test_a_planted_checkpoint_folder_link_is_refused_and_the_target_untouched(victim, tmp_path):
    home, shared = victim
    (shared / "run").mkdir()
    (shared / "run" / "epoch_1").symlink_to(home / "project")
    source = tmp_path / "ckpt"
    source.mkdir()
    (source / "model.pt").write_bytes(b"new weights")

    def train_fn():
        t.report({"loss": 1.0}, checkpoint=t.Checkpoint.from_directory(str(source)),
                 checkpoint_dir_name="epoch_1")

    with pytest.raises(t.TrainingFailedError) as info:
        _fit(shared, train_fn)
    assert "symbolic link" in str(info.value) and "epoch_1" in str(info.value), info.value
    assert _contents(home / "project") == {"model.pt": b"the user's model"}


def test_a_forged_snapshot_through_a_link_is_refused_before_any_restore_or_delete(victim):
    home, shared = victim
    run = shared / "run"
    run.mkdir()
    (run / ".validate_storage_marker").touch()
    (run / "x").symlink_to(home)
    entry = {"checkpoint_dir_name": "x/project", "metrics": {"loss": 1.0}, "version": 0}
    (run / "checkpoint_manager_snapshot.json").write_text(json.dumps({
        "ray_version": "2.60.0", "checkpoint_results": [entry], "latest_checkpoint_result": entry,
        "checkpoint_report_indices": [0], "current_report_index": 1,
        "pending_training_results": [], "pending_validation_specs": [],
        "validated_checkpoint_dir_names": [], "timed_out_validation_checkpoint_dir_names": [],
        "failed_validation_checkpoint_dir_names": []}))
    seen = []

    def train_fn():
        seen.append(t.get_checkpoint())
        t.report({"loss": 0.5}, checkpoint=None)

    with pytest.raises(confine.UnsafeRunFolder, match=r"'x' is a symbolic link|/x' -> "):
        _fit(shared, train_fn, num_to_keep=1)
    assert seen == []
    assert _contents(home / "project") == {"model.pt": b"the user's model"}


def test_links_below_a_reused_checkpoint_folder_are_refused(victim, tmp_path):
    home, shared = victim
    storage = StorageContext(str(shared), "run")
    first = tmp_path / "a"
    first.mkdir()
    (first / "sub").mkdir()
    (first / "sub" / "w").write_bytes(b"1")
    persist.persist_checkpoint(storage, str(first), "c")
    (shared / "run" / "c" / "sub" / "w").unlink()
    os.rmdir(shared / "run" / "c" / "sub")
    (shared / "run" / "c" / "sub").symlink_to(home / "project")
    (first / "sub" / "model.pt").write_bytes(b"overwritten?")
    with pytest.raises(confine.UnsafeRunFolder, match="before merging a checkpoint into"):
        persist.persist_checkpoint(storage, str(first), "c")
    assert _contents(home / "project") == {"model.pt": b"the user's model"}


def test_a_subtree_filesystem_over_local_disk_is_checked_as_local_disk(victim, tmp_path):
    home, shared = victim
    (shared / "run").mkdir()
    (shared / "run" / "epoch_1").symlink_to(home / "project")
    fs = pafs.SubTreeFileSystem(str(shared), pafs.LocalFileSystem())
    storage = StorageContext("/", "run", storage_filesystem=fs)
    source = tmp_path / "ckpt"
    source.mkdir()
    (source / "model.pt").write_bytes(b"new weights")
    with pytest.raises(confine.UnsafeRunFolder, match="epoch_1"):
        persist.persist_checkpoint(storage, str(source), "epoch_1")
    assert _contents(home / "project") == {"model.pt": b"the user's model"}


def test_paths_that_leave_the_run_folder_as_text_are_refused_on_any_filesystem(tmp_path):
    fs = pafs.SubTreeFileSystem(str(tmp_path), pafs.LocalFileSystem())
    storage = StorageContext("/bucket", "run", storage_filesystem=fs)
    for path in ("/bucket/run/../other/x", "/bucket/runner/x", "/bucket/run/a/../../other"):
        with pytest.raises(confine.UnsafeRunFolder, match="not inside the run folder"):
            confine.inside(storage, path, "writing")
    assert confine.inside(storage, "/bucket/run//a/./b", "writing") == "/bucket/run//a/./b"


def test_the_owners_own_links_above_the_run_folder_are_followed(tmp_path):
    """A storage_path that is a link (a results folder on a bigger disk) keeps working."""
    disk = tmp_path / "disk"
    disk.mkdir()
    (tmp_path / "results").symlink_to(disk)
    source = tmp_path / "ckpt"
    source.mkdir()
    (source / "w").write_bytes(b"1")
    result = _fit(tmp_path / "results", lambda: t.report(
        {"a": 1}, checkpoint=t.Checkpoint.from_directory(str(source)), checkpoint_dir_name="c"))
    assert result.metrics == {"a": 1} and (disk / "run" / "c" / "w").read_bytes() == b"1"


def test_a_run_folder_writable_by_others_gets_a_warning(tmp_path, caplog):
    (tmp_path / "run").mkdir()
    os.chmod(tmp_path / "run", 0o777)
    with caplog.at_level(logging.WARNING, logger=confine.__name__):
        StorageContext(str(tmp_path), "run")
    assert "can be written by users other than its owner" in caplog.text


@pytest.mark.skipif(not ROOT, reason="needs root to act as a second user")
def test_a_run_folder_of_another_user_is_refused_unless_allowed(tmp_path, monkeypatch):
    (tmp_path / "run").mkdir()
    os.chown(tmp_path / "run", 65534, 65534)
    with pytest.raises(confine.UnsafeRunFolder, match=r"belongs to .*uid 65534"):
        _fit(tmp_path, lambda: None)
    assert os.listdir(tmp_path / "run") == []
    (tmp_path / "mine").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "mine")
    os.lchown(tmp_path / "link", 65534, 65534)
    with pytest.raises(confine.UnsafeRunFolder, match="symbolic link made by"):
        StorageContext(str(tmp_path), "link")
    monkeypatch.setenv(confine.ALLOW_FOREIGN_ENV, "1")
    StorageContext(str(tmp_path), "run")
    assert os.path.exists(tmp_path / "run" / ".validate_storage_marker")


@pytest.mark.skipif(not ROOT, reason="needs root to act as a second user")
def test_a_second_user_cannot_redirect_a_fit_through_a_shared_folder(victim):
    """The whole attack across two real users: nobody (uid 65534) pre-creates the run folder
    in a sticky, world-writable storage folder and plants a link; root's fit refuses."""
    home, _ = victim
    shared = Path(tempfile.mkdtemp(prefix="trainspec-shared-"))  # tmp_path's parents are 0700
    try:
        os.chmod(shared, 0o1777)
        attacker = textwrap.dedent(f"""
            import os
            os.setgid(65534); os.setuid(65534)
            os.mkdir({str(shared / 'run')!r})
            os.symlink({str(home / 'important.txt')!r},
                       {str(shared / 'run' / '.validate_storage_marker')!r})
        """)
        subprocess.run([sys.executable, "-c", attacker], check=True, timeout=60)
        assert stat.S_ISLNK(os.lstat(shared / "run" / ".validate_storage_marker").st_mode)
        with pytest.raises(confine.UnsafeRunFolder, match="belongs to"):
            _fit(shared, lambda: None)
        assert (home / "important.txt").read_bytes() == b"keep me"
    finally:
        shutil.rmtree(shared)
