"""From a simulated schedule to a fault plan a real cluster can run, and the verdict both
must agree on (tests/reference/simulation/test_fidelity.py replays a sample of explored
schedules on real simcluster processes and compares).

A plan is what the conformance suite's probe can inject: rank r of attempt a is SIGKILLed
before its report number i of that attempt (i counts from the attempt's first round). So a
schedule is expressible when each fault is a crash before the rank's report: while it
trains or after it staged its files but before report() was entered. The other faults of
the simulation have no plan and are covered by it alone: a rank that dies inside report()
(after its report, including after the round was committed but before the acknowledgement
reached it), a rank that dies after its last report but before its function returned,
a node lost or preempted with several ranks at once, and a failed commit.
"""

from __future__ import annotations

import dataclasses

from reference.train.simulation.world import Fit, checkpoint_folders


@dataclasses.dataclass(frozen=True)
class PlannedCrash:
    rank: int
    report: int  # the report index within the attempt, as the probe's Fault counts it
    attempt: int


@dataclasses.dataclass(frozen=True)
class Verdict:
    """What a real run and the simulation must agree on."""

    finished: bool
    #: the step each attempt restored from (None: from scratch), in attempt order
    restored: tuple
    #: the steps whose checkpoint folders are left
    kept: tuple


def fault_plan(fit: Fit) -> tuple[PlannedCrash, ...] | None:
    """The crashes of `fit` as a plan, or None when a fault of it has none (see above)."""
    starts = {a: start for a, start in fit.world.starts.items()}
    plan = []
    for fault in fit.world.faults:
        if fault[0] != "crash" or fault[4] not in ("run", "staged"):
            return None
        _, attempt, rank, step, _ = fault
        if step >= fit.world.bounds.reports:
            return None  # after its last report, before its function returned
        plan.append(PlannedCrash(rank, step - starts[attempt], attempt))
    return tuple(plan)


def verdict(fit: Fit) -> Verdict:
    from reference.train._internal.controller import states as S

    kept = sorted(int(p.rsplit("_", 1)[1]) for p in checkpoint_folders(fit.fs))
    restored = tuple(None if start == 0 else start - 1
                     for _, start in sorted(fit.world.starts.items()))
    return Verdict(isinstance(fit.state, S.Finished), restored, tuple(kept))
