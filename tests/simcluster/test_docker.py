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
