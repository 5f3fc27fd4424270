"""Fidelity of the deterministic simulation: schedules it explored, replayed on real
simcluster processes (the reference's DataParallelTrainer, the conformance probe's training
function, its SIGKILL fault plans), reach the verdict the simulation reached: the same
ending, the same checkpoint restored by every attempt, the same checkpoint folders left.

The schedules with a plan are those whose faults are all crashes before a report
(reference/train/simulation/fidelity.py); the others are the simulation's alone."""

from __future__ import annotations

import functools
import os

import pytest

from reference.train.simulation import Bounds
from reference.train.simulation.explore import schedules
from reference.train.simulation.fidelity import Verdict, fault_plan, verdict

BOUNDS = Bounds(workers=2, reports=3, faults=2, max_failures=1)


@functools.cache
def _plans() -> tuple[dict, int]:
    """Every explored schedule's plan -> the verdicts of its schedules; and how many
    schedules had none (seconds of exploring: done once, by the first test that asks, not
    while the module is collected)."""
    plans: dict = {}
    without = 0
    for fit, _ in schedules(BOUNDS, states=False):
        plan = fault_plan(fit)
        if plan is None:
            without += 1
        else:
            plans.setdefault(plan, set()).add(verdict(fit))
    return plans, without


def test_every_schedule_of_a_plan_reaches_one_verdict():
    # What the order of the ranks' steps was does not change the verdict: a plan
    # determines it, so one real run per plan checks every schedule of it.
    plans, without = _plans()
    assert len(plans) >= 10 and without > 0
    split = {plan: v for plan, v in plans.items() if len(v) != 1}
    assert split == {}


def _sample() -> list:
    """The plan with no fault, every plan of one crash (each rank, each report of attempt
    0), and the first three of two crashes (over the budget): both endings, restores from
    scratch and from each checkpoint."""
    by_size: dict = {}
    for plan in sorted(_plans()[0], key=lambda p: [(c.attempt, c.report, c.rank) for c in p]):
        by_size.setdefault(len(plan), []).append(plan)
    return [*by_size[0], *[p for p in by_size[1] if p[0].attempt == 0], *by_size[2][:3]]


def test_the_sample_covers_both_endings_and_every_restore():
    verdicts = [next(iter(_plans()[0][p])) for p in _sample()]
    assert {v.finished for v in verdicts} == {True, False}
    assert {r for v in verdicts for r in v.restored} == {None, 0, 1}
    assert len(verdicts) == 10


@pytest.fixture(scope="module")
def impl():
    """One reference adapter, and the embedded cluster its first fit starts, for every
    sample: a fault plan kills workers, never the cluster; a hung run throws it away."""
    from conformance.adapters.reference_adapter import ReferenceAdapter

    adapter = ReferenceAdapter()
    adapter.setup()
    yield adapter
    adapter.reset()


def _real_verdict(impl, plan, tmp_path) -> Verdict:
    from conformance import journal_checks, scenarios
    from conformance.probe import Fault

    folder = str(tmp_path)
    script = scenarios.new_script(impl, folder, steps=BOUNDS.reports, faults=tuple(
        Fault("sigkill", c.rank, c.report, c.attempt) for c in plan))
    run = scenarios.run(impl, script, num_workers=BOUNDS.workers, folder=folder,
                        failure_config=impl.train.FailureConfig(
                            max_failures=BOUNDS.max_failures), deadline_s=60)
    if run.outcome.hang:
        impl.reset()
    assert not run.outcome.hang, run.outcome.stacks
    restored = []
    for _, starts in sorted(journal_checks.attempts(run.events()).items()):
        steps = {(s["restored"] or {}).get("step") for s in starts}
        assert len(steps) == 1, starts
        restored.append(steps.pop())
    kept = sorted(int(name.rsplit("-", 1)[1]) for name in os.listdir(run.run_dir)
                  if name.startswith("ckpt-"))
    return Verdict(run.outcome.error is None, tuple(restored), tuple(kept))


@pytest.mark.slow  # a real fit on simcluster processes each
@pytest.mark.parametrize("index", range(10))
def test_a_sample_of_explored_schedules_gives_the_same_verdict_on_real_processes(
        index, impl, tmp_path):
    plan = _sample()[index]
    (simulated,) = _plans()[0][plan]
    assert _real_verdict(impl, plan, tmp_path) == simulated, plan
