"""The docker provider: a clear error where no Docker engine answers; a real cluster where
one does."""

from __future__ import annotations

import pytest

from simcluster import Cluster, NodeSpec, SimclusterError
from simcluster.providers.docker import client_or_reason

_client, WHY = client_or_reason()
if _client is not None:
    _client.close()


@pytest.mark.skipif(WHY is None, reason="a Docker engine answers here")
def test_without_an_engine_the_provider_says_why_and_what_to_do(tmp_path):
    with pytest.raises(SimclusterError, match=r"provider='docker'\) cannot run here.*"
                                              r"provider='process'"):
        Cluster(nodes=[NodeSpec()], provider="docker", history_path=tmp_path / "h.jsonl")


@pytest.mark.slow
@pytest.mark.skipif(WHY is not None, reason=f"docker provider unavailable: {WHY}")
def test_nodes_are_containers_with_their_own_addresses(make_cluster):
    import socket

    c = make_cluster(NodeSpec(cpus=1), NodeSpec(cpus=1), provider="docker")
    a, b = c.nodes
    assert a.address != b.address
    seen = c.start_worker(a.id, socket.gethostname).wait(60).result
    assert seen and seen != socket.gethostname()
    c.kill_node(b)
    assert c.node(b.id).state == "down"


@pytest.mark.skipif(WHY is not None, reason=f"docker provider unavailable: {WHY}")
def test_the_default_image_is_built_here_from_nothing_and_reused():
    from simcluster.providers.docker import IMAGE_REPOSITORY, base_layer, ensure_image

    client, _ = client_or_reason()
    try:
        first = ensure_image(client)
        assert first.startswith(f"{IMAGE_REPOSITORY}:")
        assert ensure_image(client) == first  # content-tagged: imported once, then reused
        assert base_layer() == base_layer()   # the same content gives the same tag
        assert client.images.get(first).attrs["RootFS"]["Layers"]
    finally:
        client.close()


@pytest.mark.slow
@pytest.mark.skipif(WHY is not None, reason=f"docker provider unavailable: {WHY}")
def test_faults_on_docker_nodes_and_nothing_left_after_close(tmp_path):
    import time

    from simcluster import FaultPlan, History, Trigger, action

    c = Cluster(nodes=[NodeSpec(cpus=1)] * 3, provider="docker",
                history_path=tmp_path / "h.jsonl")
    try:
        w = c.start_worker("node-1", time.sleep, (60,))
        c.pause_node("node-1")
        assert c.node("node-1").state == "paused"
        c.resume_node("node-1")
        run = c.run_plan(FaultPlan([(Trigger.after(0),
                                     action("partition", nodes=["node-2"], seconds=0.5))]))
        assert run.wait(20)
        added = c.add_node(NodeSpec(cpus=2))
        gateway = c.address.split(":")[0]  # the driver listens on the cluster's own network
        assert added.address.rsplit(".", 1)[0] == gateway.rsplit(".", 1)[0]
        c.kill_node("node-1")
        assert w.wait(10).reason == "node_lost"
        c.remove_node(added)
        assert c.start_worker("node-2", sum, ([1, 2],)).wait(20).result == 3  # healed
        tag = c.provider.tag
    finally:
        c.close()
    kinds = [e["event"] for e in History.read(tmp_path / "h.jsonl")]
    for kind in ("node_paused", "node_resumed", "heal", "node_down", "fault"):
        assert kind in kinds
    client, _ = client_or_reason()
    try:
        assert [x.name for x in client.containers.list(all=True) if tag in x.name] == []
        assert [n.name for n in client.networks.list() if n.name == f"sc-{tag}"] == []
    finally:
        client.close()
