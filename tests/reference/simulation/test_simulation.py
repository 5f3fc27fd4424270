"""The deterministic simulation of a fit (reference.train.simulation, `python -m
reference.simulate`): same choices, same history; every schedule of small bounds keeps the
invariants on the reference; every broken variant is caught with a small schedule that its
replay ID reproduces; the reduction loses no end state."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest

from reference.train.simulation import (
    VARIANTS,
    Bounds,
    explore,
    invariants,
    minimal_violation,
    parse_replay_id,
    replay_id,
    run_one,
    simulate,
)
from reference.train.simulation.explore import random_runs, schedules
from reference.train.simulation.world import RandomScheduler

SMALL = Bounds(workers=2, reports=2, faults=2, max_failures=1)


def _end_state(fit) -> tuple:
    """What a schedule leads to: the ending, what was committed and restored, what each rank
    was acknowledged, and the files left."""
    import pyarrow.fs as pafs

    files = sorted(i.path for i in fit.fs.get_file_info(pafs.FileSelector("/sim",
                                                                           recursive=True)))
    return (type(fit.state).__name__, type(fit.error).__name__, tuple(fit.world.committed),
            tuple(sorted(fit.world.restored.items())),
            tuple(sorted(set(fit.world.acked))), tuple(files))


def test_the_same_choices_give_the_same_history_byte_for_byte():
    for seed in range(20):
        first = simulate(SMALL, scheduler=RandomScheduler(seed))
        again = simulate(SMALL, fit_choices := first.world.scheduler.choices)
        assert again.world.history == first.world.history, (seed, fit_choices)
        assert _end_state(again) == _end_state(first)
        assert simulate(SMALL, scheduler=RandomScheduler(seed)).world.history == \
            first.world.history


def test_every_schedule_of_small_bounds_keeps_every_invariant_on_the_reference():
    result = explore(SMALL)
    assert result.violations == [], [v.lines for v in result.violations[:3]]
    assert result.covered == 1085  # faults at every point: crashes, node loss, uploads


def test_the_fault_vocabulary_reaches_every_kind_and_both_endings():
    seen, endings, upload_errors = set(), set(), set()
    for fit, _ in schedules(SMALL, states=False):
        text = "\n".join(fit.world.history)
        seen |= {kind for kind, mark in (("crash", " dies"), ("node", " is lost"),
                                         ("preempt", " is preempted"), ("upload", " fails"),
                                         ("restart", "from checkpoint_")) if mark in text}
        endings.add(fit.world.history[-1])
        if fit.world.upload_failed and fit.state is not None:
            upload_errors.add(type(getattr(fit.state, "error", None)).__name__)
    assert seen == {"crash", "node", "preempt", "upload", "restart"}, seen
    assert endings == {"end: FINISHED", "end: ERRORED"}, endings
    # a failed upload is the controller's own work failing: the run ends as ControllerError
    assert upload_errors == {"ControllerError"}, upload_errors


#: the invariant that must catch each variant first, and the bounds it needs beyond SMALL
CAUGHT_BY = {
    "ack-before-commit": ("acknowledged_checkpoints_kept", {}),
    "charge-twice": ("outcome", {}),
    "drops-latest": ("acknowledged_checkpoints_kept", {"keep": 1}),
    "ignores-max-failures": ("outcome", {}),
    "keep-staging": ("nothing_half_visible", {}),
    "preemption-as-failure": ("outcome", {}),
    "rank1-metrics": ("rank0_metrics", {}),
    "registers-incomplete": ("acknowledged_checkpoints_kept", {}),
    "restarts-only-failed-worker": ("whole_group_restarts", {}),
    "restore-oldest": ("final_checkpoint", {}),
    "skips-backend-shutdown": ("backend_shutdown", {}),
}


def test_every_variant_is_listed_with_the_invariant_that_catches_it():
    assert set(CAUGHT_BY) == set(VARIANTS)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_every_broken_variant_is_caught_with_a_small_replayable_schedule(variant):
    check, extra = CAUGHT_BY[variant]
    found = minimal_violation(dataclasses.replace(SMALL, **extra), variant)
    assert found is not None, variant
    assert found.lines[0].startswith(f"{check}: "), found.lines
    assert found.size <= 3, (variant, found.choices)
    bounds = found.fit.world.bounds
    again_bounds, choices = parse_replay_id(replay_id(bounds, found.choices))
    assert (again_bounds, choices) == (bounds, found.choices)
    fit, lines = run_one(again_bounds, choices, variant)
    assert lines == found.lines
    assert run_one(again_bounds, choices)[1] == []  # the reference keeps it under that schedule


@pytest.mark.slow  # seconds of exploring every schedule, unreduced
def test_the_reduction_loses_no_end_state():
    bounds = Bounds(workers=2, reports=2, faults=1, max_failures=1)
    reduced = [_end_state(fit) for fit, _ in schedules(bounds, states=False)]
    full = [_end_state(fit) for fit, _ in schedules(dataclasses.replace(bounds, reduce=False),
                                                    states=False)]
    assert set(reduced) == set(full)
    assert len(reduced) * 10 < len(full)  # far fewer schedules (see docs/simulation.md)


def test_random_runs_are_deeper_and_shrink_what_they_catch():
    bounds = Bounds(workers=3, reports=4, faults=3, max_failures=2)
    clean = random_runs(bounds, seed=7, runs=100)
    assert clean.violations == [] and clean.schedules == 100
    caught = random_runs(bounds, seed=7, runs=100, variant="charge-twice")
    assert len(caught.violations) == 1 and caught.schedules < 100  # it stops at the first
    shrunk = caught.violations[0]
    assert shrunk.lines[0].startswith("outcome: ")
    # max_failures=2 charged twice: two crashes are the fewest that break it, and nothing
    # else is off the default order
    assert shrunk.size == 2 and len(shrunk.choices) == 2, shrunk.choices
    assert run_one(bounds, shrunk.choices, "charge-twice")[1] == shrunk.lines


def _verdict(fit) -> tuple:
    """What the invariants judge of a schedule's end: the ending, the files left, the
    budgets charged, whether an upload failed, what was acknowledged, and which invariants
    fail (no history: runs merged at a state share their future, not their past)."""
    import pyarrow.fs as pafs

    files = sorted((i.path, i.size) for i in fit.fs.get_file_info(
        pafs.FileSelector("/sim", recursive=True)))
    checks = sorted({line.split(":", 1)[0] for line in invariants.violations(fit)})
    return (type(fit.state).__name__, type(fit.error).__name__, tuple(files),
            fit.world.charged.count("worker_group"), fit.world.charged.count("preemption"),
            fit.world.upload_failed, tuple(sorted({p for *_, p in fit.world.acked})),
            tuple(checks))


#: every variant at 2 workers (about 1,100 schedules each, 1-4 s), and at 3 workers (about
#: 8,000, 10-18 s) the reference and the variant whose runs merge least
MERGE_CASES = [(2, v) for v in [None, *sorted(VARIANTS)]] + [
    (3, None), (3, "restarts-only-failed-worker")]


@pytest.mark.slow  # seconds of exploring each
@pytest.mark.parametrize("workers, variant", MERGE_CASES)
def test_merging_runs_at_a_seen_state_loses_no_verdict_and_counts_every_schedule(workers,
                                                                                 variant):
    bounds = Bounds(workers=workers, reports=2, faults=2, max_failures=1)
    merged = [fit for fit, _ in schedules(bounds, variant) if not fit.pruned]
    every = [fit for fit, _ in schedules(bounds, variant, states=False)]
    assert {_verdict(f) for f in merged} == {_verdict(f) for f in every}
    assert len(merged) * 2 < len(every)
    result = explore(bounds, variant)
    assert result.covered == len(every)  # the state graph counts the schedules exactly
    assert bool(result.violations) == any(_verdict(f)[-1] for f in every)


@pytest.mark.slow  # tens of seconds of exploring
def test_every_schedule_of_the_target_bound_in_seconds():
    """<= 3 faults over 4 workers and 6 reports (docs/simulation.md: about 17 million
    schedules, 25 s on an idle 2-core machine); the bound here leaves room for a loaded
    one."""
    result = explore(Bounds(workers=4, reports=6, faults=3, max_failures=3))
    assert result.violations == []
    assert result.covered > 10_000_000 and result.states > 5_000
    assert result.seconds < 300


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "reference.simulate", *args],
                          capture_output=True, text=True, timeout=120)


@pytest.mark.slow  # seven child processes
def test_the_command_line_reports_on_its_last_line_and_exits_by_the_verdict():
    ok = _cli("--workers", "2", "--faults", "1", "--reports", "2")
    assert ok.returncode == 0, ok.stderr
    last = ok.stdout.strip().splitlines()[-1]
    assert last.startswith("explored 41 schedules, 0 violations in "), last
    assert "states" in ok.stdout and "schedules/s" in ok.stdout
    bad = _cli("--workers", "2", "--faults", "1", "--reports", "2", "--variant",
               "ack-before-commit")
    assert bad.returncode == 1
    assert "VIOLATION acknowledged_checkpoints_kept" in bad.stdout
    replay = [line.split("replay: ", 1)[1] for line in bad.stdout.splitlines()
              if "replay: " in line][0]
    again = _cli(*replay.split()[3:])
    assert again.returncode == 1 and "the upload of round 0 fails" in again.stdout
    assert _cli("--list-variants").stdout.split() == sorted(VARIANTS)
    kept = _cli("--workers", "2", "--reports", "3", "--faults", "0", "--keep", "1",
                "--variant", "drops-latest")
    assert kept.returncode == 1 and "replay: " in kept.stdout, kept.stdout
    assert "k1-" in kept.stdout  # the replay ID carries num_to_keep
    wrong = _cli("--workers", "0")
    assert wrong.returncode == 2 and "--workers 0: must be >= 1" in wrong.stderr
    assert "expected an ID" in _cli("--replay", "nonsense").stderr
