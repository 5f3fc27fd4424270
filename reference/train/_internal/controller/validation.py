"""Running the trainer's validation function on reported checkpoints (Ray Train 2.60's
ValidationManager, execution/checkpoint/validation_manager.py).

Design note
-----------
Statuses: a report with `validation=` registers its checkpoint PENDING_VALIDATION (the
manager protects it from retention and lists it in the snapshot's
`pending_training_results`); `submit` queues it here. `poll()` (called by the controller at
every step while there is work) kills the tasks past their `timeout_s`, settles the tasks
that ended, then starts queued ones while fewer than MAX_IN_FLIGHT_VALIDATIONS run. A
settled task becomes VALIDATED (its returned dict merged into the checkpoint's metrics and
the checkpoint re-placed in the score order, then retention), VALIDATION_FAILED or
VALIDATION_TIMEOUT through `CheckpointManager.record_validation`, which rewrites the
snapshot; the workers' `get_all_reported_checkpoints(VALIDATED)` waits on that.

Where it runs: each validation is its own process on the cluster, started by a `launcher`
(worker_group/validation_task.py) with the resources of `ray_remote_kwargs`, never in a
training worker. Its timeout counts from when it was started here, the resources it waits
for included (Ray counts from the task's submission).

Ordering hazards: an aborted run (Ctrl-C, a callback that raised) kills the running tasks
without settling them, so they stay pending in the snapshot and a resumed run queues them
again (`__init__`, as Ray's `_requeue_incomplete_validations`); a run that finishes or
errors waits for every queued and running validation first (Ray's
before_controller_shutdown), the controller's SHUTTING_DOWN state.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import time
from typing import Any, Callable

from reference.train._internal.storage.snapshot import to_jsonable

logger = logging.getLogger(__name__)

#: Ray 2.60's validation_manager.py values
MAX_IN_FLIGHT_VALIDATIONS = 1
#: how often pending validations are checked while nothing else wakes the controller
#: (Ray polls at every controller iteration, and every 1 s while shutting down)
POLL_INTERVAL_S = 0.1


def merged_fn_kwargs(config, spec) -> dict:
    """The keyword arguments of one validation: the config's defaults, overridden by the
    report's `ValidationTaskConfig` (a dict when restored from a snapshot)."""
    defaults = dict(config.task_config.fn_kwargs or {})
    if spec is True:
        return defaults
    return {**defaults, **dict(_spec_field(spec, "fn_kwargs") or {})}


def task_timeout_s(config, spec) -> float | None:
    """A report's ValidationTaskConfig decides the timeout (its None included), as in Ray;
    `validation=True` takes the config's."""
    if spec is True:
        return config.task_config.timeout_s
    return _spec_field(spec, "timeout_s")


def _spec_field(spec, name: str):
    return spec.get(name) if isinstance(spec, dict) else getattr(spec, name)


def run_validation_fn(fn: Callable, fn_kwargs: dict, checkpoint) -> dict:
    """What the validation process runs; its exception fails the validation."""
    metrics = fn(checkpoint, **fn_kwargs)
    if not isinstance(metrics, dict):  # Ray's message
        raise ValueError("The validation function must return a dictionary of metrics. "
                         f"Got {type(metrics)} instead.")
    return metrics


@dataclasses.dataclass(eq=False)
class ValidationTask:
    dir_name: str
    checkpoint: Any
    fn_kwargs: dict
    timeout_s: float | None
    started: float | None = None
    #: the launcher's handle once the process runs (None while it waits for resources)
    handle: Any = None


