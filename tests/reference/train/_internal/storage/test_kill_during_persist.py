"""SIGKILL a process that persists and registers checkpoints; nothing visible may be partial.

A checkpoint is visible through the snapshot, through a restored manager's lists, or as a
non-temporary folder in the run folder. Each must hold all its files with full contents.
"""

import multiprocessing
import os
import signal
import tempfile
import time

import kill_child
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reference.train._internal.storage import CheckpointManager, StorageContext, read_snapshot

pytestmark = pytest.mark.slow

DEADLINE_S = 10.0
EXAMPLES = 20


@pytest.fixture(scope="module")
def context():
    # forkserver: each child is forked from a small, single-threaded server instead of from
    # this process (whose pyarrow threads could hold locks at fork time).
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["kill_child", "reference.train._internal.storage"])
    return ctx


def scratch_root():
    shm = "/dev/shm"
    return tempfile.TemporaryDirectory(dir=shm if os.access(shm, os.W_OK) else None)


def read_tree(root):
    out = {}
    for dirpath, _, names in os.walk(root):
        for name in names:
            full = os.path.join(dirpath, name)
            with open(full, "rb") as f:
                out[os.path.relpath(full, root)] = f.read()
    return out


def assert_whole(folder, dir_name, seen_as):
    __tracebackhide__ = True
    got = read_tree(folder)
    want = kill_child.expected_files(kill_child.step_of(dir_name))
    if got != want:
        sizes = {k: len(v) for k, v in got.items()}
        wanted = {k: len(v) for k, v in want.items()}
        pytest.fail(f"{seen_as} checkpoint {dir_name!r} is partial: sizes {sizes}, "
                    f"expected {wanted} (contents compared too)")


def run_child(ctx, root, scratch, config, scores, mode, kill):
    """Start the child, kill it at the drawn point, reap it; returns how it ended."""
    receiver, sender = ctx.Pipe(duplex=False)
    stop_at = kill[1] if kill[0] == "write" else None
    child = ctx.Process(
        target=kill_child.child_main, args=(root, scratch, config, scores, mode, stop_at, sender)
    )
    child.start()
    sender.close()
    ended = "killed"
    try:
        deadline = time.monotonic() + DEADLINE_S
        message = b""
        while True:
            assert receiver.poll(max(0.0, deadline - time.monotonic())), "child went silent"
            message = receiver.recv_bytes()
            if message == b"started" and kill[0] == "delay":
                time.sleep(kill[1] / 1e6)  # the drawn kill time, not a wait for a condition
                break
            if message == b"stopped" or message.startswith(b"done"):
                break
        if message.startswith(b"done"):
            ended = "finished"
    except EOFError:
        ended = "exited"  # the child died on its own; the checks below still apply
    finally:
        if ended != "killed":
            child.join(DEADLINE_S)  # it is exiting by itself
        if child.is_alive():
            child.kill()  # SIGKILL; a child that exits meanwhile is no error
        child.join(DEADLINE_S)
        receiver.close()
    assert child.exitcode is not None, "child not reaped"
    if ended == "killed":
        assert child.exitcode in (-signal.SIGKILL, 0)  # 0: it finished before the kill
    else:
        assert child.exitcode == 0, f"child failed with exit code {child.exitcode}"
    return ended


# A step (two ranks' sources written, merged, committed, registered, one eviction) makes about
# 25 audited writes and takes about 3 ms here; kill points are drawn over the whole run.
WRITES_PER_STEP = 25
MICROSECONDS_PER_STEP = 3_000


@st.composite
def kills(draw, steps):
    if draw(st.booleans()):
        return ("write", draw(st.integers(1, WRITES_PER_STEP * steps)))
    return ("delay", draw(st.integers(0, MICROSECONDS_PER_STEP * steps)))


@settings(max_examples=EXAMPLES, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(
    mode=st.sampled_from(["copy", "move"]),
    num_to_keep=st.integers(1, 2),
    scores=st.lists(st.integers(0, 3), min_size=1, max_size=5),
    data=st.data(),
)
def test_every_visible_checkpoint_is_whole_after_sigkill(context, mode, num_to_keep, scores,
                                                          data):
    kill = data.draw(kills(len(scores)), label="kill")
    config = kill_child.Config(num_to_keep=num_to_keep, checkpoint_score_attribute="score")
    with scratch_root() as tmp:
        root, scratch = os.path.join(tmp, "store"), os.path.join(tmp, "scratch")
        os.makedirs(scratch)
        run_child(context, root, scratch, config, scores, mode, kill)

        run = os.path.join(root, "run")
        if not os.path.isdir(run):
            return  # killed before the run folder existed
        import pyarrow.fs as pafs

        snap = read_snapshot(pafs.LocalFileSystem(), run)  # must parse: written atomically
        for entry in snap.checkpoint_results if snap else []:
            assert_whole(os.path.join(run, entry.checkpoint_dir_name),
                         entry.checkpoint_dir_name, "snapshot-listed")

        for name in os.listdir(run):
            if name.startswith("ckpt_"):
                assert_whole(os.path.join(run, name), name, "visible")
            else:
                assert name.startswith(".tmp-") or name in (
                    ".validate_storage_marker", "checkpoint_manager_snapshot.json",
                ), name

        manager = CheckpointManager(StorageContext(root, "run"), config)  # restore must work
        records = manager.checkpoint_results
        for record in records + manager.best_checkpoint_results:
            assert_whole(record.fs_path, record.dir_name, "restored")
        assert len(records) <= num_to_keep + 1
        if records:
            latest = kill_child.step_of(manager.latest_checkpoint_result.dir_name)
            assert latest == max(kill_child.step_of(r.dir_name) for r in records)
        assert not [n for n in os.listdir(run) if n.startswith(".tmp-")]
