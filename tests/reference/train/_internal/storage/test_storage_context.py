import os
import re
from datetime import datetime

import pyarrow.fs as pafs
import pytest

from reference.train._internal.storage import (
    VALIDATE_STORAGE_MARKER_FILENAME,
    StorageContext,
    validate_checkpoint_dir_name,
)


def test_local_layout_and_attribute_names(tmp_path):
    storage = StorageContext(str(tmp_path) + "/", "run")
    assert isinstance(storage.storage_filesystem, pafs.LocalFileSystem)
    assert storage.storage_path == str(tmp_path) + "/"
    assert storage.storage_fs_path == str(tmp_path)
    assert storage.experiment_dir_name == "run"
    assert storage.experiment_fs_path == f"{tmp_path}/run"
    assert storage.checkpoint_manager_snapshot_path == (
        f"{tmp_path}/run/checkpoint_manager_snapshot.json"
    )
    assert os.listdir(tmp_path / "run") == [VALIDATE_STORAGE_MARKER_FILENAME]
    assert storage.build_checkpoint_path_from_name("c1") == f"{tmp_path}/run/c1"
    assert storage.extract_checkpoint_dir_name_from_path(f"{tmp_path}/run/a/b") == "a/b"
    assert not storage.custom_fs_provided


def test_pathlike_and_home_expansion(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    assert StorageContext(tmp_path, "r").storage_fs_path == str(tmp_path)
    assert StorageContext("~/sub", "r").experiment_fs_path == f"{tmp_path}/sub/r"


def test_file_uri_and_explicit_filesystem(tmp_path):
    assert StorageContext(f"file://{tmp_path}", "r").experiment_fs_path == f"{tmp_path}/r"
    sub = pafs.SubTreeFileSystem(str(tmp_path), pafs.LocalFileSystem())
    storage = StorageContext("inner", "r", storage_filesystem=sub)
    assert storage.custom_fs_provided
    assert storage.experiment_fs_path == "inner/r"
    assert (tmp_path / "inner" / "r" / VALIDATE_STORAGE_MARKER_FILENAME).exists()


def test_mock_filesystem_uri():
    storage = StorageContext("mock://host/bucket/prefix", "r")
    assert storage.storage_filesystem.type_name == "mock"
    marker = storage.storage_filesystem.get_file_info(f"{storage.experiment_fs_path}/.validate_storage_marker")
    assert marker.type == pafs.FileType.File


def test_relative_path_error_names_the_setting_and_the_fix():
    with pytest.raises(ValueError) as info:
        StorageContext("relative/dir", "r")
    message = str(info.value)
    assert "RunConfig(storage_path='relative/dir')" in message
    assert "absolute" in message and os.path.abspath("relative/dir") in message


def test_unwritable_path_error_keeps_the_class_and_explains(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    with pytest.raises(OSError) as info:
        StorageContext(str(blocker / "below"), "r")
    assert isinstance(info.value, NotADirectoryError)
    assert f"RunConfig(storage_path={str(blocker / 'below')!r})" in str(info.value)
    assert "writable" in str(info.value) or "can create" in str(info.value)


def test_default_checkpoint_dir_name_format():
    name = StorageContext.make_default_checkpoint_dir_name()
    assert re.fullmatch(r"checkpoint_\d{4}-\d\d-\d\d_\d\d-\d\d-\d\d\.\d{6}", name)
    parsed = datetime.strptime(name, "checkpoint_%Y-%m-%d_%H-%M-%S.%f")
    assert abs((datetime.today() - parsed).total_seconds()) < 60


@pytest.mark.parametrize("name", ["c", "checkpoint_2024-01-01_00-00-00.000001", "a/b", "..x", "x.."])
def test_accepted_checkpoint_names(name):
    # Ray accepts nested names such as 'a/b' (seen with ray 2.60): they stay inside the run.
    assert validate_checkpoint_dir_name(name) == name


@pytest.mark.parametrize(
    "name",
    ["", ".", "..", "../x", "a/../../x", "/abs", "a//b", "a/", "./a", "a\\b", "a\x00",
     ".tmp-x", "checkpoint_manager_snapshot.json", ".validate_storage_marker"],
)
def test_refused_checkpoint_names(tmp_path, name):
    storage = StorageContext(str(tmp_path), "r")
    with pytest.raises(ValueError, match="checkpoint_dir_name"):
        storage.build_checkpoint_path_from_name(name)
    assert sorted(os.listdir(tmp_path)) == ["r"]


def test_non_string_checkpoint_name():
    with pytest.raises(TypeError, match="checkpoint_dir_name=3"):
        validate_checkpoint_dir_name(3)


@pytest.mark.parametrize("name", ["", "..", "../up", "/abs", "a/./b"])
def test_refused_run_names(tmp_path, name):
    with pytest.raises(ValueError, match=r"RunConfig\(name\)"):
        StorageContext(str(tmp_path), name)
    assert os.listdir(tmp_path) == []


def test_extract_refuses_paths_outside_the_run(tmp_path):
    storage = StorageContext(str(tmp_path), "r")
    for outside in (f"{tmp_path}/other/c", f"{tmp_path}/r", f"{tmp_path}/rx/c"):
        with pytest.raises(ValueError, match="not under the run folder"):
            storage.extract_checkpoint_dir_name_from_path(outside)
