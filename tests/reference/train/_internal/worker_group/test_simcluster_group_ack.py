"""SimclusterGroup.ack: a worker that cannot be reached is that worker's failure."""

import signal

from reference.train._internal.worker_group.api import Ack, GroupSpec
from reference.train._internal.worker_group.simcluster_group import SimclusterGroup
from simcluster import ChannelClosed


class Handle:
    def __init__(self, worker_id, exit=None):
        self.id, self.exit, self.signals = worker_id, exit, []

    def kill(self, sig):
        self.signals.append(sig)


class Cluster:
    def __init__(self, closed=()):
        self.closed, self.sent = set(closed), []

    def send(self, worker_id, obj):
        if worker_id in self.closed:
            # what simcluster raises when the socket hit EOF before the exit was final
            raise ChannelClosed(f"connection to worker {worker_id} 4242 is closed")
        self.sent.append((worker_id, obj))


class Factory:
    def __init__(self, cluster):
        self.cluster = cluster


def group_with(cluster, handles):
    spec = GroupSpec(num_workers=len(handles), resources_per_worker={"CPU": 1},
                     placement_strategy="PACK", attempt=0, experiment_name="x", storage=None,
                     staging_prefix="/s", train_fn=b"")
    group = SimclusterGroup(Factory(cluster), spec, placement=None)
    group.workers.update(handles)
    return group


def test_ack_to_a_closed_socket_kills_the_worker_instead_of_raising():
    cluster = Cluster(closed={"w1"})
    handles = {0: Handle("w0"), 1: Handle("w1")}
    group = group_with(cluster, handles)
    ack = Ack(3, None)
    for rank in (1, 0):
        group.ack(rank, ack)  # raised ChannelClosed into the controller before
    assert handles[1].signals == [signal.SIGKILL]  # its exit becomes the Failed event
    assert cluster.sent == [("w0", ack)] and handles[0].signals == []


def test_ack_skips_a_worker_whose_exit_is_final():
    cluster = Cluster()
    group = group_with(cluster, {0: Handle("w0", exit=object())})
    group.ack(0, Ack(0, None))
    assert cluster.sent == []
