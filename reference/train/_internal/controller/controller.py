"""The controller: drives worker groups through the state machine in `states.py`.

Collaborators come in through `__init__` (worker-group factory, checkpoint manager,
policies, clock); nothing here knows which cluster runs the workers. `step()` performs one
transition and returns its record; `run()` steps until a terminal state.

Ordering hazards, and how they are kept:
- A report round is acknowledged to the ranks only after its checkpoint folder was
  committed (rename) and registered (snapshot written). A checkpoint acknowledged on every
  rank is therefore never lost by a later failure: the next group starts from the
  manager's latest checkpoint, which is at least that one.
- A failed group is shut down (every process gone, resources free) before the next one is
  started, so two attempts never run at once.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Callable

from reference.train._internal.controller import states as S
from reference.train._internal.controller.policies import FailurePolicy, ScalingPolicy
from reference.train._internal.worker_group.api import (
    Ack,
    Failed,
    Finished,
    GroupSpec,
    GroupStartError,
    Report,
    StartRejected,
    WorkerGroupFactory,
)

logger = logging.getLogger(__name__)


class NeverSchedulable(StartRejected):
    """The request can never fit on the cluster: waiting would be forever."""


class Controller:
    def __init__(
        self,
        *,
        spec: dict,
        factory: WorkerGroupFactory,
        checkpoint_manager,
        failure_policy: FailurePolicy,
        scaling_policy: ScalingPolicy,
        commit_round: Callable[[int, int, str | None, Any], Any],
        clock: Callable[[], float] = time.monotonic,
        callbacks: tuple = (),
        capacity_wait_s: float = 0.2,
        setup_retries: int = 2,
    ):
        self.spec = spec
        self.factory = factory
        self.manager = checkpoint_manager
        self.failure_policy = failure_policy
        self.scaling_policy = scaling_policy
        self.commit_round = commit_round
        self.clock = clock
        self.callbacks = callbacks
        self.capacity_wait_s = capacity_wait_s
        self.setup_retries = setup_retries
        self.setup_failures = 0
        self.state: Any = S.Initializing()
        self.transitions: list[S.Transition] = []

    # ------------------------------------------------------------ stepping
    def step(self) -> S.Transition:
        source = self.state
        handler = getattr(self, f"_on_{type(source).__name__.lower()}")
        target, reason = handler(source)
        self.state = target
        record = S.Transition(S.name(source), S.name(target), reason)
        self.transitions.append(record)
        logger.debug("%s", record)
        return record

    def run(self):
        try:
            while not isinstance(self.state, S.TERMINAL):
                self.step()
        except BaseException:
            self._shutdown_group()
            self.state = S.Aborted()
            raise
        return self.state

    def _shutdown_group(self) -> None:
        if isinstance(self.state, S.Running):
            self.state.group.shutdown()

    # ------------------------------------------------------------ handlers
    def _on_initializing(self, state):
        return S.Scheduling(attempt=0), "start"

    def _on_scheduling(self, state: S.Scheduling):
        resources = self.spec["resources_per_worker"]
        decision = self.scaling_policy.initial(self.factory.capacity(resources))
        if decision.size is None:
            self.factory.wait_for_change(self.capacity_wait_s)
            return state, f"waiting: {decision.reason}"
        group_spec = GroupSpec(num_workers=decision.size, attempt=state.attempt,
                               checkpoint=self.manager.latest_checkpoint, **self.spec)
        try:
            group = self.factory.start(group_spec)
        except StartRejected as exc:
            return S.Errored(self._controller_error(exc)), f"cannot start: {exc}"
        except GroupStartError as exc:
            decision = self.failure_policy.decide("controller")
            if not decision.retry:
                return S.Errored(self._controller_error(exc)), f"start failed: {decision}"
            return S.Restarting(state.attempt, exc), f"start failed, {decision}"
        interval = self.scaling_policy.monitor_interval_s
        next_check = None if interval is None else self.clock() + interval
        return (S.Running(state.attempt, group, decision.size, next_resize_check=next_check),
                f"attempt {state.attempt} started with {decision.size} workers "
                f"({decision.reason})")

    def _on_running(self, state: S.Running):
        timeout = None
        if state.next_resize_check is not None:
            timeout = max(0.0, state.next_resize_check - self.clock())
        event = state.group.next_event(timeout)
        if event is None:
            return self._check_resize(state)
        if isinstance(event, Report):
            return self._on_report(state, event)
        if isinstance(event, Finished):
            state.finished[event.rank] = event.value
            if len(state.finished) < state.size:
                return state, f"rank {event.rank} returned"
            state.group.shutdown()
            return S.Finished(state.finished.get(0)), "every rank returned"
        if isinstance(event, Failed):
            return self._on_failure(state, event)
        raise TypeError(f"unexpected worker-group event {event!r}")

    def _on_report(self, state: S.Running, report: Report):
        arrived = state.rounds.setdefault(report.index, {})
        arrived[report.rank] = report
        if len(arrived) < state.size:
            return state, f"rank {report.rank} reported round {report.index}"
        del state.rounds[report.index]
        ordered = [arrived[r] for r in sorted(arrived)]
        metrics = ordered[0].metrics
        staged = any(r.staged for r in ordered)
        checkpoint = self.commit_round(state.attempt, report.index,
                                       ordered[0].checkpoint_dir_name, metrics) if staged else None
        if checkpoint is not None:
            self.manager.register_checkpoint(checkpoint, metrics)
        else:
            self.manager.record_report_without_checkpoint()
        for cb in self.callbacks:
            hook = getattr(cb, "after_report", None)
            if hook is not None:
                hook(run_context=None, metrics=[r.metrics for r in ordered], checkpoint=checkpoint)
        ack = Ack(report.index, checkpoint)
        for rank in arrived:
            state.group.ack(rank, ack)
        what = "with a checkpoint" if checkpoint is not None else "metrics only"
        return state, f"round {report.index} consolidated ({what})"

    def _on_failure(self, state: S.Running, first: Failed):
        failures = {first.rank: first}
        # Failures that arrived together are reported together (e.g. a node loss).
        while (event := state.group.next_event(0)) is not None:
            if isinstance(event, Failed):
                failures.setdefault(event.rank, event)
        state.group.shutdown()
        setup = [f for f in failures.values() if f.setup]
        if setup:
            # A backend setup can fail for good (a bad backend name) or by chance (a
            # rendezvous port taken meanwhile): a few retries, never charged to max_failures.
            self.setup_failures += 1
            if self.setup_failures > self.setup_retries:
                return (S.Errored(self._controller_error(setup[0].error.cause)),
                        f"backend setup failed on rank {setup[0].rank} "
                        f"{self.setup_failures} times")
            return (S.Restarting(state.attempt, setup[0].error),
                    f"backend setup failed on rank {setup[0].rank}, retrying")
        self.setup_failures = 0
        error = self._worker_group_error(failures)
        for cb in self.callbacks:
            hook = getattr(cb, "after_exception", None)
            if hook is not None:
                hook(run_context=None, worker_exceptions={r: f.error for r, f in failures.items()})
        # A group that failed only because its node was preempted is charged to the
        # preemption budget, not to max_failures.
        kind = "preemption" if all(f.preempted for f in failures.values()) else "worker_group"
        decision = self.failure_policy.decide(kind)
        ranks = ",".join(str(r) for r in sorted(failures))
        if not decision.retry:
            return S.Errored(error), f"rank {ranks} failed: {decision}"
        return S.Restarting(state.attempt, error), f"rank {ranks} failed: {decision}"

    def _check_resize(self, state: S.Running):
        if self.scaling_policy.monitor_interval_s is None:
            return state, "no event"
        capacity = self.factory.capacity(self.spec["resources_per_worker"])
        decision = self.scaling_policy.resize(state.size, capacity)
        state.next_resize_check = self.clock() + self.scaling_policy.monitor_interval_s
        if decision.size is None:
            return state, f"resize check: {decision.reason}"
        state.group.shutdown()
        return S.Resizing(state.attempt, decision.size), decision.reason

    def _on_restarting(self, state: S.Restarting):
        return S.Scheduling(state.attempt + 1), "restart from the latest checkpoint"

    def _on_resizing(self, state: S.Resizing):
        return S.Scheduling(state.attempt + 1), f"restart at the new size {state.size}"

    # ------------------------------------------------------------ errors
    @staticmethod
    def _worker_group_error(failures: dict):
        from reference.train._exceptions import WorkerGroupError

        lines = ["Training failed due to worker errors:"]
        for rank in sorted(failures):
            lines.append(f"[Rank {rank} Error Snippet]\n{failures[rank].describe()}")
        worker_failures = {
            rank: f.error if f.error is not None else RuntimeError(f.describe())
            for rank, f in failures.items()
        }
        return WorkerGroupError("\n".join(lines[1:]), worker_failures)

    @staticmethod
    def _controller_error(exc: BaseException):
        from reference.train._exceptions import ControllerError

        return ControllerError(exc)
