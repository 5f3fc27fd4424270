"""The controller: drives worker groups through the state machine in `states.py`.

Collaborators come in through `__init__` (worker-group factory, checkpoint manager,
policies, clock); nothing here knows which cluster runs the workers. `step()` performs one
transition and returns its record; `run()` steps until a terminal state.

Ordering hazards, and how they are kept:
- A report round is acknowledged to the ranks only after its checkpoint folder was
  committed (rename) and registered (snapshot written). A checkpoint acknowledged on every
  rank is therefore never lost by a later failure: the next group starts from the
  manager's latest checkpoint, which is at least that one. A round without a checkpoint
  may be consolidated on the thread that received its reports, while this one waits
  (inline_reports.py: the same `_on_report`, no thread switch); a checkpoint never is.
- A failed group is shut down (every process gone, resources free) before the next one is
  started, so two attempts never run at once.
- An attempt's staging folders are discarded only after its group is shut down (no rank
  of it can still be writing), whenever the attempt ends: a failed round leaves nothing
  behind, not even the files of a rank that staged and died before its Report was sent.
- Validations (validation.py) advance at every RUNNING step, which wakes at least every
  validation.POLL_INTERVAL_S while one is pending; a run that ends waits in SHUTTING_DOWN
  until each is settled, after its group is shut down.
- What a user should see happen is logged at INFO as Ray logs it (a group starting and
  started, a failure and the budget it is charged to, a resize) and recorded as train-level
  events through `events(name, **fields)` (on simcluster: `record_event`, so that fault
  plans can trigger on `train.report` and pictures can show reports and restarts).
  Events are recorded before the step's effects reach the ranks (a report's before its
  acknowledgement), so a fault triggered by one lands at a well-defined point.
- A round some ranks reported and others did not is logged every
  `report_warn_interval_s`, naming the ranks still missing (a rank that returned early or
  is stuck elsewhere hangs the others in report(), which is otherwise silent).
"""

from __future__ import annotations

import logging
import time
from typing import Any, Callable

