"""Metrics-only report rounds, consolidated on the thread that receives the reports.

A round without a checkpoint is a barrier and some bookkeeping (the manager's report count,
the `train.report` event, the acknowledgement): microseconds of work, which a handover to
the controller's thread and back would multiply. While the controller waits for events,
its group's inbox (worker_group/inbox.py) gives such a report to `InlineReports`, which
runs the controller's own `_on_report` on the delivering thread and records the transition
as `step()` would: the same code, so every rule of a round holds as it does on the
controller's thread, in the same order (the event before the acknowledgement).

What is never handled here, and why:
- a report with a checkpoint, or one of a round in which any rank passed one: the round
  commits files (slow, and a commit must come before any rank's acknowledgement; that
  stays on the controller's thread, where a failed commit fails the attempt);
- anything while a user callback has `after_report`: user code may be slow or wait for
  the cluster, which must not happen on its delivery thread;
- any event of a state other than the Running state the handler was made for.
"""

from __future__ import annotations

import logging

from reference.train._internal.controller import states as S
from reference.train._internal.worker_group.api import Report

logger = logging.getLogger("reference.train._internal.controller.controller")


class InlineReports:
    def __init__(self, controller, state: S.Running):
        self.controller, self.state = controller, state
        self.enabled = not any(getattr(cb, "after_report", None) is not None
                               for cb in controller.callbacks)

    def accepts(self, event) -> bool:
        if not (self.enabled and isinstance(event, Report) and not event.staged
                and self.controller.state is self.state):
            return False
        arrived = self.state.rounds.get(event.index)
        return not arrived or not any(r.staged for r in arrived.values())

    def handle(self, event: Report) -> float | None:
        """The round's handling, as the controller's step would do it; returns how soon
        the controller wants to wake (its earliest "round still waits" warning)."""
        controller, state = self.controller, self.state
        target, reason = controller._on_report(state, event)
        if target is not state:  # not for a metrics-only round; a guard, not a path
            raise RuntimeError(f"a metrics-only report moved the controller to {target!r}")
        record = S.Transition(S.name(state), S.name(state), reason)
        controller.transitions.append(record)
        logger.debug("%s", record)
        warn = state.report_warn_at
        return max(0.0, min(warn.values()) - controller.clock()) if warn else None
