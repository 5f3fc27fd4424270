"""A node kill the provider cannot deliver (a container engine that remaps users, so the
driver may not signal its nodes) is an error, never a fault the history says happened, and
Cluster.close() still shuts the rest down."""

import json

import pytest

from simcluster import Cluster, NodeSpec
from simcluster._errors import SimclusterError
from simcluster.providers.base import Provider


class RemappedEngine(Provider):
    """The process provider, refusing every kill as `DockerProvider.check_kill` does when
    its nodes run as other host uids."""

    name = "remapped"

    def __init__(self):
        self.refuse = True

    def check_kill(self, pids):
        if self.refuse:
            raise SimclusterError(f"cannot kill {sorted(pids)}: its supervisor runs as another "
                                  "user")

    def kill(self, pids):
        self.check_kill(pids)
        super().kill(pids)


def _events(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.slow
def test_an_undelivered_kill_raises_records_nothing_and_close_still_finishes(tmp_path):
    history, pids = tmp_path / "history.jsonl", {}
    provider = RemappedEngine()
    cluster = Cluster(nodes=[NodeSpec(cpus=1)] * 2, provider=provider, history_path=history)
    try:
        with pytest.raises(SimclusterError, match="cannot kill"):
            cluster.kill_node("node-1")
        assert [n.state for n in cluster.nodes] == ["up", "up"]
        pids = {rec.node.id: rec.pid for rec in cluster._driver.nodes.values()}
        with pytest.warns(RuntimeWarning, match="Cluster.close.*cannot kill"):
            cluster.close()
        kinds = [e["event"] for e in _events(history)]
        assert "fault" not in kinds and kinds[-1] == "cluster_stop", kinds
    finally:
        provider.refuse = False
        Provider.kill(provider, pids)
        cluster.close()
