"""`simcluster.connect`: a cluster used from another process (or from a worker)."""

from __future__ import annotations

import os
import time

import pytest
from simcluster_waits import wait_until

import simcluster
from simcluster import AuthenticationError, NodeSpec, worker

pytestmark = pytest.mark.slow


def echo():
    ch = worker.channel()
    while (msg := ch.recv()) is not None:
        ch.send(msg)
    return "bye"


def test_client_lists_places_starts_and_talks(make_cluster):
    c = make_cluster(NodeSpec(cpus=2), NodeSpec(cpus=2, gpus=1))
    with simcluster.connect(c.address) as client:
        assert [n.id for n in client.nodes] == [n.id for n in c.nodes]
        assert client.total_resources() == c.total_resources()
        p = client.place([{"CPU": 1}] * 2, strategy="STRICT_SPREAD")
        assert sorted(p.node_ids) == ["node-0", "node-1"]
        assert c.available_resources()["CPU"] == 2.0
        exits = []
        client.on_worker_exit(exits.append)
        w = client.start_worker(None, echo, bundle=p[1])
        ch = client.channel(w.id)
        ch.send({"x": 1})
        assert ch.recv(timeout=10) == {"x": 1}
        ch.send(None)
        exit = w.wait(10)
        assert exit.ok and exit.result == "bye" and exits == [exit]
        boom = client.start_worker("node-0", lambda: 1 / 0).wait(10)
        assert isinstance(boom.error, ZeroDivisionError)
        p.release()  # no reply awaited, but applied before the client's next call
        assert client.available_resources()["CPU"] == 4.0
        added = client.add_node(NodeSpec(cpus=1))
        client.kill_node(added.id)
        assert c.node(added.id).state == "down"
        assert any(e["event"] == "node_down" for e in client.history.events())


def test_disconnecting_client_loses_its_workers_and_placements(make_cluster):
    c = make_cluster(NodeSpec(cpus=2))
    client = simcluster.connect(c.address)
    client.place([{"CPU": 2}])
    w = client.start_worker("node-0", time.sleep, (60,))
    client.close()
    wait_until(lambda: c.available_resources() == {"CPU": 2.0}, what="placement released")
    wait_until(lambda: any(e["event"] == "worker_exit" and e["worker"] == w.id
                           for e in c.history.events()), what="worker killed")
    assert w.exit.reason == "disconnected"


def test_connect_needs_the_secret(make_cluster):
    c = make_cluster(NodeSpec(cpus=1))
    with pytest.raises(AuthenticationError):
        simcluster.connect(c.address, secret=b"guess")
    with pytest.raises(ConnectionError, match="no simcluster is running"):
        simcluster.connect("127.0.0.1:1")


def test_a_worker_can_connect_back(make_cluster):
    c = make_cluster(NodeSpec(cpus=1), NodeSpec(cpus=3))

    def inspect_cluster():
        with simcluster.connect(os.environ["SIMCLUSTER_ADDRESS"]) as client:
            return [n.spec.cpus for n in client.nodes]

    assert c.start_worker("node-0", inspect_cluster).wait(20).result == [1, 3]
