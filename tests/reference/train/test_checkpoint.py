"""Checkpoint: construction, copies, as_directory, metadata, pickling, legacy names."""

from __future__ import annotations

import os
import pathlib
import pickle
import shutil
import tempfile
import threading

import filelock
import pyarrow.fs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conformance.strategies import read_tree, write_tree
from reference.train import Checkpoint
from reference.train import _checkpoint as impl

# A tree is name -> bytes (a file) or name -> dict (a folder, possibly empty).
_NAMES = st.text("abcxyz019_-.", min_size=1, max_size=8).filter(lambda n: n not in (".", ".."))
_TREES = st.recursive(
    st.binary(max_size=300),
    lambda inner: st.dictionaries(_NAMES, inner, max_size=3),
    max_leaves=8,
).filter(lambda t: isinstance(t, dict))
_SCRATCH = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None


@pytest.fixture
def source(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    tree = {"model.bin": bytes(range(256)), "empty": {}, "sub": {"x": b"", "deeper": {}}}
    write_tree(str(src), tree)
    return str(src), tree


@settings(max_examples=30, deadline=None)
@given(tree=_TREES)
def test_to_directory_round_trips_byte_for_byte(tree):
    with tempfile.TemporaryDirectory(dir=_SCRATCH) as root:
        src = os.path.join(root, "src")
        os.mkdir(src)
        write_tree(src, tree)
        out = Checkpoint.from_directory(src).to_directory(os.path.join(root, "a", "out"))
        assert read_tree(out) == tree
        # The remote path (a non-local pyarrow filesystem) copies the same way.
        remote = Checkpoint("src", pyarrow.fs.SubTreeFileSystem(root, pyarrow.fs.LocalFileSystem()))
        assert read_tree(remote.to_directory(os.path.join(root, "b"))) == tree


def test_to_directory_default_is_a_per_checkpoint_temp_folder(source):
    src, tree = source
    ckpt = Checkpoint.from_directory(src)
    out = ckpt.to_directory()
    try:
        assert out == os.path.join(tempfile.gettempdir(), f"checkpoint_tmp_{ckpt._uuid.hex}")
        assert read_tree(out) == tree
        assert pickle.loads(pickle.dumps(ckpt))._get_temporary_checkpoint_dir() == out
    finally:
        shutil.rmtree(out)


def test_to_directory_of_missing_data_raises_and_leaves_nothing(tmp_path):
    target = tmp_path / "out"
    with pytest.raises(FileNotFoundError):
        Checkpoint.from_directory(str(tmp_path / "missing")).to_directory(target)
    assert not target.exists()


def test_concurrent_callers_copy_once(source, tmp_path, monkeypatch):
    """The second caller finds the folder locked, waits, and copies nothing."""
    src, tree = source
    target = str(tmp_path / "shared")
    copying, second_gave_up = threading.Event(), threading.Event()
    real_lock_for, real_copy = impl._lock_for, impl._copy_tree
    copies = []

    class ObservedLock:
        def __init__(self, path):
            self._lock = real_lock_for(path)

        def acquire(self, timeout=None):
            try:
                return self._lock.acquire(timeout=timeout)
            except filelock.Timeout:
                second_gave_up.set()
                raise

        def __getattr__(self, name):
            return getattr(self._lock, name)

        def __enter__(self):
            return self._lock.__enter__()

        def __exit__(self, *exc):
            return self._lock.__exit__(*exc)

    def slow_copy(fs, fs_path, local_dir):
        copies.append(threading.current_thread().name)
        copying.set()
        assert second_gave_up.wait(30), "the second caller never tried the lock"
        real_copy(fs, fs_path, local_dir)

    monkeypatch.setattr(impl, "_lock_for", ObservedLock)
    monkeypatch.setattr(impl, "_copy_tree", slow_copy)
    ckpt = Checkpoint.from_directory(src)
    first = threading.Thread(target=ckpt.to_directory, args=(target,), name="first")
    first.start()
    assert copying.wait(30)
    assert ckpt.to_directory(target) == target  # returns only after the first copy is done
    first.join(30)
    assert copies == ["first"]
    assert read_tree(target) == tree


def test_a_caller_that_waited_out_the_folders_deletion_copies_again(source, monkeypatch):
    """The last user of as_directory() deletes the shared copy under its lock; a caller
    that arrives meanwhile (its makedirs already made an empty folder) waits, then copies:
    it never gets the empty folder (a restoring rank once read no shard from it)."""
    src, tree = source
    root, name = os.path.split(src)
    ckpt = Checkpoint(name, pyarrow.fs.SubTreeFileSystem(root, pyarrow.fs.LocalFileSystem()))
    folder = ckpt.to_directory()  # a finished copy, as a first user left it
    assert read_tree(folder) == tree
    deleting, gave_up = threading.Event(), threading.Event()
    real_lock_for = impl._lock_for

    class ObservedLock:
        def __init__(self, path):
            self._lock = real_lock_for(path)

        def acquire(self, timeout=None):
            try:
                return self._lock.acquire(timeout=timeout)
            except filelock.Timeout:
                gave_up.set()
                raise

        def __getattr__(self, attr):
            return getattr(self._lock, attr)

        def __enter__(self):
            return self._lock.__enter__()

        def __exit__(self, *exc):
            return self._lock.__exit__(*exc)

    def last_user_cleans_up():
        lock = real_lock_for(folder)
        with lock:
            shutil.rmtree(folder)
            deleting.set()
            assert gave_up.wait(30), "the second caller never tried the lock"

    monkeypatch.setattr(impl, "_lock_for", ObservedLock)
    cleaner = threading.Thread(target=last_user_cleans_up)
    cleaner.start()
    try:
        assert deleting.wait(30)
        assert ckpt.to_directory() == folder
        cleaner.join(30)
        assert read_tree(folder) == tree
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_as_directory_of_local_checkpoint_yields_its_path(source):
    src, tree = source
    ckpt = Checkpoint.from_directory(src)
    with pytest.raises(KeyError):
        with ckpt.as_directory() as seen:
            assert seen == src
            raise KeyError("leaving with an error")
    assert read_tree(src) == tree


def test_as_directory_of_remote_checkpoint_copies_and_cleans_up_after_last_user(source):
    src, tree = source
    root, name = os.path.split(src)
    ckpt = Checkpoint(name, pyarrow.fs.SubTreeFileSystem(root, pyarrow.fs.LocalFileSystem()))
    other_user = pickle.loads(pickle.dumps(ckpt))
    with ckpt.as_directory() as outer:
        assert outer != src and read_tree(outer) == tree
        with other_user.as_directory() as inner:
            assert inner == outer
        assert os.path.isdir(outer), "removed while a user was still inside"
    assert not os.path.exists(outer)


def test_metadata_lives_in_the_directory(source, tmp_path):
    src, _ = source
    ckpt = Checkpoint.from_directory(src)
    assert ckpt.get_metadata() == {}
    ckpt.set_metadata({"a": 1, "b": [1, 2]})
    ckpt.update_metadata({"b": None, "c": "x"})
    assert ckpt.get_metadata() == {"a": 1, "b": None, "c": "x"}
    ckpt.set_metadata({"z": 0})
    assert Checkpoint.from_directory(src).get_metadata() == {"z": 0}
    copy = ckpt.to_directory(tmp_path / "copy")
    assert Checkpoint.from_directory(copy).get_metadata() == {"z": 0}
    assert os.path.isfile(os.path.join(src, ".metadata.json"))


def test_construction_resolves_filesystem_and_path():
    assert Checkpoint("/tmp/x").path == "/tmp/x"
    assert Checkpoint(pathlib.Path("/tmp/x/")).path == "/tmp/x"
    assert Checkpoint("file:///tmp/y").path == "/tmp/y"
    assert isinstance(Checkpoint("/tmp/x").filesystem, pyarrow.fs.LocalFileSystem)
    assert Checkpoint.from_directory("rel/x/").path == "rel/x/"
    empty = Checkpoint("")
    assert (empty.path, empty.filesystem) == ("", None)
    subtree = pyarrow.fs.SubTreeFileSystem("/tmp", pyarrow.fs.LocalFileSystem())
    assert Checkpoint("a/b", subtree).filesystem is subtree


def test_repr_and_identity_equality():
    ckpt = Checkpoint("/tmp/x")
    assert repr(ckpt) == "Checkpoint(filesystem=local, path=/tmp/x)"
    copy = pickle.loads(pickle.dumps(ckpt))
    assert (copy.path, type(copy.filesystem)) == (ckpt.path, type(ckpt.filesystem))
    assert copy != ckpt and ckpt == ckpt
    assert Checkpoint("/a") != Checkpoint("/a")


def test_fspath_is_refused():
    with pytest.raises(TypeError, match="to_directory"):
        os.fspath(Checkpoint("/tmp/x"))


@pytest.mark.parametrize("name", ["from_dict", "to_dict", "from_bytes", "to_bytes", "from_uri",
                                  "to_uri", "uri", "get_preprocessor", "set_preprocessor",
                                  "get_internal_representation"])
def test_legacy_methods_explain_the_migration(name):
    with pytest.raises(AttributeError, match=f"does not support `{name}\\(\\)`"):
        getattr(Checkpoint, name)
    with pytest.raises(AttributeError, match=f"does not support `{name}\\(\\)`"):
        getattr(Checkpoint("/tmp/x"), name)


def test_unknown_attributes_are_plain_attribute_errors():
    assert not hasattr(Checkpoint, "nope")
    assert not hasattr(Checkpoint("/tmp/x"), "nope")
