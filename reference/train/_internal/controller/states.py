"""Controller states. This docstring is the state machine's specification.

    INITIALIZING --------------------------------------------> SCHEDULING(attempt 0)
    SCHEDULING   --fewer than min workers fit (elastic)-------> SCHEDULING (wait)
    SCHEDULING   --group started------------------------------> RUNNING
    SCHEDULING   --request can never fit / start failed, no budget--> ERRORED
    SCHEDULING   --start failed, controller budget left-------> RESTARTING
    RUNNING      --a report round completed (persist, register, ack)--> RUNNING
    RUNNING      --a round some ranks have not reported waited an interval (logged)--> RUNNING
    RUNNING      --every rank returned------------------------> FINISHED
    RUNNING      --a worker failed, failure budget left-------> RESTARTING
    RUNNING      --a worker failed, budget spent--------------> ERRORED
    RUNNING      --elastic: the feasible size changed---------> RESIZING
    RESTARTING / RESIZING --group torn down-------------------> SCHEDULING(attempt + 1)
    (to FINISHED / ERRORED) --validations queued or running---> SHUTTING_DOWN(next_state)
    SHUTTING_DOWN --a validation still queued or running------> SHUTTING_DOWN (poll, wait)
    SHUTTING_DOWN --every validation settled------------------> next_state
    any non-terminal state --Ctrl-C / abort()-----------------> ABORTED

A restart or resize always replaces the whole group; every worker of the new group starts
from the latest registered checkpoint. A resize is not charged to any failure budget.
Whenever an attempt ends (finished, failed, resized, aborted, or its start failed), its
group is shut down first and then every staging folder of that attempt is removed. A run
that ends waits for its validations after its group is gone, as Ray's controller does in
its ShuttingDownState (before_controller_shutdown); an aborted run does not (they stay
pending in the snapshot, for a resumed run).
"""

from __future__ import annotations

import dataclasses
from typing import Any


@dataclasses.dataclass
class Initializing:
    pass


@dataclasses.dataclass
class Scheduling:
    attempt: int


@dataclasses.dataclass
class Running:
    attempt: int
    group: Any
    size: int
    #: report index -> {rank: Report}
    rounds: dict = dataclasses.field(default_factory=dict)
    #: report index -> clock() when its first rank reported / when to log it waits again
    round_started: dict = dataclasses.field(default_factory=dict)
    report_warn_at: dict = dataclasses.field(default_factory=dict)
    #: rank -> return value of ranks whose function returned
    finished: dict = dataclasses.field(default_factory=dict)
    next_resize_check: float | None = None


@dataclasses.dataclass
class Restarting:
    attempt: int
    error: BaseException


@dataclasses.dataclass
class Resizing:
    attempt: int
    size: int


@dataclasses.dataclass
class ShuttingDown:
    next_state: Any

    @property
    def name(self) -> str:
        return "SHUTTING_DOWN"


@dataclasses.dataclass
class Finished:
    return_value: Any


@dataclasses.dataclass
class Errored:
    error: BaseException


@dataclasses.dataclass
class Aborted:
    pass


TERMINAL = (Finished, Errored, Aborted)


@dataclasses.dataclass(frozen=True)
class Transition:
    """One step of the controller: from which state to which, and why."""

    source: str
    target: str
    reason: str

    def __str__(self) -> str:
        return f"{self.source} -> {self.target}: {self.reason}"


def name(state) -> str:
    return getattr(state, "name", None) or type(state).__name__.upper()
