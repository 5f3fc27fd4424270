"""The controller, one transition at a time, on a scripted worker group."""

import pytest

from reference.train._exceptions import ControllerError, WorkerGroupError
from reference.train._internal.controller import states as S
from reference.train._internal.controller.controller import Controller, NeverSchedulable
from reference.train._internal.controller.policies import FailurePolicy, ScalingPolicy
from reference.train._internal.worker_group.api import Failed, Finished, GroupStartError, Report
from reference.train._internal.worker_group.fake import FakeWorkerGroupFactory


class Manager:
    def __init__(self):
        self.latest_checkpoint = None
        self.registered, self.metric_only = [], 0

    def register_checkpoint(self, checkpoint, metrics):
        self.registered.append((checkpoint, metrics))
        self.latest_checkpoint = checkpoint

    def record_report_without_checkpoint(self):
        self.metric_only += 1


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def make(scripts, *, max_failures=0, scaling=(2, 2, None), capacity=10, commits=None,
         discards=None, commit=None, warn_interval_s=60.0):
    commits = [] if commits is None else commits
    discards = [] if discards is None else discards

    def record_commit(attempt, index, name, metrics):
        commits.append((index, name))
        return f"ckpt:{name}"

    def discard(attempt):
        # (attempt, whether every group started so far was shut down when it was called)
        discards.append((attempt, all(g is None or g.shut_down for g in factory.groups)))

    factory = FakeWorkerGroupFactory(scripts, capacity=capacity)
    clock = Clock()
    controller = Controller(
        spec=dict(resources_per_worker={"CPU": 1}, placement_strategy="PACK",
                  experiment_name="x", storage=None, staging_prefix="/s", train_fn=b""),
        factory=factory, checkpoint_manager=Manager(), failure_policy=FailurePolicy(max_failures),
        scaling_policy=ScalingPolicy(*scaling), commit_round=commit or record_commit,
        discard_staging=discard, clock=clock, report_warn_interval_s=warn_interval_s)
    return controller, factory, clock


def steps(controller, n):
    return [str(controller.step()) for _ in range(n)]


def test_happy_path_transition_table():
    c, factory, _ = make([[
        Report(0, 0, {"a": 0}, True, "ck0"), Report(1, 0, {"a": 1}, True, "ignored"),
        Report(1, 1, {"a": 1}, False, None), Report(0, 1, {"a": 0}, False, None),
        Finished(1, "one"), Finished(0, "zero"),
    ]])
    assert steps(c, 8) == [
        "INITIALIZING -> SCHEDULING: start",
        "SCHEDULING -> RUNNING: attempt 0 started with 2 workers (fixed size)",
        "RUNNING -> RUNNING: rank 0 reported round 0",
        "RUNNING -> RUNNING: round 0 consolidated (with a checkpoint)",
        "RUNNING -> RUNNING: rank 1 reported round 1",
        "RUNNING -> RUNNING: round 1 consolidated (metrics only)",
        "RUNNING -> RUNNING: rank 1 returned",
        "RUNNING -> FINISHED: every rank returned",
    ]
    assert c.state.return_value == "zero"
    assert c.manager.registered == [("ckpt:ck0", {"a": 0})]  # rank 0's metrics and name
    assert c.manager.metric_only == 1
    group = factory.groups[0]
    assert [(r, a.index, a.checkpoint) for r, a in group.acks] == [
        (0, 0, "ckpt:ck0"), (1, 0, "ckpt:ck0"), (1, 1, None), (0, 1, None)]
    assert group.shut_down


def test_nonzero_rank_checkpoint_uses_rank0_name():
    commits = []
    c, _, _ = make([[Report(1, 0, {}, True, "r1"), Report(0, 0, {"m": 0}, False, "r0")]],
                   commits=commits)
    steps(c, 4)
    assert commits == [(0, "r0")]


