"""What a cluster leaves behind: nothing in the temp directory; its history in the user's
state folder, which stays within its limits (a SIGKILLed driver's key: test_key_files)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import textwrap
import time

import pytest

from simcluster import Cluster, History, NodeSpec

slow = pytest.mark.slow


@pytest.fixture
def places(tmp_path, tmp_path_factory, monkeypatch):
    """A temp directory and a state folder of this test's own."""
    tmp_path_factory.getbasetemp()  # pytest's own temp root stays where it was
    tmp, state = tmp_path / "tmp", tmp_path / "state"
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    monkeypatch.setenv("SIMCLUSTER_STATE_DIR", str(state))
    return tmp, state


def temp_contents(tmp) -> dict[str, list[str]]:
    return {name: sorted(os.listdir(tmp / name)) if (tmp / name).is_dir() else []
            for name in sorted(os.listdir(tmp))}


@slow
def test_a_closed_cluster_leaves_nothing_in_the_temp_dir(places):
    tmp, state = places
    with Cluster(nodes=[NodeSpec(cpus=1)]) as cluster:
        assert cluster.start_worker("node-0", os.getpid).wait(10).ok
        path = cluster.history.path
    # The key folder stays (empty): holding its name keeps other users from taking it.
    assert temp_contents(tmp) == {f"simcluster-{os.getuid()}": []}
    assert path.parent == state / "history"
    assert History.read(path)[-1]["event"] == "cluster_stop"


def fill(folder, count: int, size: int = 10, age_s: float = 3600.0) -> list[str]:
    """`count` histories of dead writers, the first the oldest, all at least `age_s` old."""
    folder.mkdir(parents=True, exist_ok=True)
    names = []
    for i in range(count):
        name = f"20240101-0000{i % 60:02d}-{4_000_000 + i}-{i + 1}.jsonl"
        (folder / name).write_bytes(b"x" * size)
        when = time.time() - age_s - (count - i)
        os.utime(folder / name, (when, when))
        names.append(name)
    return names


def test_limits_remove_the_oldest_first_and_spare_live_writers(tmp_path):
    from simcluster._state import prune

    folder = tmp_path / "history"
    names = fill(folder, 6, size=100)
    live = f"20240101-000000-{os.getpid()}-{_start()}.jsonl"
    (folder / live).write_bytes(b"x" * 100)
    os.utime(folder / live, (0, 0))  # the oldest of all, but its writer runs
    (folder / "notes.txt").write_text("not ours")
    removed = prune(folder, max_files=5, max_bytes=10**6, max_age_s=10**9)
    assert [p.name for p in removed] == names[:3]  # 7 files -> 4, room for one more
    removed = prune(folder, max_files=100, max_bytes=250, max_age_s=10**9)
    assert [p.name for p in removed] == names[3:5]  # 400 bytes -> at most 250
    removed = prune(folder, max_files=100, max_bytes=10**6, max_age_s=60)
    assert [p.name for p in removed] == names[5:]  # older than a minute
    assert sorted(os.listdir(folder)) == sorted([live, "notes.txt"])


def _start() -> str:
    from simcluster import procfs

    return procfs.start_time(os.getpid())


@slow
def test_a_new_cluster_keeps_the_state_folder_within_its_limits(places):
    from simcluster._state import MAX_FILES

    _, state = places
    names = fill(state / "history", MAX_FILES + 5)
    with Cluster(nodes=[NodeSpec(cpus=1)]) as cluster:
        kept = sorted(os.listdir(state / "history"))
    assert len(kept) == MAX_FILES
    assert cluster.history.path.name in kept
    assert set(names[:6]).isdisjoint(kept) and set(names[6:]) <= set(kept)


SCRIPT = textwrap.dedent("""
    import os, simcluster
    with simcluster.connect(os.environ["SIMCLUSTER_ADDRESS"]) as c:
        print("worker ok", c.start_worker("node-0", os.getpid).wait(10).ok, flush=True)
""")


@slow
def test_run_prints_where_the_history_is_and_litters_nothing(tmp_path):
    work, tmp, state = tmp_path / "work", tmp_path / "tmp", tmp_path / "state"
    work.mkdir()
    tmp.mkdir()
    (work / "job.py").write_text(SCRIPT)
    done = subprocess.run(
        [sys.executable, "-m", "simcluster", "run", "--quiet", "job.py"],
        capture_output=True, text=True, timeout=60, cwd=work,
        env={**os.environ, "PYTHONPATH": os.getcwd(), "TMPDIR": str(tmp),
             "SIMCLUSTER_STATE_DIR": str(state)})
    assert done.returncode == 0, done.stderr
    assert "worker ok True" in done.stdout
    histories = os.listdir(state / "history")
    assert len(histories) == 1, histories
    path = state / "history" / histories[0]
    assert f"history: {path}" in done.stderr.splitlines()[0]
    assert f"history: {path} (read it with `simcluster history {path}`)" in done.stderr
    assert os.listdir(work) == ["job.py"]
    assert temp_contents(tmp) == {f"simcluster-{os.getuid()}": []}


def test_a_state_folder_that_cannot_be_made_names_the_fix(tmp_path, monkeypatch):
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("SIMCLUSTER_STATE_DIR", str(tmp_path / "file" / "state"))
    with pytest.raises(OSError, match=r"cannot create the history folder .*history_path="):
        History()
