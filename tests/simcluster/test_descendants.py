"""What a worker starts ends with it: with the worker (a failed attempt), with its node, with
the cluster, and with a SIGKILLed driver. Children of every kind: `subprocess.Popen`,
`multiprocessing.Process`, and a double-forked daemon in a session of its own."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from simcluster_children import KINDS, spawn_and_fail, spawn_and_stay
from simcluster_waits import gone, wait_until

from simcluster import NodeSpec, procfs

pytestmark = pytest.mark.slow
HERE = Path(__file__).parent


def alive(pids: dict[str, int]) -> dict[str, int]:
    return {kind: pid for kind, pid in pids.items() if not gone(pid)}


@pytest.fixture
def leftovers():
    """`leftovers(pids)` notes processes that a failing test must not leave running."""
    noted: dict[int, str | None] = {}

    def note(pids: dict[str, int]) -> dict[str, int]:
        noted.update({pid: procfs.start_time(pid) for pid in pids.values()})
        return pids

    yield note
    for pid, start in noted.items():
        if start is not None and procfs.start_time(pid) == start:
            os.kill(pid, signal.SIGKILL)


def test_children_of_a_failed_worker_end_with_it_and_a_peers_stay(make_cluster, leftovers):
    c = make_cluster(NodeSpec(cpus=2))
    staying = c.start_worker("node-0", spawn_and_stay, name="staying")
    failing = c.start_worker("node-0", spawn_and_fail, name="failing")
    kept = leftovers(staying.channel().recv(30))
    doomed = leftovers(failing.channel().recv(30))
    assert set(kept) == set(doomed) == set(KINDS)
    assert alive(kept) == kept and alive(doomed) == doomed
    c.send(failing.id, "go")
    assert isinstance(failing.wait(10).error, RuntimeError)
    # Nothing to wait for: the node kills a worker's leftovers before it reports the exit.
    assert alive(doomed) == {}, f"children of the failed worker still alive: {alive(doomed)}"
    assert alive(kept) == kept, f"a peer's children died with the failed worker: {kept}"
    staying.kill()
    assert staying.wait(10).signal == signal.SIGKILL
    assert alive(kept) == {}, f"children of the killed worker still alive: {alive(kept)}"


@pytest.mark.parametrize("how", ["close", "kill_node", "remove_node"])
def test_the_cluster_and_its_nodes_take_every_descendant_with_them(make_cluster, leftovers,
                                                                   how):
    c = make_cluster(NodeSpec(cpus=2), NodeSpec(cpus=2))
    handles = [c.start_worker(n.id, spawn_and_stay) for n in c.nodes]
    pids = leftovers({f"{h.node_id}.{kind}": pid for h in handles
                      for kind, pid in h.channel().recv(30).items()})
    c.pause_node("node-1")  # a frozen node's descendants too
    if how == "close":
        c.close()
    elif how == "kill_node":
        c.kill_node("node-1")
        pids = {k: v for k, v in pids.items() if k.startswith("node-1.")}
    else:
        c.remove_node("node-0", graceful=True, grace_s=0.5)
        pids = {k: v for k, v in pids.items() if k.startswith("node-0.")}
    wait_until(lambda: not alive(pids), timeout=5,
               what=f"every descendant gone after {how}() (alive: {alive(pids)})")


DRIVER = textwrap.dedent("""
    import json, time
    from simcluster import Cluster, NodeSpec
    from simcluster_children import spawn_and_stay
    cluster = Cluster(nodes=[NodeSpec(cpus=2), NodeSpec(cpus=2)], history_path=HISTORY)
    ws = [cluster.start_worker(n.id, spawn_and_stay) for n in cluster.nodes for _ in range(2)]
    children = [pid for w in ws for pid in w.channel().recv(30).values()]
    cluster.pause_node(cluster.nodes[1])
    print(json.dumps({"children": children, "workers": [w.pid for w in ws],
                      "nodes": [n.pid for n in cluster.nodes],
                      "factory": cluster._driver.factory._proc.pid}), flush=True)
    time.sleep(300)
""")


def test_driver_sigkill_kills_every_descendant(tmp_path, leftovers):
    script = DRIVER.replace("HISTORY", repr(str(tmp_path / "history.jsonl")))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), os.getcwd()])}
    driver = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                              env=env)
    try:
        line = driver.stdout.readline()
        assert line, "the driver did not start its cluster"
        everyone = leftovers({f"{what}.{i}": pid for what, found in json.loads(line).items()
                              for i, pid in enumerate(found if isinstance(found, list)
                                                      else [found])})
        assert alive(everyone) == everyone
        driver.send_signal(signal.SIGKILL)
        driver.wait(10)
        wait_until(lambda: not alive(everyone), timeout=5,
                   what=f"every process of the run gone (alive: {alive(everyone)})")
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
        driver.stdout.close()
