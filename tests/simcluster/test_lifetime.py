"""Nothing of a run outlives it: a `simcluster run` script (and all it started) dies with
`simcluster run`, even SIGKILLed; a client that loses its cluster reports each worker as it
was started; a rank hopping pids (fork, setsid, exit, in a loop) ends with its node and
with the cluster, in bounded time, leaving no zombies to its node, and no cgroup."""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from simcluster_children import spawn_and_fail, spawn_and_stay
from simcluster_hopper import (
    find,
    held_zombies,
    hop_and_wait_children,
    hop_beside,
    new_mark,
    running,
)
from simcluster_waits import gone, wait_until

import simcluster
from simcluster import NodeSpec, _cgroup, procfs

pytestmark = pytest.mark.slow
HERE = Path(__file__).parent
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([os.getcwd(), str(HERE)])}


@pytest.fixture
def leftovers():
    """`leftovers(pids)` notes processes that a failing test must not leave running."""
    noted: dict[int, str | None] = {}

    def note(pids):
        noted.update({pid: procfs.start_time(pid) for pid in pids})
        return pids

    yield note
    for pid, start in noted.items():
        if start is not None and procfs.start_time(pid) == start:
            os.kill(pid, signal.SIGKILL)


def _first_line(proc: subprocess.Popen, timeout: float = 30.0) -> str:
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    assert ready, f"no line from {proc.args} within {timeout} s"
    line = proc.stdout.readline()
    assert line, f"{proc.args} ended without a line"
    return line


# -- simcluster run ----------------------------------------------------------------------------

SCRIPT = textwrap.dedent("""
    import json, os, sys, time
    from simcluster_children import start_children
    print(json.dumps({"script": os.getpid(), **start_children()}), flush=True)
    if sys.argv[1:] == ["exit"]:
        os._exit(0)
    time.sleep(300)
""")


def _run_cli(tmp_path, *script_args) -> subprocess.Popen:
    (tmp_path / "job.py").write_text(SCRIPT)
    return subprocess.Popen(
        [sys.executable, "-m", "simcluster", "run", "--quiet", "--history",
         str(tmp_path / "h.jsonl"), str(tmp_path / "job.py"), *script_args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path, env=ENV)


def test_a_sigkilled_run_takes_its_script_and_all_it_started(tmp_path, leftovers):
    cli = _run_cli(tmp_path)
    try:
        pids = json.loads(_first_line(cli))
        leftovers(pids.values())
        assert not any(gone(p) for p in pids.values())
        cli.send_signal(signal.SIGKILL)
        cli.wait(10)
        wait_until(lambda: all(gone(p) for p in pids.values()), timeout=5,
                   what=f"the script and its children {pids} gone after SIGKILL of the run")
    finally:
        if cli.poll() is None:
            cli.kill()
        cli.communicate(timeout=10)


def test_a_run_ends_what_its_script_left_behind(tmp_path, leftovers):
    cli = _run_cli(tmp_path, "exit")
    out, err = cli.communicate(timeout=60)
    assert cli.returncode == 0, err
    pids = leftovers(json.loads(out.splitlines()[0]))
    assert all(gone(p) for p in pids.values()), \
        f"alive after the run: {[k for k, p in pids.items() if not gone(p)]}"
    assert "the script exited with 0" in err


# -- a client whose cluster is gone ----------------------------------------------------------

DRIVER = textwrap.dedent("""
    import sys, time
    from simcluster import Cluster, NodeSpec
    cluster = Cluster(nodes=[NodeSpec(cpus=2)])
    print(cluster.address, flush=True)
    if sys.argv[1:]:
        from simcluster_hopper import hop_beside
        w = cluster.start_worker(cluster.nodes[0].id, hop_beside, (sys.argv[1],))
        print(w.channel().recv(30), flush=True)
    time.sleep(300)
""")


def _driver(*args) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", DRIVER, *args], stdout=subprocess.PIPE,
                            text=True, env=ENV)


def test_a_lost_connection_reports_each_worker_as_it_was_started():
    driver = _driver()
    try:
        client = simcluster.connect(_first_line(driver).strip())
        handle = client.start_worker("node-0", time.sleep, (60,), name="g1:rank0")
        driver.send_signal(signal.SIGKILL)
        exit = handle.wait(10)
        assert (exit.reason, exit.worker_id, exit.name, exit.node_id, exit.pid) == \
            ("disconnected", handle.id, "g1:rank0", handle.node_id, handle.pid)
        client.close()
    finally:
        driver.kill()
        driver.wait(10)
        driver.stdout.close()