def test_failure_with_budget_restarts_from_latest_checkpoint():
    c, factory, _ = make([
        [Report(0, 0, {}, True, "a"), Report(1, 0, {}, True, "a"),
         Failed(1, error=ValueError("boom"), traceback="tb")],
        [Finished(0, 0), Finished(1, 1)],
    ], max_failures=1)
    out = steps(c, 9)
    assert out[4:7] == ["RUNNING -> RESTARTING: rank 1 failed: retry (worker_group failure 1, "
                        "max allowed 1)",
                        "RESTARTING -> SCHEDULING: restart from the latest checkpoint",
                        "SCHEDULING -> RUNNING: attempt 1 started with 2 workers (fixed size)"]
    assert isinstance(c.state, S.Finished)
    assert factory.groups[0].shut_down
    assert factory.groups[1].spec.checkpoint == "ckpt:a"
    assert factory.groups[1].spec.attempt == 1


def test_failure_without_budget_raises_worker_group_error_keyed_by_rank():
    boom = ValueError("boom")
    c, _, _ = make([[Failed(1, error=boom, traceback="Traceback: boom"),
                     Failed(0, exit_code=None, signal=9)]])
    steps(c, 3)
    assert isinstance(c.state, S.Errored)
    err = c.state.error
    assert isinstance(err, WorkerGroupError)
    assert err.worker_failures[1] is boom
    assert "signal 9" in str(err.worker_failures[0])
    assert str(err).startswith("Training failed due to worker errors:\n[Rank 0 Error Snippet]")


def test_unlimited_budget():
    scripts = [[Failed(0, error=RuntimeError(str(i)))] for i in range(5)] + [[Finished(0, 1)]]
    c, _, _ = make(scripts, max_failures=-1, scaling=(1, 1, None))
    while not isinstance(c.state, S.TERMINAL):
        c.step()
    assert isinstance(c.state, S.Finished)


def test_never_schedulable_is_a_controller_error_at_once():
    c, _, _ = make([NeverSchedulable("needs 8 CPUs, cluster has 2")], max_failures=-1)
    steps(c, 2)
    assert isinstance(c.state, S.Errored) and isinstance(c.state.error, ControllerError)


def test_start_failure_is_charged_to_the_controller_budget():
    c, _, _ = make([GroupStartError("worker died while starting"), [Finished(0, 0),
                                                                     Finished(1, 0)]])
    out = steps(c, 3)
    assert out[1].startswith("SCHEDULING -> RESTARTING: start failed, retry (controller")


def test_elastic_waits_below_min_then_starts():
    c, factory, _ = make([[Finished(0, 0), Finished(1, 0), Finished(2, 0)]],
                         scaling=(3, 4, 5.0), capacity=2)
    out = steps(c, 3)
    assert out[1:] == ["SCHEDULING -> SCHEDULING: waiting: 2 workers fit, fewer than "
                       "min_workers=3"] * 2
    factory.capacity_value = 3
    assert steps(c, 1) == ["SCHEDULING -> RUNNING: attempt 0 started with 3 workers "
                           "(3 workers fit (max_workers=4))"]


def test_elastic_resize_is_not_a_failure():
    c, factory, clock = make([[], [Finished(r, r) for r in range(4)]],
                             scaling=(1, 4, 5.0), capacity=2, max_failures=0)
    steps(c, 2)
    assert c.state.size == 2
    factory.capacity_value = 4
    clock.now = 6.0
    assert steps(c, 3) == [
        "RUNNING -> RESIZING: 4 workers fit; resizing 2 -> 4",
        "RESIZING -> SCHEDULING: restart at the new size 4",
        "SCHEDULING -> RUNNING: attempt 1 started with 4 workers (4 workers fit (max_workers=4))",
    ]
    assert factory.groups[0].shut_down
    assert c.failure_policy.counts == {"worker_group": 0, "controller": 0, "preemption": 0}


@pytest.mark.parametrize("limit,failures,retries", [(0, 1, []), (1, 2, [True]), (2, 3, [True, True])])
def test_failure_policy_counts(limit, failures, retries):
    p = FailurePolicy(limit)
    decisions = [p.decide("worker_group").retry for _ in range(failures)]
    assert decisions == retries + [False]


