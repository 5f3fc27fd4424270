"""A run folder's owner in another PID namespace is never judged dead (run_owner.py).

The owner is a real, live fit process inside `unshare --pid` (what a `--network host`
container is): same host name, same boot, but its pid is its namespace's, and pid 1 here
is init. Judged by pid and start time alone it looked dead, and a fit here took its S3
lease over while it still ran."""

from __future__ import annotations

import os
import select
import shutil
import subprocess
import sys
import textwrap

import pytest

from reference.train._internal.storage.run_owner import RunOwner

CHILD = textwrap.dedent("""
    import sys
    from reference.train._internal.storage.run_owner import RunOwner
    print(RunOwner.this_process().to_bytes().decode(), flush=True)
    sys.stdin.read()  # alive until the test closes stdin
""")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="a new PID namespace needs root"),
    pytest.mark.skipif(shutil.which("unshare") is None, reason="unshare (util-linux) is missing"),
]


@pytest.fixture(scope="module")
def namespaced_owner():
    """The owner record a live fit in a new PID namespace writes (bytes)."""
    child = subprocess.Popen(
        ["unshare", "--pid", "--fork", "--mount-proc", "--kill-child", sys.executable, "-c", CHILD],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        ready, _, _ = select.select([child.stdout], [], [], 30)
        line = child.stdout.readline() if ready else ""
        if not line:
            child.kill()
            pytest.skip(f"no fit process started under unshare --pid: "
                        f"{child.communicate(timeout=10)[1]}")
        yield line.strip().encode()
    finally:
        if child.poll() is None:
            child.stdin.close()
            try:
                child.wait(10)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
        child.stdout.close()
        child.stderr.close()


def test_a_live_owner_in_another_pid_namespace_is_not_dead(namespaced_owner):
    owner = RunOwner.from_bytes(namespaced_owner)
    assert owner is not None and owner.pid != os.getpid()
    assert not owner.is_dead(), (
        f"a live fit in another PID namespace was judged dead: {owner} (its pid {owner.pid} "
        "here is another process)")
    assert "another PID namespace" in owner.describe()
    # A record without the namespace (written before it was recorded) is judged as before.
    doc = namespaced_owner.decode().replace('"pid_namespace"', '"unknown_field"')
    assert RunOwner.from_bytes(doc.encode()).is_dead()


def test_a_fit_here_does_not_take_over_the_namespaced_fits_s3_lease(namespaced_owner, s3):
    from reference.train._exceptions import RunFolderInUseError
    from reference.train._internal.storage import StorageContext
    from reference.train._internal.storage.run_lock import acquire_run_lock

    fs, bucket = s3
    storage = StorageContext(bucket, "run", storage_filesystem=fs)
    fs.create_dir(storage.experiment_fs_path)
    with fs.open_output_stream(f"{storage.experiment_fs_path}/.run_owner.json") as f:
        f.write(namespaced_owner)  # as the namespaced fit wrote it
    with pytest.raises(RunFolderInUseError, match="another PID namespace"):
        lock = acquire_run_lock(storage)
        lock.release()
