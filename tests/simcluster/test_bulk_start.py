"""Many workers in one call: `start_workers` (one command per node) and `send_many`."""

from __future__ import annotations

import contextlib

import pytest

import simcluster
from simcluster import NodeDownError, worker

pytestmark = pytest.mark.slow


def whoami(tag):
    return tag, worker.current().node_id, worker.current().name


def echo_once():
    ch = worker.channel()
    ch.send(("got", ch.recv(timeout=10)))


@contextlib.contextmanager
def endpoint_of(cluster, through_client: bool):
    if not through_client:
        yield cluster
        return
    with simcluster.connect(cluster.address) as client:
        yield client


def starts_on(cluster, per_node: int, prefix: str) -> list[dict]:
    return [{"node_id": node.id, "args": (f"{node.id}/{k}",), "name": f"{prefix}-{node.id}-{k}",
             "tags": {"k": k}} for node in cluster.nodes for k in range(per_node)]


def started_names(cluster, prefix: str) -> list[str]:
    return [e["name"] for e in cluster.history.events("worker_start")
            if e["name"].startswith(prefix)]


@pytest.mark.parametrize("through_client", [False, True])
def test_start_workers_runs_each_call_on_its_node_in_request_order(shared_cluster,
                                                                   through_client):
    prefix = f"order-{through_client}"
    starts = starts_on(shared_cluster, 2, prefix)
    with endpoint_of(shared_cluster, through_client) as endpoint:
        handles = endpoint.start_workers(whoami, starts, timeout_s=30)
        exits = [h.wait(20) for h in handles]
    assert [e.result for e in exits] == [(s["args"][0], s["node_id"], s["name"]) for s in starts]
    assert [h.node_id for h in handles] == [s["node_id"] for s in starts]
    assert sorted(started_names(shared_cluster, prefix)) == sorted(s["name"] for s in starts)


def test_start_workers_is_all_or_nothing(shared_cluster):
    starts = starts_on(shared_cluster, 2, "none") + [{"node_id": "node-99", "args": ("x",)}]
    with pytest.raises(NodeDownError, match="node-99"):
        shared_cluster.start_workers(whoami, starts)
    assert started_names(shared_cluster, "none") == []
    with pytest.raises(TypeError, match=r"starts\[0\]"):
        shared_cluster.start_workers(whoami, [{"node": "node-0"}])


@pytest.mark.parametrize("through_client", [False, True])
def test_send_many_reaches_every_worker_once(shared_cluster, through_client):
    with endpoint_of(shared_cluster, through_client) as endpoint:
        nodes = shared_cluster.nodes[:2]
        handles = endpoint.start_workers(echo_once, [{"node_id": n.id} for n in nodes * 2])
        channels = [endpoint.channel(h.id) for h in handles]
        gone = handles[0]
        gone.kill()
        gone.wait(10)
        endpoint.send_many([h.id for h in handles], "hi")  # the exited one is skipped
        assert [ch.recv(timeout=10) for ch in channels[1:]] == [("got", "hi")] * 3
        assert all(h.wait(10).ok for h in handles[1:])
