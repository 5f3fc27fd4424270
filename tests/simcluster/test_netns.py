"""The netns provider: a namespace and address per node, reachability, partitions, cleanup
(after close and after the driver is SIGKILLed)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap

import pytest
from simcluster_waits import gone, wait_until

from simcluster import FaultPlan, NodeSpec, Trigger, action, worker
from simcluster.providers.netns import reap_stale, state_dir, unavailable

WHY = unavailable()
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(WHY is not None, reason=f"netns provider unavailable: {WHY}")]


def namespaces() -> set[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return {line.split()[0] for line in out.splitlines() if line.strip()}


def links() -> str:
    return subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout


def serve(port: int, seconds: float):
    import socket
    import time

    sock = socket.socket()
    sock.bind((worker.current().node_address, port))
    sock.listen()
    sock.settimeout(0.2)
    worker.channel().send("listening")
    served, deadline = 0, time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            conn, _ = sock.accept()
        except TimeoutError:
            continue
        conn.sendall(b"hello")
        conn.close()
        served += 1
    return served


def reach(address: str, port: int):
    import socket

    try:
        with socket.create_connection((address, port), timeout=0.5) as conn:
            return conn.recv(5).decode()
    except OSError as exc:
        return type(exc).__name__


def test_nodes_have_addresses_reach_each_other_and_partition(make_cluster):
    c = make_cluster(NodeSpec(cpus=2), NodeSpec(cpus=2), provider="netns")
    a, b = c.nodes
    assert a.address != b.address and a.address.startswith("10.213.")
    assert c.address.startswith(a.address.rsplit(".", 1)[0] + ".1:")
    tag = c.provider.tag
    assert {f"sc-{tag}-0", f"sc-{tag}-1"} <= namespaces()
    server = c.start_worker(b.id, serve, (7000, 8.0))
    assert server.channel().recv(10) == "listening"
    assert c.start_worker(a.id, reach, (b.address, 7000)).wait(10).result == "hello"
    run = c.run_plan(FaultPlan([(Trigger.after(0), action("partition", nodes=[b.id]))]))
    assert run.wait(5)
    cut = c.start_worker(a.id, reach, (b.address, 7000)).wait(10).result
    assert cut in ("TimeoutError", "OSError", "ConnectionRefusedError") and cut != "hello"
    assert c.run_plan(FaultPlan([(Trigger.after(0), action("heal"))])).wait(5)
    assert c.start_worker(a.id, reach, (b.address, 7000)).wait(10).result == "hello"
    c.close()
    assert not any(n.startswith(f"sc-{tag}-") for n in namespaces())
    assert f"scb{tag}" not in links() and f"sch{tag}" not in links()


DRIVER = textwrap.dedent("""
    import json, time
    from simcluster import Cluster, NodeSpec
    c = Cluster(nodes=[NodeSpec(), NodeSpec()], provider="netns")
    w = c.start_worker("node-1", time.sleep, (300,))
    print(json.dumps({"tag": c.provider.tag, "reaper": c.provider._reaper.pid,
                      "pids": [n.pid for n in c.nodes] + [w.pid]}), flush=True)
    time.sleep(300)
""")


def test_driver_sigkill_leaves_no_namespace_or_process():
    driver = subprocess.Popen([sys.executable, "-c", DRIVER], stdout=subprocess.PIPE, text=True)
    try:
        line = driver.stdout.readline()
        assert line, "the driver did not start its cluster"
        info = json.loads(line)
        tag = info["tag"]
        assert any(n.startswith(f"sc-{tag}-") for n in namespaces())
        driver.send_signal(signal.SIGKILL)
        driver.wait(10)
        wait_until(lambda: all(gone(p) for p in info["pids"] + [info["reaper"]]), 10,
                   "nodes, workers and the reaper gone")
        wait_until(lambda: not any(n.startswith(f"sc-{tag}-") for n in namespaces()), 10,
                   f"namespaces sc-{tag}-* removed")
        assert f"scb{tag}" not in links()
        assert not (state_dir() / f"netns-{tag}.json").exists()
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
        driver.stdout.close()


def test_the_next_cluster_removes_what_a_dead_owner_left():
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True).stdout.strip()
    tag = f"zz{dead}"
    ns = f"sc-{tag}-0"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    path = state_dir() / f"netns-{tag}.json"
    path.write_text(json.dumps({"pid": int(dead), "start": "0", "tag": tag, "links": [],
                                "namespaces": [ns]}))
    try:
        reap_stale()  # (a cluster starting in another test process may get there first)
        assert ns not in namespaces() and not path.exists()
    finally:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        path.unlink(missing_ok=True)
