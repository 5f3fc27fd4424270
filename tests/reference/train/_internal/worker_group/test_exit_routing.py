"""A worker's exit always reaches its group as that rank's failure: routed by the name it
was started with, else by its worker id (a client that lost its cluster names lost workers
so), else, for a name of the group without a usable rank, as a failure of the group; and a
fit on a cluster whose driver is SIGKILLed fails instead of waiting forever."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

import reference
import reference.train as t
from reference.train._internal.worker_group.api import Failed, GroupSpec
from reference.train._internal.worker_group.simcluster_factory import SimclusterGroupFactory
from reference.train._internal.worker_group.simcluster_group import SimclusterGroup
from simcluster import WorkerExit


class Handle:
    def __init__(self, worker_id):
        self.id, self.exit = worker_id, None


class Cluster:
    """What the factory needs of a cluster endpoint to route: its two callbacks."""

    def on_message(self, callback):
        self.message = callback

    def on_worker_exit(self, callback):
        self.exit = callback


def _factory_with_group(world_size: int = 2):
    cluster = Cluster()
    factory = SimclusterGroupFactory(cluster, backend=None)
    spec = GroupSpec(num_workers=world_size, resources_per_worker={"CPU": 1},
                     placement_strategy="PACK", attempt=0, experiment_name="x", storage=None,
                     staging_prefix="/s", train_fn=b"")
    group = SimclusterGroup(factory, spec, placement=None)
    group.workers.update({rank: Handle(f"worker-{rank + 10}") for rank in range(world_size)})
    factory._groups[group.id] = group
    return cluster, group


def _exit(worker_id: str, name: str, reason: str = "exited") -> WorkerExit:
    return WorkerExit(worker_id=worker_id, node_id="node-0", name=name, pid=None, code=None,
                      signal=None, reason=reason)


def _events(group) -> list:
    out = []
    while (event := group.next_event(0)) is not None:
        out.append(event)
    return out


def test_an_exit_reaches_its_rank_by_name_else_by_worker_id():
    cluster, group = _factory_with_group()
    cluster.exit(_exit("worker-99", f"{group.id}:rank1"))  # before its handle is known
    cluster.exit(_exit("worker-10", "worker-10", reason="disconnected"))  # dropped before
    cluster.exit(_exit("worker-5", "trial-3"))  # another user's worker: none of ours
    assert _events(group) == [Failed(1), Failed(0)]


def test_an_exit_naming_the_group_but_no_rank_fails_the_group():
    cluster, group = _factory_with_group()
    group.finished.add(0)
    cluster.exit(_exit("worker-99", f"{group.id}:rankX"))  # raised ValueError before
    assert _events(group) == [Failed(1)]
    group.closed = True
    cluster.exit(_exit("worker-11", f"{group.id}:rank1"))  # a torn-down group hears nothing
    assert _events(group) == []


DRIVER = textwrap.dedent("""
    import time
    from simcluster import Cluster, NodeSpec
    cluster = Cluster(nodes=[NodeSpec(cpus=2)])
    print(cluster.address, flush=True)
    time.sleep(300)
""")


@pytest.mark.slow
def test_a_fit_whose_cluster_driver_is_sigkilled_fails_instead_of_waiting(tmp_path):
    driver = subprocess.Popen([sys.executable, "-c", DRIVER], stdout=subprocess.PIPE, text=True)
    marker = tmp_path / "running"
    outcome: list[BaseException | object] = []

    def train():
        marker.touch()
        time.sleep(300)

    def fit():
        try:
            outcome.append(t.DataParallelTrainer(
                train, scaling_config=t.ScalingConfig(num_workers=1),
                run_config=t.RunConfig(storage_path=str(tmp_path / "s"), name="lost")).fit())
        except BaseException as exc:  # noqa: BLE001 - the outcome under test
            outcome.append(exc)

    reference.shutdown()
    runner = threading.Thread(target=fit, daemon=True)
    try:
        reference.init(address=driver.stdout.readline().strip())
        runner.start()
        deadline = time.monotonic() + 30
        while not marker.exists():
            assert runner.is_alive() and time.monotonic() < deadline, f"no worker ran: {outcome}"
            time.sleep(0.01)
        driver.send_signal(signal.SIGKILL)
        runner.join(15)
        assert not runner.is_alive(), "the fit still waits for the workers of a dead cluster"
        assert isinstance(outcome[0], t.WorkerGroupError), outcome
        assert "rank 0" in str(outcome[0])
    finally:
        driver.kill()
        driver.wait(10)
        driver.stdout.close()
        reference.shutdown()