def test_backend_setup_failure_is_retried_a_few_times_then_a_controller_error():
    from reference.train._internal.worker_group.api import BackendSetupError

    cause = ValueError("unknown backend 'bogus'")
    c, factory, _ = make([BackendSetupError(cause, 0)] * 3, max_failures=0)
    while not isinstance(c.state, S.TERMINAL):
        c.step()
    assert isinstance(c.state, S.Errored) and isinstance(c.state.error, ControllerError)
    assert c.state.error.controller_failure is cause
    assert len(factory.groups) == 3  # 2 retries, none charged to max_failures=0
    assert c.failure_policy.counts == {"worker_group": 0, "controller": 0, "preemption": 0}


def test_transient_setup_failure_recovers():
    from reference.train._internal.worker_group.api import BackendSetupError

    c, _, _ = make([BackendSetupError(RuntimeError("port taken"), 1),
                    [Finished(0, 0), Finished(1, 0)]], max_failures=0)
    while not isinstance(c.state, S.TERMINAL):
        c.step()
    assert isinstance(c.state, S.Finished)


def test_a_finished_attempt_shuts_its_group_down_gracefully():
    c, factory, _ = make([[Finished(0, 7), Finished(1, 8)]])
    while not isinstance(c.state, S.TERMINAL):
        c.step()
    assert isinstance(c.state, S.Finished) and c.state.return_value == 7
    assert factory.groups[0].graceful is True


def test_an_error_of_the_backends_shutdown_fails_a_finished_run():
    c, factory, _ = make([[Finished(0, 7), Finished(1, 8)]])
    c.step(), c.step()  # INITIALIZING -> SCHEDULING -> RUNNING
    factory.groups[0].shutdown_error = RuntimeError("tracker would not stop")
    while not isinstance(c.state, S.TERMINAL):
        c.step()
    assert isinstance(c.state, S.Errored) and isinstance(c.state.error, ControllerError)
    assert str(c.state.error.controller_failure) == "tracker would not stop"


def test_an_abort_shuts_the_group_down_without_the_backend():
    c, factory, _ = make([[Report(0, 0, {}, False, None)]])

    def interrupted(timeout):
        raise KeyboardInterrupt

    c.step(), c.step()
    factory.groups[0].next_event = interrupted
    with pytest.raises(KeyboardInterrupt):
        c.run()
    assert isinstance(c.state, S.Aborted) and factory.groups[0].graceful is False


def test_a_controller_error_shuts_the_group_down_with_the_backend_keeping_its_error(caplog):
    # as Ray's TrainController._shutdown: on_shutdown runs; its own error is only logged
    def commit(attempt, index, name, metrics):
        raise OSError(28, "No space left on device")

    c, factory, _ = make([[Report(0, 0, {}, True, "a"), Report(1, 0, {}, True, "a")]],
                         commit=commit)
    c.step(), c.step()
    factory.groups[0].shutdown_error = RuntimeError("tracker would not stop")
    final = c.run()
    assert isinstance(final, S.Errored) and isinstance(final.error.controller_failure, OSError)
    assert factory.groups[0].graceful is True
    assert "tracker would not stop" in caplog.text


def test_preemption_is_charged_to_its_own_budget():
    c, _, _ = make([[Failed(0, signal=9, preempted=True), Failed(1, signal=9, preempted=True)],
                    [Finished(0, 0), Finished(1, 0)]], max_failures=0)
    while not isinstance(c.state, S.TERMINAL):
        c.step()
    assert isinstance(c.state, S.Finished)
    assert c.failure_policy.counts["preemption"] == 1
    assert c.failure_policy.counts["worker_group"] == 0


# ------------------------------------------------------------ staging of unfinished rounds
def run_to_end(c):
    while not isinstance(c.state, S.TERMINAL):
        c.step()


def test_a_failed_rounds_staging_is_discarded_once_its_group_is_down():
    discards = []
    c, _, _ = make([[Report(0, 0, {}, True, "a"), Failed(1, signal=9)]], discards=discards)
    run_to_end(c)
    assert isinstance(c.state, S.Errored)
    assert discards == [(0, True)]


def test_every_attempt_discards_its_staging_when_it_ends():
    discards = []
    c, _, _ = make([[Report(0, 0, {}, True, "a"), Failed(1, signal=9)],
                    GroupStartError("a worker died while starting"),
                    [Finished(0, 0), Finished(1, 0)]], max_failures=1, discards=discards)
    run_to_end(c)
    assert isinstance(c.state, S.Finished)
    assert discards == [(0, True), (1, True), (2, True)]


