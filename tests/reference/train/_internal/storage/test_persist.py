import os

import pyarrow.fs as pafs
import pytest

from reference.train._internal.storage import StorageContext, persist
from reference.train._internal.storage.persist import (
    delete_checkpoint_dir,
    persist_checkpoint,
    remove_temporaries,
)


def make_tree(root, files):
    for rel, data in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return root


def read_tree(root):
    out = {}
    for dirpath, _, names in os.walk(root):
        for name in names:
            full = os.path.join(dirpath, name)
            out[os.path.relpath(full, root)] = open(full, "rb").read()
    return out


@pytest.fixture
def storage(tmp_path):
    return StorageContext(str(tmp_path / "store"), "run")


def run_entries(storage):
    return sorted(os.listdir(storage.experiment_fs_path))


def test_copy_keeps_the_source_and_leaves_no_temporaries(storage, tmp_path):
    src = make_tree(tmp_path / "src", {"a.bin": b"1" * 1000, "sub/b.txt": b"b"})
    path = persist_checkpoint(storage, str(src), "ckpt")
    assert path == f"{storage.experiment_fs_path}/ckpt"
    assert read_tree(path) == {"a.bin": b"1" * 1000, "sub/b.txt": b"b"}
    assert read_tree(src) == read_tree(path)
    assert run_entries(storage) == [".validate_storage_marker", "ckpt"]


def test_merge_last_writer_wins(storage, tmp_path):
    r0 = make_tree(tmp_path / "r0", {"shared": b"rank0", "only0": b"0", "d/x": b"0"})
    r1 = make_tree(tmp_path / "r1", {"shared": b"rank1", "only1": b"1", "d/y": b"1"})
    path = persist_checkpoint(storage, [str(r0), str(r1)], "merged")
    assert read_tree(path) == {
        "shared": b"rank1", "only0": b"0", "only1": b"1", "d/x": b"0", "d/y": b"1",
    }


def test_merge_replaces_a_folder_by_a_file_and_back(storage, tmp_path):
    r0 = make_tree(tmp_path / "r0", {"x/inner": b"dir", "y": b"file"})
    r1 = make_tree(tmp_path / "r1", {"x": b"file now", "y/inner": b"dir now"})
    path = persist_checkpoint(storage, [str(r0), str(r1)], "c")
    assert read_tree(path) == {"x": b"file now", "y/inner": b"dir now"}


def test_move_mode_consumes_sources_without_copying(storage, tmp_path):
    r0 = make_tree(tmp_path / "r0", {"big": b"x" * 10_000})
    r1 = make_tree(tmp_path / "r1", {"other": b"y"})
    inode = os.stat(r0 / "big").st_ino
    path = persist_checkpoint(storage, [str(r0), str(r1)], "moved", mode="move")
    assert os.stat(os.path.join(path, "big")).st_ino == inode  # renamed, not copied
    assert read_tree(path) == {"big": b"x" * 10_000, "other": b"y"}
    assert not r0.exists() and read_tree(r1) == {}


def test_nested_name_and_checkpoint_like_sources(storage, tmp_path):
    class Ckpt:
        def __init__(self, path):
            self.path, self.filesystem = str(path), pafs.LocalFileSystem()

    src = make_tree(tmp_path / "s", {"f": b"1"})
    path = persist_checkpoint(storage, Ckpt(src), "epochs/3")
    assert read_tree(path) == {"f": b"1"}
    path2 = persist_checkpoint(storage, (pafs.LocalFileSystem(), str(src)), "epochs/4")
    assert read_tree(path2) == {"f": b"1"}
    assert run_entries(storage) == [".validate_storage_marker", "epochs"]


def test_empty_source_commits_an_empty_folder(storage, tmp_path):
    (tmp_path / "empty").mkdir()
    path = persist_checkpoint(storage, str(tmp_path / "empty"), "c")
    assert os.path.isdir(path) and os.listdir(path) == []


def test_repersisting_a_name_merges_file_by_file(storage, tmp_path):
    persist_checkpoint(storage, str(make_tree(tmp_path / "a", {"f": b"old", "g": b"g"})), "c")
    path = persist_checkpoint(storage, str(make_tree(tmp_path / "b", {"f": b"new"})), "c")
    assert read_tree(path) == {"f": b"new", "g": b"g"}
    assert run_entries(storage) == [".validate_storage_marker", "c"]


