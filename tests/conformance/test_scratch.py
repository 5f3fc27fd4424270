"""A suite run keeps its temporary files in a folder of its own in memory (/dev/shm, when it
is a tmpfs with room): made 0700, used only when it is safely this user's, removed when the
run ends, and removed by the next run when a run was killed before it could."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import tempfile

import pytest

from conformance import scratch

pytestmark = pytest.mark.skipif(scratch.memory_scratch() is None,
                                reason="no tmpfs /dev/shm with room here")


def test_a_folder_with_too_little_room_or_no_tmpfs_is_not_used(tmp_path):
    assert scratch.memory_scratch(min_free=1 << 62) is None  # more than any machine has
    if not scratch._is_tmpfs(str(tmp_path)):
        assert scratch.memory_scratch(shm=str(tmp_path)) is None


def test_a_folder_others_can_write_to_is_not_used():
    base = scratch.memory_scratch()
    mode = os.stat(base).st_mode & 0o777
    try:
        os.chmod(base, 0o777)
        assert scratch.memory_scratch() is None
    finally:
        os.chmod(base, mode)
    assert scratch.memory_scratch() == base


CHILD = """
import os, sys, tempfile
from conformance import scratch
folder = scratch.use_memory_scratch()
print(folder, os.environ["TMPDIR"], tempfile.gettempdir(), flush=True)
if sys.argv[1] == "release":
    scratch.release()
    print(os.path.exists(folder), flush=True)
elif sys.argv[1] == "exit":
    from conformance.scenarios import workspace
    print(os.path.dirname(workspace()).startswith(folder), flush=True)  # removed at exit too
else:
    os._exit(0)  # killed before it could release
"""


def _child(how: str, env: dict) -> list[str]:
    done = subprocess.run([sys.executable, "-c", CHILD, how], capture_output=True,
                          text=True, timeout=60, env=env)
    assert (done.returncode, done.stderr) == (0, "")
    return done.stdout.split()


def test_a_run_that_exits_removes_its_folder_after_its_workspaces():
    env = {k: v for k, v in os.environ.items() if k != "TMPDIR"}
    folder, _, _, inside = _child("exit", env)
    assert inside == "True" and not os.path.exists(folder)


def test_a_run_uses_and_then_removes_a_folder_of_its_own():
    env = {k: v for k, v in os.environ.items() if k != "TMPDIR"}
    folder, tmpdir, gettempdir, exists = _child("release", env)
    assert folder == tmpdir == gettempdir
    assert os.path.dirname(folder) == scratch.memory_scratch()
    assert exists == "False" and not os.path.exists(folder)


def test_a_killed_runs_folder_goes_at_the_next_run_and_a_live_ones_stays():
    env = {k: v for k, v in os.environ.items() if k != "TMPDIR"}
    left = _child("killed", env)[0]
    assert os.path.isdir(left)
    live = tempfile.mkdtemp(prefix="run-", dir=scratch.memory_scratch())
    fd = os.open(os.path.join(live, ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        removed = scratch.remove_stale_runs(scratch.memory_scratch())
        assert left in removed and not os.path.exists(left)
        assert live not in removed and os.path.isdir(live)
    finally:
        os.close(fd)
        scratch.remove_stale_runs(scratch.memory_scratch())
    assert not os.path.exists(live)


def test_a_tmpdir_the_user_set_is_kept(monkeypatch, tmp_path):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    assert scratch.use_memory_scratch() is None
    assert os.environ["TMPDIR"] == str(tmp_path)