def test_a_resize_discards_the_old_attempts_staging():
    discards = []
    c, factory, clock = make([[Report(0, 0, {}, True, "a")], []], scaling=(1, 4, 5.0),
                             capacity=2, discards=discards)
    steps(c, 3)
    factory.capacity_value, clock.now = 4, 6.0
    assert steps(c, 1) == ["RUNNING -> RESIZING: 4 workers fit; resizing 2 -> 4"]
    assert discards == [(0, True)]


def test_a_commit_that_raises_errors_the_run_after_discarding_the_staging():
    # as Ray's control loop: the controller's own error ends the run as ControllerError,
    # which no FailureConfig budget retries
    from reference.train._exceptions import ControllerError

    discards = []

    def commit(attempt, index, name, metrics):
        raise OSError(28, "No space left on device")

    c, factory, _ = make([[Report(0, 0, {}, True, "a"), Report(1, 0, {}, True, "a")]],
                         discards=discards, commit=commit)
    final = c.run()
    assert isinstance(final, S.Errored) and isinstance(final.error, ControllerError)
    assert isinstance(final.error.controller_failure, OSError)
    assert c.transitions[-1].reason.startswith("controller error: ")
    assert "No space left on device" in c.transitions[-1].reason
    assert factory.groups[0].shut_down and len(factory.groups) == 1
    assert discards == [(0, True)]


# ------------------------------------------------------------ rounds some ranks never reach
def test_a_round_some_ranks_miss_is_logged_every_interval_naming_them(caplog):
    c, _, clock = make([[Report(1, 0, {}, False, None)]], scaling=(3, 3, None),
                       warn_interval_s=10.0)
    steps(c, 3)
    caplog.set_level("WARNING", logger="reference.train._internal.controller.controller")
    clock.now = 9.0
    assert steps(c, 1) == ["RUNNING -> RUNNING: no event"]  # not yet due
    assert caplog.records == []
    clock.now = 10.5
    assert steps(c, 1) == ["RUNNING -> RUNNING: round 0 waits for ranks [0, 2]"]
    clock.now = 21.0
    steps(c, 1)
    assert len(caplog.records) == 2
    text = caplog.records[-1].getMessage()
    assert "round 0: world ranks [1] have waited 21.00 s for world ranks [0, 2]" in text
    assert "RAY_TRAIN_COLLECTIVE_WARN_INTERVAL_S" in text and "every 10 s" in text


def test_a_round_that_completes_is_no_longer_logged(caplog):
    c, _, clock = make([[Report(0, 0, {}, False, None), Report(1, 0, {}, False, None)]],
                       warn_interval_s=1.0)
    steps(c, 4)
    caplog.set_level("WARNING")
    clock.now = 5.0
    assert steps(c, 1) == ["RUNNING -> RUNNING: no event"]
    assert caplog.records == [] and c.state.report_warn_at == {}


@pytest.mark.parametrize("raw, expected", [(None, 60.0), ("0.25", 0.25), ("soon", 60.0),
                                           ("0", 60.0), ("-1", 60.0), ("nan", 60.0)])
def test_warn_interval_is_read_like_ray(raw, expected):
    from reference.train._internal.controller.controller import collective_warn_interval_s

    env = {} if raw is None else {"RAY_TRAIN_COLLECTIVE_WARN_INTERVAL_S": raw}
    assert collective_warn_interval_s(env) == expected


def test_rank0_metrics_the_snapshot_cannot_store_fail_rank0_before_any_commit():
    # Only rank 1 passes a checkpoint, so rank 0 never checked its own metrics: the
    # controller does, before committing, and charges the failure to rank 0.
    commits, discards = [], []
    c, _, _ = make([[Report(0, 0, {"m": object()}, False, None), Report(1, 0, {}, True, "a")]],
                   commits=commits, discards=discards)
    steps(c, 4)
    assert isinstance(c.state, S.Errored)
    assert commits == []
    err = c.state.error
    assert isinstance(err, WorkerGroupError) and isinstance(err.worker_failures[0], TypeError)
    assert "m" in str(err.worker_failures[0])
    assert discards and discards[-1][1]  # the staging went with the attempt