from reference.train._internal.controller import states as S
from reference.train._internal.controller.collective_warn import (  # noqa: F401 - re-exported
    COLLECTIVE_WARN_INTERVAL_S_ENV_VAR,
    DEFAULT_COLLECTIVE_WARN_INTERVAL_S,
    collective_warn_interval_s,
)
from reference.train._internal.controller.errors import (
    BUDGETS,
    controller_error,
    log_failure,
    one_line,
    worker_group_error,
)
from reference.train._internal.controller.inline_reports import InlineReports
from reference.train._internal.controller.policies import FailurePolicy, ScalingPolicy
from reference.train._internal.storage.snapshot import to_jsonable
from reference.train._internal.worker_group.api import (
    Ack,
    BackendSetupError,
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
        discard_staging: Callable[[int], None] = lambda attempt: None,
        clock: Callable[[], float] = time.monotonic,
        callbacks: tuple = (),
        capacity_wait_s: float = 0.2,
        setup_retries: int = 2,
        report_warn_interval_s: float = DEFAULT_COLLECTIVE_WARN_INTERVAL_S,
        validations=None,
        events: Callable[..., None] | None = None,
    ):
        self.spec = spec
        #: events(name, **fields): where train-level events go (None: nowhere)
        self.events = events
        self.reports = 0  # rounds consolidated in this run, all attempts
        self.factory = factory
        self.manager = checkpoint_manager
        self.failure_policy = failure_policy
        self.scaling_policy = scaling_policy
        self.commit_round = commit_round
        #: discard_staging(attempt): remove every staging folder of that attempt
        self.discard_staging = discard_staging
        self.report_warn_interval_s = report_warn_interval_s
        self.clock = clock
        self.callbacks = callbacks
        self.capacity_wait_s = capacity_wait_s
        self.setup_retries = setup_retries
        self.setup_failures = 0
        #: a validation.ValidationManager when the trainer has a validation_config
        self.validations = validations
        self.state: Any = S.Initializing()
        self.transitions: list[S.Transition] = []

    # ------------------------------------------------------------ stepping
    def step(self) -> S.Transition:
        source = self.state
        handler = getattr(self, f"_on_{type(source).__name__.lower()}")
        try:
            target, reason = handler(source)
        except Exception as exc:  # noqa: BLE001 - the run ends with it, as in Ray
            target, reason = self._on_controller_exception(exc)
        if (isinstance(target, (S.Finished, S.Errored)) and self.validations is not None
                and self.validations.busy):
            reason = f"{reason}; waiting for the pending validations"
            target = S.ShuttingDown(target)
        self.state = target
        record = S.Transition(S.name(source), S.name(target), reason)
        self.transitions.append(record)
        logger.debug("%s", record)
        return record

    def _on_controller_exception(self, exc: Exception):
        """An error of the controller's own work (a snapshot write that failed, a
        callback that raised) ends the run as in Ray's control loop: a TrainingFailedError
        as it is, anything else as ControllerError, which no FailureConfig budget retries.
        The attempt's group is shut down as Ray's TrainController._shutdown does it, with the
        backend's on_shutdown (an error it raises is logged: the run has failed already)."""
        from reference.train._exceptions import TrainingFailedError

        reason = f"controller error: {type(exc).__name__}: {one_line(str(exc))}"
        if not isinstance(exc, TrainingFailedError):
            logger.exception("Error in control loop iteration: %s", exc)
            exc = controller_error(exc)
        if isinstance(self.state, S.Running):
            self._end_attempt(self.state)
        return S.Errored(exc), reason

    def run(self):
        try:
            while not isinstance(self.state, S.TERMINAL):
                self.step()
        except BaseException:
            self._shutdown_group()
            if self.validations is not None:
                self.validations.abort()
            self.state = S.Aborted()
            self._event("run_end", state="ABORTED")
            raise
        self._event("run_end", state=S.name(self.state))
        return self.state

    def _event(self, name: str, **fields) -> None:
        if self.events is None:
            return
        try:
            self.events(f"train.{name}", run=self.spec.get("experiment_name"), **fields)
        except Exception as exc:  # noqa: BLE001 - a lost event must not fail the run
            logger.debug("Could not record the event train.%s: %r", name, exc)

    def _shutdown_group(self) -> None:
        if isinstance(self.state, S.Running):  # abort: no backend shutdown, as in Ray
            self._end_attempt(self.state, graceful=False)

    def _end_attempt(self, state: S.Running, graceful: bool = True) -> BaseException | None:
        """Stop the attempt's workers (after the backend's on_shutdown when `graceful`),
        then drop what its unfinished rounds staged. Returns the error on_shutdown raised,
        if any (logged here; it fails a run that had succeeded, as in Ray)."""
        error = None
        try:
            state.group.shutdown(graceful=graceful)
        except Exception as exc:  # noqa: BLE001 - the workers are stopped all the same
            logger.error("The backend's on_shutdown failed: %s: %s", type(exc).__name__, exc)
            error = exc
        self._discard(state.attempt)
        return error

    def _discard(self, attempt: int) -> None:
        try:
            self.discard_staging(attempt)
        except Exception:  # noqa: BLE001 - litter must not fail a run (next fit removes it)
            logger.exception("Could not remove the staging folders of attempt %d", attempt)

    # ------------------------------------------------------------ handlers
    def _on_initializing(self, state):
        self._event("run_start", storage=getattr(self.spec.get("storage"), "experiment_fs_path",
                                                 None))
        return S.Scheduling(attempt=0), "start"

    def _on_scheduling(self, state: S.Scheduling):
        resources = self.spec["resources_per_worker"]
        decision = self.scaling_policy.initial(self.factory.capacity(resources))
        if decision.size is None:
            self.factory.wait_for_change(self.capacity_wait_s)
            return state, f"waiting: {decision.reason}"
        checkpoint = self.manager.latest_checkpoint
        group_spec = GroupSpec(num_workers=decision.size, attempt=state.attempt,
                               checkpoint=checkpoint, **self.spec)
        logger.info("Attempting to start training worker group of size %d with the following "
                    "resources: [%s] * %d", decision.size, resources, decision.size)
        try:
            group = self.factory.start(group_spec)
        except BackendSetupError as exc:
            self._discard(state.attempt)
            # A backend setup can fail for good (a bad backend name) or by chance (a
            # rendezvous port taken meanwhile): a few retries, never charged to max_failures.
            self.setup_failures += 1
            if self.setup_failures > self.setup_retries:
                return (S.Errored(controller_error(exc.cause)),
                        f"{exc} ({self.setup_failures} times)")
            return S.Restarting(state.attempt, exc), f"{exc}, retrying"
        except StartRejected as exc:
            self._discard(state.attempt)  # ranks that did start may have staged already
            return (S.Errored(controller_error(getattr(exc, "cause", None) or exc)),
                    f"cannot start: {exc}")
        except GroupStartError as exc:
            self._discard(state.attempt)
            decision = self.failure_policy.decide("controller")
            if not decision.retry:
                return S.Errored(controller_error(exc)), f"start failed: {decision}"
            return S.Restarting(state.attempt, exc), f"start failed, {decision}"
        self.setup_failures = 0
        restored = getattr(checkpoint, "path", None)
        logger.info("Started training worker group of size %d (attempt %d)%s.", decision.size,
                    state.attempt, f", restoring from checkpoint {restored}" if restored else "")
        self._event("attempt_start", attempt=state.attempt, world_size=decision.size,
                    checkpoint=restored)
        interval = self.scaling_policy.monitor_interval_s
        running = S.Running(state.attempt, group, decision.size, next_resize_check=None
                            if interval is None else self.clock() + interval)
        group.offer_inline(InlineReports(self, running))
        return running, (f"attempt {state.attempt} started with {decision.size} workers "
                         f"({decision.reason})")

    def _on_running(self, state: S.Running):
        wakeups = [*state.report_warn_at.values()]
        if self.validations is not None and self.validations.busy:
            # Validations advance at every step, as Ray polls them at every state update.
            wake = self.validations.poll()
            if wake is not None:
                wakeups.append(wake)
        if state.next_resize_check is not None:
            wakeups.append(state.next_resize_check)
        timeout = max(0.0, min(wakeups) - self.clock()) if wakeups else None
        event = state.group.next_event(timeout)
        if event is None:
            due = sorted(i for i, at in state.report_warn_at.items() if at <= self.clock())
            if due:
                return self._warn_unreported(state, due)
            return self._check_resize(state)
        if isinstance(event, Report):
            return self._on_report(state, event)
        if isinstance(event, Finished):
            state.finished[event.rank] = event.value
            if len(state.finished) < state.size:
                return state, f"rank {event.rank} returned"
            error = self._end_attempt(state)
            if error is not None:
                return S.Errored(controller_error(error)), "backend shutdown failed"
            return S.Finished(state.finished.get(0)), "every rank returned"
        if isinstance(event, Failed):
            return self._on_failure(state, event)
        raise TypeError(f"unexpected worker-group event {event!r}")

    def _on_report(self, state: S.Running, report: Report):
        if report.index not in state.round_started:
            now = self.clock()
            state.round_started[report.index] = now
            state.report_warn_at[report.index] = now + self.report_warn_interval_s
        arrived = state.rounds.setdefault(report.index, {})
        arrived[report.rank] = report
        if len(arrived) < state.size:
            return state, f"rank {report.rank} reported round {report.index}"
        del state.rounds[report.index]
        state.round_started.pop(report.index, None)
        state.report_warn_at.pop(report.index, None)
        ordered = [arrived[r] for r in sorted(arrived)]
        metrics = ordered[0].metrics
        staged = any(r.staged for r in ordered)
        if staged and not ordered[0].staged:
            # Rank 0 checks what it stores when it passes a checkpoint itself; when only
            # other ranks did, its metrics are checked here, before anything is committed,
            # and a failure is rank 0's (the attempt's staging is discarded as it ends).
            try:
                to_jsonable(metrics, "metrics")
            except TypeError as exc:
                return self._on_failure(state, Failed(
                    ordered[0].rank, error=exc,
                    traceback=f"TypeError: report(metrics=...) of rank 0: {exc}"))
        checkpoint = self.commit_round(state.attempt, report.index,
                                       ordered[0].checkpoint_dir_name, metrics) if staged else None
        if checkpoint is not None:
            # The first rank that passed a checkpoint decides the validation, as in Ray.
            validation = next((r.validation for r in ordered if r.staged), False)
            if not validation:
                self.manager.register_checkpoint(checkpoint, metrics)
            else:
                record = self.manager.register_checkpoint(checkpoint, metrics,
                                                          validation=validation)
                if self.validations is not None:
                    self.validations.submit(record, validation)
        else:
            self.manager.record_report_without_checkpoint()
        self.reports += 1
        self._event("report", attempt=state.attempt, round=report.index, report=self.reports,
                    checkpoint=getattr(checkpoint, "path", None))
        for cb in self.callbacks:
            hook = getattr(cb, "after_report", None)
            if hook is not None:
                hook(run_context=None, metrics=[r.metrics for r in ordered], checkpoint=checkpoint)
        state.group.ack_all(list(arrived), Ack(report.index, checkpoint))
        what = "with a checkpoint" if checkpoint is not None else "metrics only"
        return state, f"round {report.index} consolidated ({what})"

    def _warn_unreported(self, state: S.Running, due: list[int]):
        # Ray logs this from rank 0's wait only (so not at all while rank 0 is the one
        # missing); here any round that some rank waits in is logged.
        now, interval = self.clock(), self.report_warn_interval_s
        lines = []
        for index in due:
            arrived = sorted(state.rounds.get(index, ()))
            missing = sorted(set(range(state.size)) - set(arrived))
            logger.warning(
                "train.report() round %d: world ranks %s have waited %.2f s for world ranks "
                "%s to report too (%d workers). Every rank must call report() the same "
                "number of times; a rank that returned early or is stuck elsewhere keeps "
                "the others waiting. Set %s to change how often this is logged (now every "
                "%g s).",
                index, arrived, now - state.round_started[index], missing, state.size,
                COLLECTIVE_WARN_INTERVAL_S_ENV_VAR, interval)
            state.report_warn_at[index] = now + interval
            lines.append(f"round {index} waits for ranks {missing}")
        return state, "; ".join(lines)

    def _on_failure(self, state: S.Running, first: Failed):
        failures = {first.rank: first}
        # Failures that arrived together are reported together (e.g. a node loss).
        while (event := state.group.next_event(0)) is not None:
            if isinstance(event, Failed):
                failures.setdefault(event.rank, event)
        self._end_attempt(state)
        error = worker_group_error(failures)
        for cb in self.callbacks:
            hook = getattr(cb, "after_exception", None)
            if hook is not None:
                hook(run_context=None, worker_exceptions={r: f.error for r, f in failures.items()})
        # A group that failed only because its node was preempted is charged to the
        # preemption budget, not to max_failures.
        kind = "preemption" if all(f.preempted for f in failures.values()) else "worker_group"
        decision = self.failure_policy.decide(kind)
        ranks = ",".join(str(r) for r in sorted(failures))
        self._log_failure(state, failures, decision)
        if not decision.retry:
            return S.Errored(error), f"rank {ranks} failed: {decision}"
        return S.Restarting(state.attempt, error), f"rank {ranks} failed: {decision}"

    def _log_failure(self, state: S.Running, failures: dict, decision) -> None:
        causes = log_failure(failures, decision)
        self._event("failure", attempt=state.attempt, ranks=sorted(failures),
                    cause="; ".join(f"rank {r}: {c}" for r, c in causes.items()),
                    budget=BUDGETS[decision.kind], failures=decision.count,
                    limit=decision.limit, decision="retry" if decision.retry else "raise")

    def _check_resize(self, state: S.Running):
        if self.scaling_policy.monitor_interval_s is None:
            return state, "no event"
        capacity = self.factory.capacity(self.spec["resources_per_worker"])
        decision = self.scaling_policy.resize(state.size, capacity)
        state.next_resize_check = self.clock() + self.scaling_policy.monitor_interval_s
        if decision.size is None:
            return state, f"resize check: {decision.reason}"
        logger.info("Resizing the worker group from %d to %d workers: %s.", state.size,
                    decision.size, decision.reason)
        self._event("resize", attempt=state.attempt, old_size=state.size,
                    new_size=decision.size)
        self._end_attempt(state)
        return S.Resizing(state.attempt, decision.size), decision.reason

    def _on_shuttingdown(self, state: S.ShuttingDown):
        wake = self.validations.poll()
        if not self.validations.busy:
            return state.next_state, "every validation settled"
        self.validations.wait(wake)
        return state, "waiting for the pending validations"

    def _on_restarting(self, state: S.Restarting):
        return S.Scheduling(state.attempt + 1), "restart from the latest checkpoint"

    def _on_resizing(self, state: S.Resizing):
        return S.Scheduling(state.attempt + 1), f"restart at the new size {state.size}"