# -- a rank that hops pids ---------------------------------------------------------------------

#: zombies a hopper leaves below its live worker where that worker is a subreaper (no
#: cgroups) before the test stops it: each one is an entry more for every /proc walk, which
#: is what let a hopper outrun the walks
PILE = 1000
#: hops seen before a test stops a hopper (in a cgroup its zombies are reaped as they die)
HOPS = 50


def _hopped(mark: str) -> None:
    seen: set[int] = set()

    def hopped() -> bool:
        seen.update(find(mark))
        return len(seen) >= HOPS

    wait_until(hopped, timeout=10, what=f"hopper {mark} hopping {HOPS} times")


def _start_hopper(cluster) -> str:
    mark = new_mark()
    worker = cluster.start_worker(cluster.nodes[0].id, hop_beside, (mark,))
    assert worker.channel().recv(10) == "hopping"
    _hopped(mark)
    return mark


def _cgroups_of(cluster) -> list[str]:
    """The node cgroups of the cluster's nodes (none where cgroups cannot be used)."""
    return [path for node in cluster.nodes if (path := _cgroup.node_cgroup_of(node.pid))]


def test_cluster_close_ends_a_hopping_rank(make_cluster):
    cluster = make_cluster(NodeSpec(cpus=2))
    mark = _start_hopper(cluster)
    cgroups = _cgroups_of(cluster)
    started = time.monotonic()
    cluster.close()
    took = time.monotonic() - started
    assert running(mark) == set(), f"hopper {mark} outlived the cluster"
    assert took < 2, f"close took {took:.1f} s"
    assert [p for p in cgroups if os.path.exists(p)] == []


def test_kill_node_ends_a_hopping_rank(make_cluster):
    cluster = make_cluster(NodeSpec(cpus=2), NodeSpec(cpus=2))
    mark = _start_hopper(cluster)
    node = cluster.nodes[0]
    cgroups = _cgroups_of(cluster)
    started = time.monotonic()
    cluster.kill_node(node, timeout_s=5)
    assert time.monotonic() - started < 2
    assert running(mark) == set(), f"hopper {mark} outlived its node"
    assert [p for p in cgroups if os.path.exists(p)] == cgroups[1:]  # the other node's stays


def test_a_sigkilled_driver_takes_a_hopping_rank():
    mark = new_mark()
    driver = _driver(mark)
    try:
        _first_line(driver)
        assert _first_line(driver).strip() == "hopping"
        _hopped(mark)
        driver.send_signal(signal.SIGKILL)
        driver.wait(10)
        # the factory's supervisors leave on their parent-death signal, killing their trees
        wait_until(lambda: not running(mark, 0.1), timeout=5,
                   what=f"hopper {mark} gone after SIGKILL of its driver")
    finally:
        driver.kill()
        driver.wait(10)
        driver.stdout.close()


def _cgroups_usable() -> bool:
    base = _cgroup.cgroup_of("self")
    probe = os.path.join(base, f"probe-{os.getpid()}") if base else None
    try:
        os.mkdir(probe)
    except (OSError, TypeError):
        return False
    usable = os.path.exists(os.path.join(probe, "cgroup.kill"))
    os.rmdir(probe)
    return usable


def test_a_node_killed_by_someone_else_leaves_nothing_once_the_cluster_closes(make_cluster):
    if not _cgroups_usable():
        pytest.skip("no writable cgroup v2 here: an orphan of init cannot be followed")
    cluster = make_cluster(NodeSpec(cpus=2))
    mark = _start_hopper(cluster)
    cgroups = _cgroups_of(cluster)
    assert cgroups, "the node has no cgroup where cgroups can be used"
    os.kill(cluster.nodes[0].pid, signal.SIGKILL)  # no supervisor left to clean up
    wait_until(lambda: cluster.nodes[0].state == "down", timeout=5, what="node down")
    cluster.close()
    assert running(mark) == set(), f"hopper {mark} outlived the cluster"
    assert [p for p in cgroups if os.path.exists(p)] == []


#: zombies a live hopping rank may leave on the machine at any one time: its hops' parents
#: are reaped as they die (a few stay while the reaper catches up with a batch of them)
FEW = 20


