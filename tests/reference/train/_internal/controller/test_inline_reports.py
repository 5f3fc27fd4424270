"""Metrics-only rounds are consolidated on the thread that delivers the reports, while the
controller waits (controller/inline_reports.py, worker_group/inbox.py): no handover to the
controller's thread and back. A round with a checkpoint never is: its commit and its
acknowledgement stay on the controller's thread, the commit first.

The controller runs in a thread of its own here, as in a fit; the test's thread delivers
the workers' messages, as simcluster's event loop does, into a real SimclusterGroup over a
recording cluster endpoint. Each assertion names the thread that did the work, not a time.
"""

from __future__ import annotations

import logging
import threading
import time

import pytest

from reference.train._exceptions import ControllerError
from reference.train._internal.controller import states as S
from reference.train._internal.controller.controller import Controller
from reference.train._internal.controller.policies import FailurePolicy, ScalingPolicy
from reference.train._internal.worker_group.api import Ack, Finished, Report
from reference.train._internal.worker_group.simcluster_group import SimclusterGroup

DEADLINE_S = 10.0


class Handle:
    def __init__(self, worker_id):
        self.id, self.exit = worker_id, None

    def wait(self, timeout=None):
        self.exit = "stopped"

    def kill(self, signal):
        self.exit = "killed"


class Placement:
    def release(self):
        pass


class Cluster:
    """A cluster endpoint that records which thread sent what to which worker."""

    def __init__(self, fail_with: Exception | None = None):
        self.sent: list[tuple[str, str, object]] = []
        self.fail_with = fail_with

    def send(self, worker_id, obj):
        if self.fail_with is not None:
            raise self.fail_with
        self.sent.append((threading.current_thread().name, worker_id, obj))

    def acks(self):
        return [sent for sent in self.sent if isinstance(sent[2], Ack)]

    def send_many(self, worker_ids, obj):
        for worker_id in worker_ids:
            self.send(worker_id, obj)


class Factory:
    def __init__(self, cluster):
        self.cluster, self.groups = cluster, []

    def capacity(self, resources_per_worker):
        return 2

    def start(self, spec):
        group = SimclusterGroup(self, spec, placement=Placement())
        group.workers.update({rank: Handle(f"w{rank}") for rank in range(spec.num_workers)})
        group.training = True
        self.groups.append(group)
        return group

    def forget(self, group):
        pass


class Manager:
    latest_checkpoint = None

    def __init__(self, log):
        self.log = log

    def register_checkpoint(self, checkpoint, metrics):
        self.log.append(("register", threading.current_thread().name, checkpoint))

    def record_report_without_checkpoint(self):
        pass


def start_controller(cluster, log, **kwargs):
    """A controller stepping in a thread named "controller" until its run ends."""
    def commit(attempt, index, name, metrics):
        log.append(("commit", threading.current_thread().name, index))
        return f"ckpt:{index}"

    factory = Factory(cluster)
    controller = Controller(
        spec=dict(resources_per_worker={"CPU": 1}, placement_strategy="PACK",
                  experiment_name="x", storage=None, staging_prefix="/s", train_fn=b""),
        factory=factory, checkpoint_manager=Manager(log), failure_policy=FailurePolicy(0),
        scaling_policy=ScalingPolicy(2, 2, None), commit_round=commit, **kwargs)
    thread = threading.Thread(target=controller.run, name="controller", daemon=True)
    thread.start()
    return controller, factory, thread


def group_when_waiting(factory):
    """The group, once the controller's thread is blocked waiting for its events."""
    deadline = time.monotonic() + DEADLINE_S
    while not (factory.groups and factory.groups[0].events.waiting):
        assert time.monotonic() < deadline, "the controller never waited for events"
        time.sleep(0.001)
    return factory.groups[0]


def deliver(factory, event):
    """What simcluster's loop does with a worker's message: once the controller waits."""
    group_when_waiting(factory).on_message(event)


def finish(factory, thread):
    for rank in (0, 1):
        deliver(factory, Finished(rank, None))
    thread.join(DEADLINE_S)
    assert not thread.is_alive(), "the controller did not end"