class ValidationManager:
    """Queues and runs validations; `launcher` starts and watches their processes:
    `start(fn, args, name) -> handle | None` (None: the resources are busy, try again),
    `outcome(handle) -> None | (ok, value)` (value: the dict, or the error text),
    `kill(handle)`, `wait(handles, timeout)`."""

    def __init__(self, launcher, checkpoint_manager, config, *,
                 clock: Callable[[], float] = time.monotonic,
                 max_in_flight: int = MAX_IN_FLIGHT_VALIDATIONS):
        self.launcher, self.manager, self.config = launcher, checkpoint_manager, config
        self.clock, self.max_in_flight = clock, max_in_flight
        self.queue: collections.deque[ValidationTask] = collections.deque()
        self.running: list[ValidationTask] = []
        for record, spec in checkpoint_manager.pending_validations:
            if spec:
                logger.info("Queuing the incomplete validation of checkpoint %r again.",
                            record.dir_name)
                self.submit(record, spec)

    @property
    def busy(self) -> bool:
        return bool(self.queue or self.running)

    def submit(self, record, spec) -> None:
        self.queue.append(ValidationTask(
            record.dir_name, self.manager.checkpoint_of(record),
            merged_fn_kwargs(self.config, spec), task_timeout_s(self.config, spec)))

    def poll(self) -> float | None:
        """Advance every validation; the clock time by which to poll again (None: idle)."""
        now = self.clock()
        for task in list(self.running):
            if task.timeout_s is not None and now - task.started >= task.timeout_s:
                logger.warning("Validation for checkpoint %s exceeded timeout_s=%ss. "
                               "Cancelling.", task.checkpoint, task.timeout_s)
                if task.handle is not None:
                    self.launcher.kill(task.handle)
                logger.info("Validation for checkpoint %s was cancelled due to timeout.",
                            task.checkpoint)
                self._settle(task, "VALIDATION_TIMEOUT", {})
            elif task.handle is None:
                self._launch(task)
            else:
                outcome = self.launcher.outcome(task.handle)
                if outcome is not None:
                    self._finished(task, *outcome)
        while self.queue and len(self.running) < self.max_in_flight:
            task = self.queue.popleft()
            task.started = self.clock()
            self.running.append(task)
            self._launch(task)
            logger.info("Launched async validation task for checkpoint %s", task.checkpoint)
        if not self.busy:
            return None
        wake = self.clock() + POLL_INTERVAL_S
        deadlines = [t.started + t.timeout_s for t in self.running if t.timeout_s is not None]
        return min([wake, *deadlines])

    def wait(self, until: float | None) -> None:
        """Block until a running validation ends or the clock reaches `until`."""
        timeout = None if until is None else max(0.0, until - self.clock())
        self.launcher.wait([t.handle for t in self.running if t.handle is not None], timeout)

    def abort(self) -> None:
        """Kill the running validations without settling them: they stay pending in the
        snapshot, for a resumed run to queue again (Ray's before_controller_abort)."""
        for task in self.running:
            if task.handle is not None:
                self.launcher.kill(task.handle)
        self.running.clear()
        self.queue.clear()

    def _launch(self, task: ValidationTask) -> None:
        try:
            task.handle = self.launcher.start(
                run_validation_fn, (self.config.fn, task.fn_kwargs, task.checkpoint),
                name=f"validation:{task.dir_name}")
        except Exception as exc:  # noqa: BLE001 - e.g. resources no node has: fails this one
            logger.error("Validation failed for checkpoint %s: its task could not start: "
                         "%s: %s", task.checkpoint, type(exc).__name__, exc)
            self._settle(task, "VALIDATION_FAILED", {})

    def _finished(self, task: ValidationTask, ok: bool, value) -> None:
        if ok:
            try:  # the merged metrics go into the snapshot: check them before they count
                to_jsonable(value, "the validation function's metrics")
            except TypeError as exc:
                ok, value = False, str(exc)
        if not ok:
            logger.error("Validation failed for checkpoint %s\n%s", task.checkpoint, value)
            self._settle(task, "VALIDATION_FAILED", {})
        else:
            self._settle(task, "VALIDATED", value)

    def _settle(self, task: ValidationTask, status: str, metrics: dict) -> None:
        if task in self.running:
            self.running.remove(task)
        self.manager.record_validation(task.dir_name, status, metrics)
