"""Failure and scaling policies: plain objects that turn observations into decisions.

FailurePolicy keeps one budget per kind, as the Train API does: worker-group failures
against `max_failures`, controller failures against `controller_failure_limit`, failures
caused by a preempted node against `max_preemption_failures`; -1 is unlimited and N allows
N retries (a failure is fatal once the count exceeds the limit).
ScalingPolicy decides a group's size: fixed `num_workers`, or elastic `(min, max)` that
takes what fits up to max, waits below min, and resizes when the feasible size changes.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class FailureDecision:
    retry: bool
    kind: str
    count: int
    limit: int

    def __str__(self) -> str:
        limit = "unlimited" if self.limit < 0 else self.limit
        verdict = "retry" if self.retry else "raise"
        return f"{verdict} ({self.kind} failure {self.count}, max allowed {limit})"


class FailurePolicy:
    def __init__(self, max_failures: int = 0, controller_failure_limit: int = -1,
                 max_preemption_failures: int = -1):
        self.limits = {"worker_group": max_failures, "controller": controller_failure_limit,
                       "preemption": max_preemption_failures}
        self.counts = {kind: 0 for kind in self.limits}

    @classmethod
    def from_config(cls, failure_config) -> FailurePolicy:
        return cls(failure_config.max_failures, failure_config.controller_failure_limit,
                   failure_config.max_preemption_failures)

    def decide(self, kind: str) -> FailureDecision:
        self.counts[kind] += 1
        count, limit = self.counts[kind], self.limits[kind]
        return FailureDecision(retry=limit < 0 or count <= limit, kind=kind, count=count,
                               limit=limit)


@dataclasses.dataclass(frozen=True)
class SizeDecision:
    """`size` workers, or None: wait (not enough resources yet)."""

    size: int | None
    reason: str


class ScalingPolicy:
    def __init__(self, min_workers: int, max_workers: int, monitor_interval_s: float | None):
        self.min_workers, self.max_workers = min_workers, max_workers
        self.monitor_interval_s = monitor_interval_s  # None: fixed size, never resize

    @classmethod
    def from_config(cls, scaling_config) -> ScalingPolicy:
        interval = (scaling_config.elastic_resize_monitor_interval_s
                    if scaling_config.elasticity_enabled else None)
        return cls(scaling_config.min_workers, scaling_config.max_workers, interval)

    @property
    def elastic(self) -> bool:
        return self.monitor_interval_s is not None

    def initial(self, capacity: int) -> SizeDecision:
        if not self.elastic:
            return SizeDecision(self.max_workers, "fixed size")
        size = min(capacity, self.max_workers)
        if size < self.min_workers:
            return SizeDecision(None, f"{capacity} workers fit, fewer than min_workers="
                                      f"{self.min_workers}")
        return SizeDecision(size, f"{capacity} workers fit (max_workers={self.max_workers})")

    def resize(self, current: int, capacity: int) -> SizeDecision:
        """While running: a new size, or None to keep the current one."""
        if not self.elastic:
            return SizeDecision(None, "fixed size")
        size = min(capacity, self.max_workers)
        if size == current or size < self.min_workers:
            return SizeDecision(None, f"{capacity} workers fit; keeping {current}")
        return SizeDecision(size, f"{capacity} workers fit; resizing {current} -> {size}")
