"""Executing a `FaultPlan` on a cluster: `PlanRun`.

Design note. A plan listens to the cluster's history (`History.subscribe`): every event is
matched against the steps not yet fired, on the thread that recorded it. What a step does
then depends on whether it can be done without waiting:

- inline, right there, before the triggering event has any other effect: kill a worker
  (a signal), raise in a worker / preemption notices (a FAULT frame on the worker's
  socket), arm an upload fault, kill a node (SIGKILL to its tree, no waiting). A message
  is recorded before it is handed to its owner, so "kill worker X at its 3rd message"
  strikes before the driver can answer that message: replays see the same history.
- on the plan's own thread: everything that waits for the cluster (pause, resume,
  remove and add nodes, partitions) and time triggers, with follow-ups (resume after a
  pause, heal after a partition, removal at a preemption's deadline) scheduled there too.

Locks: the listener may run on the event loop holding the driver's lock, so the plan's own
lock is only held for bookkeeping, never while calling the driver. Each injected fault is a
`fault` event carrying `step` and `trigger`, recorded before the fault takes effect; a step
whose target is gone is recorded as `plan_skipped`. Among several matching targets the
step's own `random.Random(f"{seed}:{step}")` picks, so a replay picks the same one.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from fnmatch import fnmatchcase

from .._errors import ChannelClosed, SimclusterError
from .actions import Actions
from .plan import FaultPlan, Trigger, selects

INLINE = {"kill_worker", "raise_in_worker", "fail_upload", "slow_upload", "kill_node",
          "preempt_node"}


def matches(pattern, value) -> bool:
    if isinstance(pattern, str):
        return value is not None and fnmatchcase(str(value), pattern)
    return value == pattern and type(value) is type(pattern)


class PlanRun(Actions):
    """A plan running on a cluster: `wait(timeout)`, `injected`, `skipped`, `stop()`."""

    @staticmethod
    def check(plan: FaultPlan, provider) -> None:
        for i, (_, act) in enumerate(plan.steps):
            if act.kind in ("partition", "heal") and not provider.partitions:
                raise ValueError(f"FaultPlan step {i} ({act}) needs provider='netns'; this "
                                 f"cluster's provider is {provider.name!r}")

    def __init__(self, driver, plan: FaultPlan):
        self.driver, self.provider, self.plan = driver, driver.provider, plan
        self.history = self.driver.history
        self.injected: list[dict] = []
        self.skipped: list[dict] = []
        self._cv = threading.Condition()
        self._fired = [False] * len(plan.steps)
        self._open = len(plan.steps)          # steps, and follow-ups, not finished yet
        self._counts: list[dict] = [{} for _ in plan.steps]
        self._workers: dict[str, tuple[str, str]] = {}   # id -> (name, node), running ones
        self._names: dict[str, tuple[str, str]] = {}     # every worker seen
        self._tags: dict[str, dict] = {}                 # worker id -> its tags
        self._arms: list[tuple[int, str, tuple]] = []    # (step, worker glob or id, verdict)
        self._preempted: dict[str, float] = {}
        self._cut: set[str] = set()
        self._timers: list = []
        self._tick = itertools.count()
        self._stopped = False
        self._thread = threading.Thread(target=self._loop, name="simcluster-plan", daemon=True)

    def start(self) -> None:
        with self.driver.lock:
            for w in self.driver.workers.values():
                if w.announced:
                    self._workers[w.id] = self._names[w.id] = (w.name, w.node_id)
                    self._tags[w.id] = dict(w.tags)
        self.t0 = time.monotonic()
        self.history.record("plan_start", plan=self.plan.to_dict(), seed=self.plan.seed)
        self.driver.plan_runs.append(self)
        self.history.subscribe(self._on_event)
        self._thread.start()

    def start_clock(self) -> None:
        """Time triggers count from now (`Cluster(faults=...)`: once its first nodes are up)."""
        self.t0 = time.monotonic()
        for i, (trigger, _) in enumerate(self.plan.steps):
            if trigger.after_s is not None:
                self._schedule(self.t0 + trigger.after_s, self._fire, i, None)

    @property
    def finished(self) -> bool:
        return self._open == 0

    def wait(self, timeout: float | None = None) -> bool:
        """Block until every step has fired and acted (or was skipped); False on timeout."""
        with self._cv:
            return self._cv.wait_for(lambda: self._open == 0 or self._stopped, timeout) \
                and self._open == 0

    def unfired(self) -> list[dict]:
        """The steps that never acted: their trigger never came, or it came and the step
        found no target (`plan_skipped`). {step, action, trigger, optional, why}."""
        acted = {entry["step"] for entry in self.injected}
        skipped = {entry["step"]: entry["why"] for entry in self.skipped}
        out = []
        for i, (trigger, act) in enumerate(self.plan.steps):
            if i in acted:
                continue
            why = (f"it fired but found no target: {skipped[i]}" if i in skipped
                   else "its trigger never came" if not self._fired[i]
                   else "it had not acted yet when the plan stopped")
            out.append({"step": i, "action": str(act), "trigger": str(trigger),
                        "optional": trigger.optional, "why": why})
        return out

    def stop(self) -> None:
        """Stop firing; heal partitions this plan made; record each step that never acted
        as `plan_unfired`. Idempotent."""
        with self._cv:
            if self._stopped:
                return
            self._stopped = True
            self._cv.notify_all()
        for entry in self.unfired():
            self.history.record("plan_unfired", **entry)
        self.history.unsubscribe(self._on_event)
        if self in self.driver.plan_runs:
            self.driver.plan_runs.remove(self)
        if self._cut and not self.driver.closed:
            try:
                self._heal(-1, sorted(self._cut))
            except SimclusterError:
                pass
        if threading.current_thread() is not self._thread and self._thread.is_alive():
            self._thread.join(10.0)

    # -- triggers --------------------------------------------------------------------------
    def _on_event(self, event: dict) -> None:
        fire = []
        with self._cv:
            if self._stopped:
                return
            kind = event["event"]
            wid = event.get("worker")
            if kind == "worker_start":
                self._workers[wid] = self._names[wid] = (event["name"], event["node"])
                self._tags[wid] = event.get("tags") or {}
            elif kind == "worker_exit":
                self._workers.pop(wid, None)
            for i, (trigger, _) in enumerate(self.plan.steps):
                if self._fired[i] or trigger.event != kind or not self._match(trigger, event):
                    continue
                key = wid if trigger.per_worker else None
                self._counts[i][key] = self._counts[i].get(key, 0) + 1
                if self._counts[i][key] == trigger.nth:
                    self._fired[i] = True
                    fire.append(i)
            notice = self._preempted.get(event.get("node")) if kind == "worker_start" else None
        if notice is not None:
            self._send(wid, ("preempt", notice))
        for i in fire:
            if self.plan.steps[i][1].kind in INLINE:
                self._act(i, event)
            else:
                self._schedule(0.0, self._act, i, event)

    def _match(self, trigger: Trigger, event: dict) -> bool:
        for field, pattern in trigger.match.items():
            if field == "worker" and isinstance(pattern, str):
                wid = event.get("worker")
                if wid is None or not selects(pattern, self._names.get(wid, (wid,))[0],
                                              self._tags.get(wid, {})):
                    return False
                continue
            if field == "node" and "node" not in event:
                value = self._names.get(event.get("worker"), (None, None))[1]
            elif field not in event:  # the triggering worker's tags (rank, attempt, ...)
                value = self._tags.get(event.get("worker"), {}).get(field)
            else:
                value = event.get(field)
            if not matches(pattern, value):
                return False
        return True

    def _fire(self, i: int, event: dict | None) -> None:
        with self._cv:
            if self._fired[i]:
                return
            self._fired[i] = True
        self._act(i, event)

    # -- bookkeeping ---------------------------------------------------------------------------
    def _record(self, i: int, action: str, cause: dict, **fields) -> None:
        self.injected.append({"step": i, "action": action, **fields})
        self.history.record("fault", action=action, **fields, **cause)

    def _skip(self, i: int, why: str) -> None:
        self.skipped.append({"step": i, "why": why})
        self.history.record("plan_skipped", step=i, action=self.plan.steps[i][1].kind, why=why)

    def _send(self, wid: str, msg: tuple) -> None:
        try:
            self.driver.send_fault(wid, msg)
        except ChannelClosed:
            pass  # it exited meanwhile: nothing left to tell

    def upload_verdict(self, worker_id: str, name: str, path: str):
        """(verdict, step) for an upload of this worker, consuming the first armed fault
        that matches it; None if none does (event-loop thread)."""
        with self._cv:
            for k, (step, target, verdict) in enumerate(self._arms):
                if target == worker_id or selects(target, name, self._tags.get(worker_id, {})):
                    del self._arms[k]
                    return verdict, step
        return None

    def _follow_up(self, fn, *args, **kwargs) -> None:
        try:
            fn(*args, **kwargs)
        except (SimclusterError, TimeoutError):
            pass  # e.g. the node went down meanwhile
        self._finish()

    def _schedule(self, due: float, fn, *args, **kwargs) -> None:
        with self._cv:
            if fn == self._follow_up:
                self._open += 1
            heapq.heappush(self._timers, (due, next(self._tick), fn, args, kwargs))
            self._cv.notify_all()

    def _finish(self) -> None:
        with self._cv:
            self._open -= 1
            done = self._open == 0
            self._cv.notify_all()
        if done:
            self.history.record("plan_done", seconds=round(time.monotonic() - self.t0, 3))

    def _loop(self) -> None:
        while True:
            with self._cv:
                while not self._stopped:
                    now = time.monotonic()
                    if self._timers and self._timers[0][0] <= now:
                        break
                    # bounded: a wait past TIMEOUT_MAX raises OverflowError (plans are
                    # bounded by `limits.MAX_SECONDS`; this keeps the thread alive anyway)
                    self._cv.wait(min(self._timers[0][0] - now, threading.TIMEOUT_MAX)
                                  if self._timers else None)
                if self._stopped:
                    return
                _, _, fn, args, kwargs = heapq.heappop(self._timers)
            fn(*args, **kwargs)
