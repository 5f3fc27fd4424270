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
from reference.train.simulation.world import Bounds, Fit, Scheduler, simulate

_DIGITS = "0123456789abcdefghijklmnopqrstuvwxyz"


def replay_id(bounds: Bounds, choices: tuple) -> str:
    """`w2r2f1m1p-1n2-0010a`: the bounds, then one character per choice."""
    head = (f"w{bounds.workers}r{bounds.reports}f{bounds.faults}m{bounds.max_failures}"
            f"p{bounds.max_preemption_failures}n{bounds.ranks_per_node}"
            f"{'' if bounds.keep is None else f'k{bounds.keep}'}"
            f"{'' if bounds.reduce else 'u'}")
    return f"{head}-{''.join(_DIGITS[c] for c in choices)}"


def parse_replay_id(text: str) -> tuple[Bounds, tuple]:
    import re

    match = re.fullmatch(r"w(\d+)r(\d+)f(\d+)m(-?\d+)p(-?\d+)n(\d+)(?:k(\d+))?(u?)-([0-9a-z]*)",
                         text)
    if not match:
        raise ValueError(f"--replay {text!r}: expected an ID such as w2r2f1m1p-1n2-0010 (as "
                         "a violation prints it)")
    w, r, f, m, p, n, keep, unreduced, digits = match.groups()
    return (Bounds(workers=int(w), reports=int(r), faults=int(f), max_failures=int(m),
                   max_preemption_failures=int(p), ranks_per_node=int(n),
                   keep=None if keep is None else int(keep), reduce=not unreduced),
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
    #: runs that ended at a state met before
    pruned: int = 0
    #: distinct states met (with states=True)
    states: int = 0
    #: complete schedules those runs stand for (with states=True; else = schedules)
    covered: int = 0


def run_one(bounds: Bounds, choices: tuple, variant: str | None = None,
            seen: set | None = None, lenient: bool = False) -> tuple[Fit, list]:
    options = VARIANTS[variant] if variant else {}
    fit = simulate(bounds, scheduler=Scheduler(choices, seen, lenient), **options)
    return fit, ([] if fit.pruned else invariants.violations(fit))


class _DrawScheduler(Scheduler):
    """Each choice drawn by Hypothesis (`data.draw`), so that it can shrink a failing
    schedule: towards alternative 0 (the default order, no fault) and towards fewer
    choices."""

    def __init__(self, data):
        super().__init__(())
        self._data = data

    def choose(self, options: list[str], state=None) -> int:
        from hypothesis import strategies as st

        pick = self._data.draw(st.integers(0, len(options) - 1)) if len(options) > 1 else 0
        self.trace.append((pick, tuple(options)))
        return pick


def random_runs(bounds: Bounds, seed: int, runs: int,
                variant: str | None = None) -> Exploration:
    """`runs` schedules drawn by Hypothesis from `seed`: deeper than the exhaustive bound
    allows. A violation stops the drawing; Hypothesis then shrinks it (to the default
    order and fewer choices) and `shrink` below finishes the job, so the one violation
    kept is small and replays from its choices."""
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as use_seed
    from hypothesis import strategies as st

    options = VARIANTS[variant] if variant else {}
    result = Exploration()
    failing: list[Violation] = []
    start = time.perf_counter()

    @use_seed(seed)
    @settings(max_examples=runs, database=None, deadline=None, derandomize=False,
              phases=(Phase.generate, Phase.shrink), report_multiple_bugs=False,
              suppress_health_check=list(HealthCheck), print_blob=False)
    @given(st.data())
    def one(data):
        fit = simulate(bounds, scheduler=_DrawScheduler(data), **options)
        result.schedules += 1
        result.choice_points += len(fit.world.scheduler.trace)
        lines = invariants.violations(fit)
        if lines:
            failing.append(Violation(fit.world.scheduler.choices, lines, fit))
            raise AssertionError(lines[0])

    try:
        one()
    except AssertionError:
        pass
    if failing:
        # The last failing example Hypothesis ran is the one it shrank to.
        result.violations.append(shrink(bounds, failing[-1], variant))
    result.seconds = time.perf_counter() - start
    result.covered = result.schedules
    return result


def shrink(bounds: Bounds, violation: Violation, variant: str | None = None) -> Violation:
    """A smaller schedule that still breaks an invariant: each non-default choice is
    lowered (to 0 first: the default) while some invariant still fails, until no single
    change helps; then the choices past the last non-default one are dropped (the default
    continues there anyway)."""
    best = violation
    improved = True
    while improved:
        improved = False
        for at in [i for i, c in enumerate(best.choices) if c]:
            for lower in range(best.choices[at]):
                candidate = best.choices[:at] + (lower,) + best.choices[at + 1:]
                fit, lines = run_one(bounds, candidate, variant, lenient=True)
                if lines:
                    best, improved = Violation(fit.world.scheduler.choices, lines, fit), True
                    break
            if improved:
                break
    last = max((i for i, c in enumerate(best.choices) if c), default=-1)
    fit, lines = run_one(bounds, best.choices[:last + 1], variant)
    return Violation(best.choices[:last + 1], lines, fit) if lines else best


END = "end"


class StateGraph:
    """The states an exploration met and, for each, where each of its alternatives led
    (the next state, or END: the fit ended). `schedules(key)` counts the complete schedules
    from a state: the schedules the exploration covered without running each."""

    def __init__(self):
        self.edges: dict[int, dict[int, object]] = {}
        self.root: object | None = None

    def add(self, source, alternative: int, target) -> None:
        if source is None:
            self.root = target
        else:
            self.edges.setdefault(source, {})[alternative] = target

    def schedules(self) -> int:
        if self.root is None:
            return 0
        counts: dict = {END: 1}
        stack = [self.root]
        while stack:  # depth first, children before parents (no recursion limit)
            key = stack[-1]
            if key in counts:
                stack.pop()
                continue
            todo = [t for t in self.edges.get(key, {}).values() if t not in counts]
            if todo:
                stack.extend(todo)
                continue
            counts[key] = sum(counts[t] for t in self.edges.get(key, {}).values())
            stack.pop()
        return counts[self.root]


def schedules(bounds: Bounds, variant: str | None = None, states: bool = True,
              graph: StateGraph | None = None):
    """Every schedule of `bounds`, depth first: (fit, violations) of each run.

    With `states` (explore.py's docstring, "States"), a run that reaches a state an earlier
    run reached ends there (its fit is `pruned`, with no verdict of its own: the earlier
    run's continuations are that state's), and `graph` collects the state graph."""
    seen = set() if states else None
    pending: list[tuple] = [((), None, 0)]  # prefix, the state it branches from, alternative
    while pending:
        prefix, source, alternative = pending.pop()
        fit, lines = run_one(bounds, prefix, variant, seen)
        scheduler = fit.world.scheduler
        trace, taken = scheduler.trace, scheduler.choices
        if graph is not None:
            previous, pick = source, alternative
            for at, key in scheduler.keys:
                graph.add(previous, pick, key)
                previous, pick = key, (taken[at] if at < len(taken) else None)
            if not fit.pruned:
                graph.add(previous, pick, END)
        keyed = dict(scheduler.keys)
        for at in range(len(trace) - 1, len(prefix) - 1, -1):
            for other in range(len(trace[at][1]) - 1, 0, -1):
                pending.append((taken[:at] + (other,), keyed.get(at), other))
        yield fit, lines


def explore(bounds: Bounds, variant: str | None = None, stop_at_first: bool = False,
            limit: int | None = None, states: bool = True) -> Exploration:
    """Every schedule of `bounds` (at most `limit` runs), each checked; with `states`, a
    state met twice is explored once (the figures then count the states and the schedules
    covered)."""
    result = Exploration()
    graph = StateGraph() if states else None
    start = time.perf_counter()
    for fit, lines in schedules(bounds, variant, states=states, graph=graph):
        result.schedules += 1
        result.pruned += fit.pruned
        result.choice_points += len(fit.world.scheduler.trace)
        if lines:
            result.violations.append(Violation(fit.world.scheduler.choices, lines, fit))
            if stop_at_first:
                break
        if limit is not None and result.schedules >= limit:
            break
    result.seconds = time.perf_counter() - start
    if graph is not None:
        result.states = len(graph.edges)
        result.covered = graph.schedules()
    else:
        result.covered = result.schedules
    return result


def minimal_violation(bounds: Bounds, variant: str | None = None) -> Violation | None:
    """A violation with the fewest faults, and small: the fault bound is raised one at a
    time from 0; at the first bound with a violation, the smallest violation the
    exploration found (fewest non-default choices, then shortest) is shrunk (`shrink`)."""
    for faults in range(bounds.faults + 1):
        at = dataclasses.replace(bounds, faults=faults)
        found = explore(at, variant).violations
        if found:
            smallest = min(found, key=lambda v: (v.size, len(v.choices), v.choices))
            return shrink(at, smallest, variant)
    return None
