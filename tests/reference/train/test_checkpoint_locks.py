"""The locks of local checkpoint copies: a private folder per user, nothing left after use,
and still one holder at a time (reference/train/_folder_lock.py)."""

from __future__ import annotations

import os
import pickle
import shutil
import stat
import tempfile
import time

import pyarrow.fs
import pytest

from reference.train import Checkpoint, _folder_lock
from reference.train import _checkpoint as impl

NOBODY = 65534
root_only = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to become another uid")


@pytest.fixture
def private_tmp(tmp_path, monkeypatch):
    """tempfile.gettempdir() is a fresh folder, so no other test's locks are seen."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    return tmp


def _source(root) -> str:
    src = os.path.join(root, "src")
    os.makedirs(os.path.join(src, "sub"))
    with open(os.path.join(src, "sub", "model.bin"), "wb") as f:
        f.write(b"weights")
    return src


def _lock_folder(tmp, uid: int) -> str:
    return os.path.join(str(tmp), f"_trainspec_lockfiles-{uid}")


def test_lock_folder_is_private_and_empty_after_use(private_tmp, tmp_path):
    src = _source(str(tmp_path))
    root, name = os.path.split(src)
    remote = Checkpoint(name, pyarrow.fs.SubTreeFileSystem(root, pyarrow.fs.LocalFileSystem()))
    for i in range(20):
        Checkpoint.from_directory(src).to_directory(str(tmp_path / f"out{i}"))
        with pickle.loads(pickle.dumps(remote)).as_directory() as seen:
            assert os.path.isfile(os.path.join(seen, "sub", "model.bin"))
    remote.to_directory()  # the default temp folder too
    folder = _lock_folder(private_tmp, os.getuid())
    st = os.lstat(folder)
    assert stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid()
    assert stat.S_IMODE(st.st_mode) == 0o700, oct(st.st_mode)
    assert os.listdir(folder) == [], "lock files were left behind after their last use"
    assert sorted(os.listdir(private_tmp)) == sorted(
        [os.path.basename(folder), f"checkpoint_tmp_{remote._uuid.hex}"])


@root_only
def test_a_lock_folder_planted_by_another_user_is_refused(private_tmp, tmp_path):
    planted = _lock_folder(private_tmp, os.getuid())
    os.mkdir(planted, 0o777)
    os.chown(planted, NOBODY, NOBODY)
    with pytest.raises(PermissionError) as info:
        Checkpoint.from_directory(_source(str(tmp_path))).to_directory(str(tmp_path / "o"))
    message = str(info.value)
    assert planted in message and "owned by uid 65534" in message and "rm -r" in message


def _run_as(uid: int, fn) -> str:
    """fn() in a forked child running as `uid`; returns what it reported ('' = success)."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        status = 1
        try:
            os.close(read_end)
            os.setgid(uid)
            os.setuid(uid)
            fn()
            status = 0
        except BaseException as e:  # noqa: BLE001 - reported to the parent
            os.write(write_end, f"{type(e).__name__}: {e}".encode()[:4000])
        finally:
            os._exit(status)
    os.close(write_end)
    deadline = time.monotonic() + 30
    while True:
        done, code = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            raise AssertionError("the child running as another uid did not finish in 30 s")
        time.sleep(0.01)
    with os.fdopen(read_end, "rb") as r:
        report = r.read().decode()
    assert os.waitstatus_to_exitcode(code) == 0 or report, "the child died without a report"
    return report


@root_only
def test_a_second_user_gets_a_lock_folder_of_its_own(monkeypatch):
    shared = tempfile.mkdtemp(prefix="trainspec-shared-tmp-", dir="/tmp")
    try:
        os.chmod(shared, 0o1777)  # a /tmp of its own: world-writable and sticky
        monkeypatch.setattr(tempfile, "tempdir", shared)
        first = os.path.join(shared, "root-src")
        Checkpoint.from_directory(_source(first)).to_directory(os.path.join(shared, "root-out"))

        def as_nobody():
            home = tempfile.mkdtemp(dir=shared)
            src = _source(home)
            for i in range(5):
                out = Checkpoint.from_directory(src).to_directory(os.path.join(home, f"o{i}"))
                assert os.path.isfile(os.path.join(out, "sub", "model.bin"))
            folder = _lock_folder(shared, NOBODY)
            st = os.lstat(folder)
            assert st.st_uid == NOBODY and stat.S_IMODE(st.st_mode) == 0o700, oct(st.st_mode)
            assert os.listdir(folder) == [], os.listdir(folder)

        report = _run_as(NOBODY, as_nobody)
        assert report == "", f"a second user could not copy a checkpoint: {report}"
    finally:
        shutil.rmtree(shared, ignore_errors=True)


