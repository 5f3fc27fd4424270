"""Docker nodes run as the driver's user, and a fault that cannot be delivered is an error
(`simcluster.providers.docker`).

As root, the nodes used to run as root whoever started the cluster: a non-root driver got
root-owned checkpoints in the shared folders, and its `kill_node` got EPERM, which was
swallowed, so the fault silently did nothing."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from simcluster_users import ATTACKER, as_user, needs_root

from simcluster import procfs
from simcluster.providers.docker import DockerProvider, client_or_reason

_client, WHY = client_or_reason()
if _client is not None:
    _client.close()


@needs_root
@pytest.mark.slow
def test_a_kill_that_cannot_be_delivered_is_an_error():
    """A node's supervisor this driver may not signal (what a container of another user
    is): kill_node raises, naming the node and both users, and signals nothing."""
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        outcome = as_user(ATTACKER, DockerProvider().kill, {"node-3": other.pid})
        assert outcome[0] == "error", f"the kill of another user's node said {outcome}"
        assert outcome[1].startswith("SimclusterError: cannot kill node-3"), outcome
        assert f"pid {other.pid}) runs as uid 0" in outcome[1]
        assert f"driver (uid {ATTACKER}) may not signal it" in outcome[1]
        assert procfs.state(other.pid) not in (None, "Z", "T")
    finally:
        other.kill()
        other.wait(10)


def _docker_cluster(tmp: str, history: str):
    """As the driver: a two-node docker cluster; what its nodes ran as, who owns what a
    worker made in the shared folder, and whether kill_node took a node down."""
    from simcluster import Cluster, NodeSpec

    c = Cluster(nodes=[NodeSpec(cpus=1)] * 2, provider=DockerProvider(shared=(tmp,)),
                history_path=history)
    try:
        made = os.path.join(tmp, "made-by-a-worker")
        ids = tuple(c.start_worker("node-0", f).wait(60).result for f in (os.getuid, os.getgid))
        assert c.start_worker("node-0", os.mkdir, (made,)).wait(60).ok
        user = c.provider.containers["node-0"].attrs["Config"]["User"]
        c.kill_node("node-1", timeout_s=20)
        st = os.stat(made)
        return ids, (st.st_uid, st.st_gid), user, c.node("node-1").state
    finally:
        c.close()


@needs_root
@pytest.mark.slow
@pytest.mark.skipif(WHY is not None, reason=f"docker provider unavailable: {WHY}")
def test_docker_nodes_run_as_the_drivers_uid_and_gid(tmp_path):
    """The driver runs with gid 65534 (a non-root driver cannot run here: this machine's
    interpreter lies in root's home, which a container of another uid cannot mount), so
    nodes that ran as root would show gid 0."""
    outcome = as_user(0, _docker_cluster, str(tmp_path), str(tmp_path / "h.jsonl"),
                      timeout=120, gid=ATTACKER)
    assert outcome[0] == "ok", outcome
    ids, owner, user, state = outcome[1]
    assert ids == (0, ATTACKER), f"docker nodes of a driver with gid {ATTACKER} ran as {ids}"
    assert owner == (0, ATTACKER) and user == f"0:{ATTACKER}"
    assert state == "down", "kill_node of a docker node did not take it down"