def test_a_metrics_only_round_is_acknowledged_by_the_delivering_thread():
    cluster, log = Cluster(), []
    controller, factory, thread = start_controller(cluster, log)
    deliver(factory, Report(0, 0, {"loss": 1.0}, False, None))
    deliver(factory, Report(1, 0, {"loss": 2.0}, False, None))
    me = threading.current_thread().name
    # both acks went out before on_message returned, from this thread: no handover
    assert cluster.acks() == [(me, "w0", Ack(0, None)), (me, "w1", Ack(0, None))]
    assert factory.groups[0].events.handled == 2
    finish(factory, thread)
    assert isinstance(controller.state, S.Finished)
    assert [str(t) for t in controller.transitions[2:4]] == [
        "RUNNING -> RUNNING: rank 0 reported round 0",
        "RUNNING -> RUNNING: round 0 consolidated (metrics only)"]


@pytest.mark.parametrize("staged_ranks", [(0, 1), (1,)])
def test_a_round_with_a_checkpoint_is_committed_and_acknowledged_by_the_controller(
        staged_ranks):
    cluster, log = Cluster(), []
    controller, factory, thread = start_controller(cluster, log)
    for rank in (0, 1):
        deliver(factory, Report(rank, 0, {"step": 0}, rank in staged_ranks, None))
    deadline = time.monotonic() + DEADLINE_S
    while len(cluster.acks()) < 2:
        assert time.monotonic() < deadline, f"the round was not acknowledged: {log}"
        time.sleep(0.001)
    assert log == [("commit", "controller", 0), ("register", "controller", "ckpt:0")]
    assert cluster.acks() == [("controller", "w0", Ack(0, "ckpt:0")),
                            ("controller", "w1", Ack(0, "ckpt:0"))]
    finish(factory, thread)
    assert isinstance(controller.state, S.Finished)


def test_a_round_opened_inline_is_still_warned_about(caplog):
    # The controller waited with no timeout when rank 0's report opened the round on the
    # delivering thread: it must wake to log that rank 1 is missing.
    cluster, log = Cluster(), []
    caplog.set_level(logging.WARNING, "reference.train._internal.controller.controller")
    controller, factory, thread = start_controller(cluster, log, report_warn_interval_s=0.05)
    deliver(factory, Report(0, 0, {"loss": 1.0}, False, None))
    deadline = time.monotonic() + DEADLINE_S
    while not any("to report too" in r.getMessage() for r in caplog.records):
        assert time.monotonic() < deadline, "the missing rank was never warned about"
        time.sleep(0.005)
    deliver(factory, Report(1, 0, {"loss": 2.0}, False, None))
    finish(factory, thread)
    assert isinstance(controller.state, S.Finished)


def test_an_error_of_the_inline_handling_fails_the_run_on_the_controller_thread():
    cluster, log = Cluster(fail_with=RuntimeError("the endpoint broke")), []
    controller, factory, thread = start_controller(cluster, log)
    deliver(factory, Report(0, 0, {"loss": 1.0}, False, None))
    factory.groups[0].on_message(Report(1, 0, {"loss": 2.0}, False, None))  # raises inline
    thread.join(DEADLINE_S)
    assert not thread.is_alive(), "the controller did not end"
    assert isinstance(controller.state, S.Errored)
    assert isinstance(controller.state.error, ControllerError)
    assert "the endpoint broke" in str(controller.state.error)


def test_a_callback_with_after_report_keeps_rounds_on_the_controller_thread():
    class Callback:
        def __init__(self):
            self.threads = []

        def after_report(self, run_context, metrics, checkpoint):
            self.threads.append(threading.current_thread().name)

    cluster, log, callback = Cluster(), [], Callback()
    controller, factory, thread = start_controller(cluster, log, callbacks=(callback,))
    for rank in (0, 1):
        deliver(factory, Report(rank, 0, {"loss": 1.0}, False, None))
    finish(factory, thread)
    assert callback.threads == ["controller"]
    assert [name for name, *_ in cluster.acks()] == ["controller", "controller"]