def test_source_already_in_place_is_left_alone(storage, tmp_path):
    path = persist_checkpoint(storage, str(make_tree(tmp_path / "a", {"f": b"1"})), "c")
    assert persist_checkpoint(storage, path, "c") == path
    assert read_tree(path) == {"f": b"1"}


def test_bad_sources_and_names_write_nothing(storage, tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(FileNotFoundError):
        persist_checkpoint(storage, str(tmp_path / "missing"), "c")
    with pytest.raises(NotADirectoryError):
        persist_checkpoint(storage, str(tmp_path / "file"), "c")
    with pytest.raises(ValueError, match="checkpoint_dir_name"):
        persist_checkpoint(storage, str(tmp_path), "../escape")
    with pytest.raises(ValueError, match="nested"):
        persist_checkpoint(storage, storage.experiment_fs_path, "c")
    with pytest.raises(ValueError, match="mode="):
        persist_checkpoint(storage, str(tmp_path), "c", mode="link")
    assert run_entries(storage) == [".validate_storage_marker"]
    assert sorted(os.listdir(tmp_path / "store")) == ["run"]


def test_a_failing_copy_leaves_no_temporary(storage, tmp_path):
    src = make_tree(tmp_path / "s", {"a": b"1"})
    os.mkfifo(src / "pipe")  # copying a named pipe fails (shutil.SpecialFileError)
    with pytest.raises(OSError, match="named pipe"):
        persist_checkpoint(storage, str(src), "c")
    assert run_entries(storage) == [".validate_storage_marker"]


def test_delete_renames_aside_first(storage, tmp_path):
    path = persist_checkpoint(storage, str(make_tree(tmp_path / "s", {"f": b"1"})), "c")
    assert delete_checkpoint_dir(storage, path)
    assert run_entries(storage) == [".validate_storage_marker"]
    assert delete_checkpoint_dir(storage, path)  # already gone: fine


def test_remove_temporaries(storage):
    run = storage.experiment_fs_path
    os.makedirs(f"{run}/.tmp-c-123/sub")
    open(f"{run}/.tmp-snapshot-1", "w").close()
    os.makedirs(f"{run}/keep")
    removed = remove_temporaries(storage)
    assert sorted(os.path.basename(p) for p in removed) == [".tmp-c-123", ".tmp-snapshot-1"]
    assert run_entries(storage) == [".validate_storage_marker", "keep"]


def test_fs_move_strategy_on_a_subtree_filesystem(tmp_path):
    sub = pafs.SubTreeFileSystem(str(tmp_path), pafs.LocalFileSystem())
    storage = StorageContext("store", "run", storage_filesystem=sub)
    r0 = make_tree(tmp_path / "r0", {"a": b"0", "s": b"0"})
    r1 = make_tree(tmp_path / "r1", {"s": b"1"})
    path = persist_checkpoint(storage, [str(r0), str(r1)], "c")
    assert path == "store/run/c"
    assert read_tree(tmp_path / "store/run/c") == {"a": b"0", "s": b"1"}
    assert delete_checkpoint_dir(storage, path)
    assert sorted(os.listdir(tmp_path / "store/run")) == [".validate_storage_marker"]


def test_direct_strategy_on_an_fsspec_filesystem(tmp_path):
    fsspec_memory = pytest.importorskip("fsspec.implementations.memory")
    fs = pafs.PyFileSystem(pafs.FSSpecHandler(fsspec_memory.MemoryFileSystem()))
    storage = StorageContext("/bucket", "run", storage_filesystem=fs)
    assert persist.fs_utils.commit_strategy(fs) == persist.fs_utils.COMMIT_DIRECT
    r0 = make_tree(tmp_path / "r0", {"a": b"0", "s": b"0"})
    r1 = make_tree(tmp_path / "r1", {"s": b"1"})
    path = persist_checkpoint(storage, [str(r0), str(r1)], "c")
    with fs.open_input_stream(f"{path}/s") as f:
        assert f.read() == b"1"
    with fs.open_input_stream(f"{path}/a") as f:
        assert f.read() == b"0"
    assert delete_checkpoint_dir(storage, path)
    assert fs.get_file_info(path).type == pafs.FileType.NotFound
