"""An owner in another PID namespace is never judged dead (`simcluster._owner`).

A live driver inside `unshare --pid` (what a `--network host` container is) shares this
machine's temp dir and home, but its pid is another namespace's: pid 1 there is init here.
Judged by pid and start time alone it looked dead, and a cluster here deleted its key. The
child below is that driver: in a new PID namespace with its own /proc, it writes a cluster
key and a history the way a cluster does, prints its owner record, and stays alive."""

from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from simcluster import procfs
from simcluster._keys import key_path, write_key
from simcluster._state import prune
from simcluster.providers.netns import owner_alive

CHILD = textwrap.dedent("""
    import json, os, sys
    from simcluster import History, procfs
    from simcluster._keys import write_key
    key = write_key("127.0.0.1:41777", b"\\x07" * 32)
    history = History()
    history.record("cluster_start")
    print(json.dumps({"pid": os.getpid(), "start": procfs.start_time(os.getpid()),
                      "pidns": str(os.stat("/proc/self/ns/pid").st_ino),
                      "key": str(key), "history": str(history.path)}), flush=True)
    sys.stdin.read()  # alive until the test closes stdin
""")


def _unshare_reason() -> str | None:
    if os.geteuid() != 0:
        return "a new PID namespace needs root"
    if shutil.which("unshare") is None:
        return "unshare (util-linux) is not installed"
    return None


pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(_unshare_reason() is not None, reason=str(_unshare_reason()))]


@pytest.fixture(scope="module")
def namespaced(tmp_path_factory):
    """(the child's record, its temp dir); the child lives until the module's tests end."""
    tmp = tmp_path_factory.mktemp("pidns-tmp")
    env = {**os.environ, "TMPDIR": str(tmp), "SIMCLUSTER_STATE_DIR": str(tmp / "state")}
    child = subprocess.Popen(
        ["unshare", "--pid", "--fork", "--mount-proc", "--kill-child", sys.executable, "-c", CHILD],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
    try:
        ready, _, _ = select.select([child.stdout], [], [], 20)
        line = child.stdout.readline() if ready else ""
        if not line:
            child.kill()
            pytest.skip(f"no driver started under unshare --pid: {child.communicate(timeout=10)[1]}")
        record = json.loads(line)
        assert record["pidns"] != str(os.stat("/proc/self/ns/pid").st_ino)
        yield record, tmp
    finally:
        if child.poll() is None:
            child.stdin.close()
            try:
                child.wait(10)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
        for stream in (child.stdout, child.stderr):
            stream.close()


@pytest.fixture
def same_tmp(namespaced, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(namespaced[1]))
    return namespaced


def test_a_cluster_here_keeps_the_namespaced_clusters_key(same_tmp):
    record, _ = same_tmp
    assert procfs.start_time(record["pid"]) != record["start"]  # what made it look dead
    theirs = Path(record["key"])
    assert theirs.exists()
    ours = write_key("127.0.0.1:41778", b"\x08" * 32)  # removes the keys of dead owners
    try:
        assert theirs.exists(), (f"a cluster here deleted the key of a live cluster in PID "
                                 f"namespace {record['pidns']} (its pid {record['pid']})")
        # An owner line without a namespace (an older key) is judged as before.
        dead = subprocess.Popen([sys.executable, "-c", "pass"])
        start = procfs.start_time(dead.pid)
        dead.wait()
        old = key_path("127.0.0.1:41779")
        old.write_text(f"{'09' * 32}\n{dead.pid} {start}\n")
        old.chmod(0o600)
        write_key("127.0.0.1:41780", b"\x0a" * 32).unlink()
        assert not old.exists() and theirs.exists()
    finally:
        ours.unlink()


def test_pruning_here_keeps_the_namespaced_writers_history(same_tmp):
    record, _ = same_tmp
    history = Path(record["history"])
    removed = prune(history.parent, max_files=1)  # room for one: every other one is due
    assert history.exists() and history not in removed


def test_a_netns_cleanup_here_leaves_the_namespaced_owner_alone(namespaced):
    record, _ = namespaced
    state = {"pid": record["pid"], "start": record["start"], "pidns": record["pidns"]}
    assert owner_alive(state)
    assert not owner_alive({"pid": record["pid"], "start": record["start"]})  # older files


def test_docker_reaping_here_keeps_the_namespaced_owners_network(namespaced):
    from simcluster.providers.docker import LABEL, client_or_reason, reap_stale

    client, why = client_or_reason()
    if client is None:
        pytest.skip(f"docker provider unavailable: {why}")
    import docker.errors

    record, _ = namespaced
    owner = f"{record['pid']}:{record['start']}:{record['pidns']}"
    network = client.networks.create(f"sc-pidns-{os.getpid()}", driver="bridge",
                                     labels={LABEL: owner})
    try:
        reap_stale(client)
        try:
            network.reload()
        except docker.errors.NotFound:
            pytest.fail(f"reap_stale removed the network of a live owner {owner} "
                        "in another PID namespace")
    finally:
        try:
            network.remove()
        except docker.errors.NotFound:
            pass
        client.close()
