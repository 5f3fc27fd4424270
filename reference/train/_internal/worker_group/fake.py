"""A scripted worker group for controller tests (shipped, so users can test policies too).

`FakeWorkerGroupFactory(scripts)` starts group number i from `scripts[i]`: a list of events
the group emits in order (`Report`, `Finished`, `Failed`). Acks are recorded, not sent.
`capacity` is a settable number of workers the fake cluster can hold.
"""

from __future__ import annotations

import collections

from reference.train._internal.worker_group.api import (
    Ack,
    Event,
    GroupSpec,
    GroupStartError,
    WorkerGroup,
    WorkerGroupFactory,
)


class FakeWorkerGroup(WorkerGroup):
    def __init__(self, spec: GroupSpec, events: list):
        self.spec = spec
        self.world_size = spec.num_workers
        self._events = collections.deque(events)
        self.acks: list[tuple[int, Ack]] = []
        self.shut_down = False
        self.graceful: bool | None = None
        #: raised by shutdown() (an on_shutdown that failed), after the group is down
        self.shutdown_error: BaseException | None = None

    def next_event(self, timeout: float | None) -> Event | None:
        if self._events:
            return self._events.popleft()
        return None

    def ack(self, rank: int, ack: Ack) -> None:
        self.acks.append((rank, ack))

    def shutdown(self, graceful: bool = True) -> None:
        if self.shut_down:
            return
        self.shut_down = True
        self.graceful = graceful
        if self.shutdown_error is not None:
            raise self.shutdown_error


class FakeWorkerGroupFactory(WorkerGroupFactory):
    def __init__(self, scripts: list, capacity: int = 1_000_000):
        self.scripts = list(scripts)
        self.capacity_value = capacity
        self.groups: list[FakeWorkerGroup] = []
        self.waits = 0

    def capacity(self, resources_per_worker: dict) -> int:
        return self.capacity_value

    def start(self, spec: GroupSpec) -> FakeWorkerGroup:
        if len(self.groups) >= len(self.scripts):
            raise GroupStartError(f"no script for group {len(self.groups)}")
        script = self.scripts[len(self.groups)]
        if isinstance(script, BaseException):
            self.groups.append(None)
            raise script
        group = FakeWorkerGroup(spec, script)
        self.groups.append(group)
        return group

    def wait_for_change(self, timeout: float) -> None:
        self.waits += 1