def test_a_live_hopping_rank_leaves_no_zombie_pile_and_its_children_keep_their_status(
        make_cluster):
    if not _cgroups_usable():
        pytest.skip("no writable cgroup v2 here: a live worker stays a subreaper and holds "
                    "its orphans' zombies until it exits (the documented fallback limit)")
    cluster = make_cluster(NodeSpec(cpus=2))
    node, mark = cluster.nodes[0], new_mark()
    worker = cluster.start_worker(node.id, hop_and_wait_children, (mark, 1.2, 3 * FEW + 1))
    assert worker.channel().recv(10) == "hopping"
    holders, most, deadline = {worker.pid, node.pid}, 0, time.monotonic() + 20
    while worker.exit is None and time.monotonic() < deadline:
        most = max(most, sum(ppid in holders for ppid in held_zombies(mark).values()))
    seen = worker.wait(20)
    assert seen.ok, seen.traceback
    got = seen.result
    assert got["hops"] > 3 * FEW, f"the hopper hardly hopped: {got['hops']} hops"
    assert most <= FEW, (f"{most} zombies held by the worker or its node at once "
                         f"({got['hops']} hops in 1.2 s), expected at most {FEW}")
    assert got["popen"] and set(got["popen"]) == {7}, got["popen"]
    assert got["multiprocessing"] == 3


def test_where_a_worker_gets_no_cgroup_its_leftovers_die_and_a_contained_peers_daemon_stays(
        make_cluster, leftovers):
    if not _cgroups_usable():
        pytest.skip("no writable cgroup v2 here")
    cluster = make_cluster(NodeSpec(cpus=2))
    node = cluster.nodes[0]
    staying = cluster.start_worker(node.id, spawn_and_stay, name="staying")
    kept = staying.channel().recv(30)
    leftovers(kept.values())
    # In its cgroup, the staying worker is no subreaper: its daemon's parent is the node.
    assert procfs.parent(kept["setsid_daemon"]) == node.pid
    path = _cgroup.node_cgroup_of(node.pid)
    with open(os.path.join(path, "cgroup.max.descendants"), "w") as f:
        f.write("1")  # the staying worker's cgroup is the one: the next worker gets none
    failing = cluster.start_worker(node.id, spawn_and_fail, name="failing")
    doomed = failing.channel().recv(30)
    leftovers(doomed.values())
    assert not _cgroup.cgroup_of(failing.pid).startswith(path + os.sep)
    cluster.send(failing.id, "go")
    assert isinstance(failing.wait(10).error, RuntimeError)
    assert [k for k, p in doomed.items() if not gone(p)] == [], "the failed worker's leftovers"
    assert [k for k, p in kept.items() if gone(p)] == [], "the staying worker's children"


FALLBACK = textwrap.dedent("""
    import json, sys, time
    from simcluster import Cluster, NodeSpec, _cgroup
    from simcluster_hopper import find, held_zombies, hop_and_wait_children, hop_beside, new_mark, running
    cluster = Cluster(nodes=[NodeSpec(cpus=2)])
    assert _cgroup.node_cgroup_of(cluster.nodes[0].pid) is None, "cgroups still usable"
    mark = new_mark()
    w = cluster.start_worker(cluster.nodes[0].id, hop_beside, (mark,))
    assert w.channel().recv(10) == "hopping"
    while len(find(mark)) < int(sys.argv[1]):
        time.sleep(0.01)
    started = time.monotonic()
    cluster.close()
    print(json.dumps({"close_s": time.monotonic() - started, "left": sorted(running(mark))}))
""")


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"),
                    reason="needs root and unshare(1) to make the cgroup tree read-only")
def test_without_cgroups_the_walk_still_ends_a_hopping_rank():
    mount = _cgroup._cgroup2_mount()
    if mount is None:
        pytest.skip("no cgroup v2 here: every other test already runs the walk")
    # A mount namespace of its own, where the cgroup tree is read-only (as in a container).
    done = subprocess.run(
        ["unshare", "--mount", "sh", "-c",
         f"mount -o remount,bind,ro {mount} && exec {sys.executable} -c \"$0\" {PILE}",
         FALLBACK],
        capture_output=True, text=True, timeout=60, env=ENV)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["left"] == [], f"the hopper outlived the cluster: {seen}"
    assert seen["close_s"] < 2, seen