def _count_under_lock(folder: str, counter: str, rounds: int) -> None:
    for _ in range(rounds):
        with impl._lock_for(folder):
            with open(counter) as f:
                seen = int(f.read() or 0)
            os.sched_yield()  # widen the window a second holder would need
            with open(counter, "w") as f:
                f.write(str(seen + 1))


@pytest.mark.slow
def test_processes_exclude_each_other_and_leave_no_lock_file(private_tmp, tmp_path):
    """Holders unlink their lock file as they release it; a waiter that locked the removed
    file must notice and lock the new one, or two processes would count at once."""
    folder, counter = str(tmp_path / "shared"), str(tmp_path / "counter")
    open(counter, "w").close()
    workers, rounds = 4, 300
    pids = []
    try:
        for _ in range(workers):
            pid = os.fork()
            if pid == 0:  # pragma: no cover - the child
                code = 1
                try:
                    _count_under_lock(folder, counter, rounds)
                    code = 0
                finally:
                    os._exit(code)
            pids.append(pid)
        deadline = time.monotonic() + 60
        while pids and time.monotonic() < deadline:
            for pid in list(pids):
                done, status = os.waitpid(pid, os.WNOHANG)
                if done:
                    pids.remove(pid)
                    assert os.waitstatus_to_exitcode(status) == 0
            time.sleep(0.01)
        assert not pids, "counting processes did not finish in 60 s"
    finally:
        for pid in pids:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
    with open(counter) as f:
        assert int(f.read()) == workers * rounds, "two processes held the lock at once"
    assert os.listdir(_lock_folder(private_tmp, os.getuid())) == []


def test_a_waiter_reads_the_note_its_holder_left(private_tmp, tmp_path):
    holder = _folder_lock.FolderLock(str(tmp_path))
    holder.acquire(timeout=0)
    with pytest.raises(_folder_lock.filelock.Timeout):
        _folder_lock.FolderLock(str(tmp_path)).acquire(timeout=0)
    stale = os.open(holder.path, os.O_RDWR)  # as a waiter that opened the file before
    holder.release(_folder_lock.COPIED)
    try:
        assert os.pread(stale, 64, 0) == b"copied"
        assert not os.path.exists(holder.path)
    finally:
        os.close(stale)


def test_a_waiter_whose_holder_let_go_before_it_waited_still_reads_the_note(private_tmp,
                                                                            tmp_path):
    """The window between a failed acquire(timeout=0) and the acquire() that waits: the
    holder finishes its copy and lets go (removing the file) right in it."""
    holder, waiter = (_folder_lock.FolderLock(str(tmp_path)) for _ in range(2))
    holder.acquire(timeout=0)
    with pytest.raises(_folder_lock.filelock.Timeout):
        waiter.acquire(timeout=0)
    holder.release(_folder_lock.COPIED)
    assert not os.path.exists(holder.path)
    waiter.acquire()
    assert waiter.note == _folder_lock.COPIED
    waiter.release()
    assert os.listdir(_folder_lock.lock_dir()) == []


def test_a_caller_that_does_not_wait_after_all_closes_the_file_it_found_held(private_tmp,
                                                                             tmp_path):
    holder, other = (_folder_lock.FolderLock(str(tmp_path)) for _ in range(2))
    holder.acquire(timeout=0)
    before = len(os.listdir("/proc/self/fd"))
    with pytest.raises(_folder_lock.filelock.Timeout):
        other.acquire(timeout=0)
    assert len(os.listdir("/proc/self/fd")) == before + 1  # kept open for a wait
    other.release()
    assert len(os.listdir("/proc/self/fd")) == before
    holder.release()

