"""Nothing outlives the cluster: after close(), and after the driver is SIGKILLed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest
from simcluster_waits import gone, wait_until

from simcluster import NodeSpec

pytestmark = pytest.mark.slow


def test_close_leaves_no_process(make_cluster):
    c = make_cluster(NodeSpec(cpus=2), NodeSpec(cpus=2))
    import time

    workers = [c.start_worker(n.id, time.sleep, (60,)) for n in c.nodes for _ in range(2)]
    c.pause_node(c.nodes[1])  # a frozen node must die too
    pids = [n.pid for n in c.nodes] + [w.pid for w in workers]
    c.close()
    c.close()  # idempotent
    assert all(gone(p) for p in pids)
    assert all(w.exit.reason == "shutdown" for w in workers)


DRIVER = textwrap.dedent("""
    import json, sys, time
    from simcluster import Cluster, NodeSpec
    cluster = Cluster(nodes=[NodeSpec(cpus=2), NodeSpec(cpus=2)])
    ws = [cluster.start_worker(n.id, time.sleep, (300,)) for n in cluster.nodes for _ in range(2)]
    cluster.pause_node(cluster.nodes[1])
    print(json.dumps({"nodes": [n.pid for n in cluster.nodes], "workers": [w.pid for w in ws],
                      "factory": cluster._driver.factory._proc.pid}), flush=True)
    time.sleep(300)
""")


def test_driver_sigkill_leaves_no_process():
    driver = subprocess.Popen([sys.executable, "-c", DRIVER], stdout=subprocess.PIPE, text=True,
                              cwd=os.getcwd())
    try:
        line = driver.stdout.readline()
        assert line, "the driver did not start its cluster"
        pids = json.loads(line)
        everyone = pids["nodes"] + pids["workers"] + [pids["factory"]]
        assert not any(gone(p) for p in everyone)
        driver.send_signal(signal.SIGKILL)
        driver.wait(10)
        wait_until(lambda: all(gone(p) for p in everyone), timeout=10,
                   what=f"factory, supervisors and workers {pids} gone")
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
        driver.stdout.close()
