"""The docker provider: a clear error where no Docker engine answers; a real cluster where
one does."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from simcluster import Cluster, FaultPlan, History, NodeSpec, SimclusterError, Trigger, action
from simcluster.providers.base import RecordingProvider
from simcluster.providers.docker import LABEL, client_or_reason
from simcluster.providers.netns import unavailable as netns_unavailable

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
        container = c.provider.containers["node-1"]
        container.reload()
        assert container.status == "paused"  # docker pause: the engine froze it
        c.resume_node("node-1")
        container.reload()
        assert container.status == "running"
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
        assert [n for c in client.api.containers(all=True) for n in c["Names"] if tag in n] == []
        assert [n["Name"] for n in client.api.networks() if n["Name"] == f"sc-{tag}"] == []
    finally:
        client.close()


def _scenario(provider, history_path) -> list[tuple]:
    """One scripted run of every node operation; the history as (event, node, what) tuples,
    with the order-free parts (nodes coming up together, shutdown) sorted."""
    c = Cluster(nodes=[NodeSpec(cpus=1)] * 3, provider=provider, history_path=history_path)
    try:
        w = c.start_worker("node-1", time.sleep, (60,))
        c.pause_node("node-1")
        c.resume_node("node-1")
        plan = FaultPlan([(Trigger.after(0), action("partition", nodes=["node-2"], seconds=0.3))])
        assert c.run_plan(plan).wait(20)
        c.kill_node("node-1")
        assert w.wait(10).reason == "node_lost"
        c.remove_node(c.add_node(NodeSpec(cpus=2)))
        assert c.start_worker("node-2", sum, ([1, 2],)).wait(20).result == 3
    finally:
        c.close()
    rows = [(e["event"], e.get("node") or e.get("nodes"), e.get("action") or e.get("reason"))
            for e in History.read(history_path) if e["event"] not in ("plan_start", "plan_done")]
    rows = [(kind, tuple(n) if isinstance(n, list) else n, what) for kind, n, what in rows]
    ups = sorted(r for r in rows[:4] if r[0] == "node_up")
    downs = sorted(r for r in rows if r[2] == "shutdown")
    middle = [r for r in rows[4:] if r[2] != "shutdown"]
    return rows[:1] + ups + middle + downs


@pytest.mark.slow
@pytest.mark.skipif(WHY is not None, reason=f"docker provider unavailable: {WHY}")
def test_docker_nodes_record_the_same_history_as_process_and_netns_nodes(tmp_path):
    docker = _scenario("docker", tmp_path / "docker.jsonl")
    assert ("node_down", "node-1", "killed") in docker and ("heal", ("node-2",), None) in docker
    # the process provider cannot cut a link: its partitions are recorded, not enforced
    assert _scenario(RecordingProvider(), tmp_path / "process.jsonl") == docker
    if netns_unavailable() is None:
        assert _scenario("netns", tmp_path / "netns.jsonl") == docker


@pytest.mark.slow
@pytest.mark.skipif(WHY is not None, reason=f"docker provider unavailable: {WHY}")
def test_a_paused_docker_node_can_be_killed(make_cluster):
    c = make_cluster(NodeSpec(cpus=1), NodeSpec(cpus=1), provider="docker")
    w = c.start_worker("node-1", time.sleep, (60,))
    c.pause_node("node-1")
    c.kill_node("node-1")  # frozen processes take a SIGKILL only once thawed: the provider thaws
    assert c.node("node-1").state == "down"
    assert w.wait(10).reason == "node_lost"


_DRIVER = textwrap.dedent("""
    import sys, time
    from simcluster import Cluster, NodeSpec
    c = Cluster(nodes=[NodeSpec(cpus=1)] * 2, provider="docker")
    w = c.start_worker("node-1", time.sleep, (600,))
    print(c.provider.tag, c.provider.network.name, w.pid, flush=True)
    time.sleep(600)
""")


@pytest.mark.slow
@pytest.mark.skipif(WHY is not None, reason=f"docker provider unavailable: {WHY}")
def test_nothing_of_a_sigkilled_driver_is_left_once_the_next_cluster_starts(tmp_path):
    from simcluster.providers.docker import ensure_image

    client, _ = client_or_reason()
    ensure_image(client)  # the shared default image, kept between clusters by design
    images = sorted(i.id for i in client.images.list())
    driver = subprocess.Popen([sys.executable, "-c", _DRIVER], stdout=subprocess.PIPE, text=True,
                              cwd=os.getcwd())
    try:
        tag, network, worker_pid = driver.stdout.readline().split()
    finally:
        driver.send_signal(signal.SIGKILL)
        driver.wait(10)
    mine = {"label": f"{LABEL}"}

    def containers() -> list[str]:  # one call: others' containers may vanish meanwhile
        return [name for c in client.api.containers(all=True, filters=mine)
                for name in c["Names"]]
    try:
        # the nodes lose their driver and end their process groups: the containers exit
        deadline = time.monotonic() + 30
        while [x for x in containers() if tag in x]:
            assert time.monotonic() < deadline, "the dead driver's containers are still there"
            time.sleep(0.2)
        assert not os.path.exists(f"/proc/{worker_pid}")
        assert [n.name for n in client.networks.list(names=[network])] == [network]
        with Cluster(nodes=[NodeSpec(cpus=1)], provider="docker",
                     history_path=tmp_path / "h.jsonl"):
            # the next docker cluster removed what the dead owner left: its network
            assert [n.name for n in client.networks.list(names=[network])] == []
        assert [x for x in containers() if tag in x] == []
        assert [n["Name"] for n in client.api.networks(filters=mine)
                if n["Name"] == network] == []
        assert sorted(i.id for i in client.images.list()) == images  # no layer per cluster
    finally:
        client.close()


def _imported(name: str) -> bool:
    return name in sys.modules


@pytest.mark.slow
@pytest.mark.skipif(WHY is not None, reason=f"docker provider unavailable: {WHY}")
def test_docker_nodes_import_the_preload_modules_once_for_their_workers(tmp_path):
    assert "wave" not in sys.modules  # a standard module nothing here imports
    with Cluster(nodes=[NodeSpec(cpus=1)], provider="docker", preload=("wave",),
                 history_path=tmp_path / "h.jsonl") as c:
        assert c.start_worker("node-0", _imported, ("wave",)).wait(30).result is True
        assert c.start_worker("node-0", _imported, ("aifc",)).wait(30).result is False


def test_provider_unavailable_says_why_or_none(monkeypatch):
    from simcluster import provider_unavailable

    assert provider_unavailable("process") is None
    assert provider_unavailable("docker") == WHY
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    assert "no Docker engine answered at unix:///nonexistent/docker.sock" in \
        provider_unavailable("docker")
    with pytest.raises(ValueError, match=r"provider 'vm': expected one of \('process', "):
        provider_unavailable("vm")
