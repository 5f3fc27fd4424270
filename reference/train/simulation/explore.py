"""Every schedule of a simulated fit up to a bound, each checked against the invariants.

Exploration is stateless model checking: run the fit from the start under a prefix of
choices, taking alternative 0 beyond it, then queue every other alternative of every choice
point past the prefix. Each sequence of choices is run exactly once, and fits are
independent (each has its own in-memory file system), so a schedule is reproduced from its
choices alone: the replay ID.

Reduction. At a choice point the ranks' own progress (stage a round's file, report it,
return) is offered for the lowest rank that can make progress only, while every fault is
offered at every point. This is sound for the invariants checked here because progress
steps of different ranks are independent: a step of one rank never enables or disables a
step of another (a rank waits only on the controller's acknowledgement, which comes once
every rank of the round reported, whatever their order); staging writes a file of the
rank's own; and the controller's state after a round's reports depends on the set of
reports, not their order (it consolidates a round only when the last one arrives, reading
them sorted by rank). So two schedules that differ only in the order of adjacent progress
steps of different ranks reach the same state, and exploring one order of them covers
both. Faults are not independent of anything (they change what the controller sees next),
so their position is explored in full: before, between and after every progress step.
`--no-reduction` on the command line offers every rank's progress at every point, to measure
what the reduction removes (tests/reference/simulation compares the end states of both).
"""

from __future__ import annotations

import dataclasses
import time

from reference.train.simulation import invariants
from reference.train.simulation.variants import VARIANTS
from reference.train.simulation.world import Bounds, Fit, simulate

_DIGITS = "0123456789abcdefghijklmnopqrstuvwxyz"


def replay_id(bounds: Bounds, choices: tuple) -> str:
    """`w2r2f1m1p-1n2-0010a`: the bounds, then one character per choice."""
    head = (f"w{bounds.workers}r{bounds.reports}f{bounds.faults}m{bounds.max_failures}"
            f"p{bounds.max_preemption_failures}n{bounds.ranks_per_node}"
            f"{'' if bounds.reduce else 'u'}")
    return f"{head}-{''.join(_DIGITS[c] for c in choices)}"


def parse_replay_id(text: str) -> tuple[Bounds, tuple]:
    import re

    match = re.fullmatch(r"w(\d+)r(\d+)f(\d+)m(-?\d+)p(-?\d+)n(\d+)(u?)-([0-9a-z]*)", text)
    if not match:
        raise ValueError(f"--replay {text!r}: expected an ID such as w2r2f1m1p-1n2-0010 (as "
                         "a violation prints it)")
    w, r, f, m, p, n, unreduced, digits = match.groups()
    return (Bounds(workers=int(w), reports=int(r), faults=int(f), max_failures=int(m),
                   max_preemption_failures=int(p), ranks_per_node=int(n),
                   reduce=not unreduced),
            tuple(_DIGITS.index(c) for c in digits))


@dataclasses.dataclass
class Violation:
    choices: tuple
    lines: list[str]
    fit: Fit

    @property
    def size(self) -> int:
        """The schedule's events that are not the default: faults and reorderings."""
        return sum(1 for c in self.choices if c)


@dataclasses.dataclass
class Exploration:
    schedules: int = 0
    choice_points: int = 0
    violations: list[Violation] = dataclasses.field(default_factory=list)
    seconds: float = 0.0


def run_one(bounds: Bounds, choices: tuple, variant: str | None = None) -> tuple[Fit, list]:
    options = VARIANTS[variant] if variant else {}
    fit = simulate(bounds, choices, **options)
    return fit, invariants.violations(fit)


def random_runs(bounds: Bounds, seed: int, runs: int,
                variant: str | None = None) -> Exploration:
    """`runs` schedules drawn at random (seeds seed, seed+1, ...): deeper than the exhaustive
    bound allows; each violation keeps the choices that replay it."""
    from reference.train.simulation.world import RandomScheduler

    options = VARIANTS[variant] if variant else {}
    result = Exploration()
    start = time.perf_counter()
    for n in range(runs):
        fit = simulate(bounds, scheduler=RandomScheduler(seed + n), **options)
        result.schedules += 1
        result.choice_points += len(fit.world.scheduler.trace)
        lines = invariants.violations(fit)
        if lines:
            result.violations.append(Violation(fit.world.scheduler.choices, lines, fit))
    result.seconds = time.perf_counter() - start
    return result


def schedules(bounds: Bounds, variant: str | None = None):
    """Every schedule of `bounds`, depth first: (fit, violations) of each."""
    pending: list[tuple] = [()]
    while pending:
        prefix = pending.pop()
        fit, lines = run_one(bounds, prefix, variant)
        trace, taken = fit.world.scheduler.trace, fit.world.scheduler.choices
        for at in range(len(trace) - 1, len(prefix) - 1, -1):
            for alternative in range(len(trace[at][1]) - 1, 0, -1):
                pending.append(taken[:at] + (alternative,))
        yield fit, lines


def explore(bounds: Bounds, variant: str | None = None, stop_at_first: bool = False,
            limit: int | None = None) -> Exploration:
    """Every schedule of `bounds` (at most `limit`), each checked."""
    result = Exploration()
    start = time.perf_counter()
    for fit, lines in schedules(bounds, variant):
        result.schedules += 1
        result.choice_points += len(fit.world.scheduler.trace)
        if lines:
            result.violations.append(Violation(fit.world.scheduler.choices, lines, fit))
            if stop_at_first:
                break
        if limit is not None and result.schedules >= limit:
            break
    result.seconds = time.perf_counter() - start
    return result


def minimal_violation(bounds: Bounds, variant: str | None = None) -> Violation | None:
    """A violation with the fewest faults, then the fewest non-default choices, then the
    shortest schedule: the fault bound is raised one at a time from 0, and every schedule
    of the first bound with a violation is looked at."""
    for faults in range(bounds.faults + 1):
        found = explore(dataclasses.replace(bounds, faults=faults), variant).violations
        if found:
            return min(found, key=lambda v: (v.size, len(v.choices), v.choices))
    return None
