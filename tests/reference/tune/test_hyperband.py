"""HyperBandScheduler decides as Ray 2.60's does: both driven by the same drawn schedules
(trials added between results, a few run at once, results, completions and errors) through
a controller that behaves as Ray's TuneController. Compared, event by event: each answer,
which trials were stopped, which `choose_trial_to_run` picked, every trial's status, and at
the end `debug_string()`. Ray's side runs Ray's own `Trial` objects."""

from __future__ import annotations

import math
import random

import pytest
import scheduler_standins as standins
from hypothesis import given, settings
from hypothesis import strategies as st

from reference.tune.schedulers import FIFOScheduler, HyperBandScheduler, TrialScheduler

Trial = standins.Trial


class Controller(standins.Controller):
    """Ray's TuneController as HyperBand sees it."""


def keep_result(trial, result: dict) -> None:
    """What the controller does after the scheduler answered (Ray's Trial keeps it in its
    run metadata)."""
    if hasattr(trial, "run_metadata"):
        trial.run_metadata.last_result = result
    else:
        trial.last_result = result


def ray_trial(i: int):
    from ray.tune.experiment import Trial as RayTrial

    return RayTrial("__fake", config={}, stub=True)


def ref_trial(i: int):
    return Trial(f"t{i}")


@st.composite
def schedules(draw):
    """Events: ("add",), ("result", pick, step, value), ("complete", pick), ("error", pick);
    `pick` chooses among the running trials. Mostly results."""
    value = st.one_of(st.sampled_from([0.0, 1.0, 2.0]), st.floats(-5, 5, allow_nan=False),
                      st.just(math.nan))

    def event(kind):
        if kind == 0:
            return st.just(("add",))
        if kind == 1:
            return st.tuples(st.sampled_from(["complete", "error"]), st.integers(0, 7))
        return st.tuples(st.just("result"), st.integers(0, 7), st.sampled_from([1, 2, 0.5]),
                         value)

    kinds = st.integers(0, 15).map(lambda k: 0 if k < 2 else 1 if k < 4 else 2)
    first = draw(st.integers(1, 12))
    return [("add",)] * first + draw(st.lists(kinds.flatmap(event), min_size=20,
                                              max_size=150))


def drive(scheduler, make_trial, events, slots: int, time_attr: str) -> list:
    """Play the events through a Ray-like controller; log what the scheduler decided."""
    controller, log = Controller(scheduler), []
    clock: dict = {}
    try:
        for event in events:
            if event[0] == "add":
                trial = make_trial(len(controller.trials))
                controller.trials.append(trial)
                clock[id(trial)] = 0
                scheduler.on_trial_add(controller, trial)
            while sum(t.status == "RUNNING" for t in controller.trials) < slots:
                chosen = scheduler.choose_trial_to_run(controller)
                if chosen is None:
                    break
                log.append(("run", controller.trials.index(chosen), chosen.status))
                chosen.status = "RUNNING"
            running = [t for t in controller.trials if t.status == "RUNNING"]
            if event[0] == "add" or not running:
                continue
            trial = running[event[1] % len(running)]
            index = controller.trials.index(trial)
            if event[0] == "result":
                step = event[2] if time_attr == "time_total_s" else 1
                clock[id(trial)] += step
                result = {time_attr: clock[id(trial)], "score": event[3]}
                action = scheduler.on_trial_result(controller, trial, result)
                keep_result(trial, result)
                log.append((index, clock[id(trial)], action))
                if action == "PAUSE":
                    controller.pause_trial(trial)
                elif action == "STOP":
                    controller.stop_trial(trial)
            elif event[0] == "complete":
                controller.stop_trial(trial)
                log.append((index, "complete"))
            else:
                scheduler.on_trial_error(controller, trial)
                trial.status = "ERROR"
                log.append((index, "error"))
            log.append(("stopped", tuple(controller.stopped)))
            log.append(tuple(t.status for t in controller.trials))
    except Exception as e:  # Ray's asserts and errors: the same on both sides
        log.append(("raised", type(e).__name__))
    log.append(scheduler.debug_string())
    return log


def totals(log) -> tuple[int, int, int]:
    """Answers, PAUSEs, and stops by the scheduler (STOP answers and paused trials it
    stopped, not the completions the schedule itself made)."""
    actions = [e[2] for e in log if isinstance(e, tuple) and len(e) == 3 and
               e[2] in ("CONTINUE", "PAUSE", "STOP")]
    stopped = [e[1] for e in log if isinstance(e, tuple) and e[:1] == ("stopped",)]
    completions = sum(1 for e in log if isinstance(e, tuple) and e[1:] == ("complete",))
    return len(actions), actions.count("PAUSE"), len(stopped[-1] if stopped else ()) - \
        completions


def compare(kwargs: dict, events: list, slots: int) -> list:
    ray_schedulers = pytest.importorskip("ray.tune.schedulers")
    time_attr = kwargs["time_attr"]
    ours = drive(HyperBandScheduler(**kwargs), ref_trial, events, slots, time_attr)
    theirs = drive(ray_schedulers.HyperBandScheduler(**kwargs), ray_trial, events, slots,
                   time_attr)
    assert ours == theirs, (kwargs, slots)
    return ours


@settings(max_examples=300, deadline=None)
@given(schedules(), st.integers(1, 4), st.integers(1, 27), st.sampled_from([2, 3, 4]),
       st.sampled_from(["min", "max"]), st.booleans(),
       st.sampled_from(["training_iteration", "time_total_s"]))
def test_decisions_equal_rays(events, slots, max_t, eta, mode, stop_last, time_attr):
    compare(dict(time_attr=time_attr, metric="score", mode=mode, max_t=max_t,
                 reduction_factor=eta, stop_last_trials=stop_last), events, slots)


def seeded_schedule(rng: random.Random) -> list:
    values = [0.0, 1.0, 2.0, math.nan, rng.uniform(-5, 5), rng.uniform(-5, 5)]
    events = [("add",)] * rng.randint(1, 12)
    for _ in range(rng.randint(20, 150)):
        k = rng.randrange(16)
        if k < 2:
            events.append(("add",))
        elif k < 4:
            events.append((rng.choice(["complete", "error"]), rng.randrange(8)))
        else:
            events.append(("result", rng.randrange(8), rng.choice([1, 2, 0.5]),
                           rng.choice(values)))
    return events


def test_seeded_streams_equal_rays_and_cover_pauses_stops_and_restarts():
    """200 fixed streams (the same on every run): equal to Ray's, and between them they
    pause, stop and restart trials many times, so the comparison is not only CONTINUEs."""
    counts = dict(streams=0, decisions=0, pauses=0, stops=0, restarts=0)
    for seed in range(200):
        rng = random.Random(seed)
        events = seeded_schedule(rng)
        kwargs = dict(time_attr=rng.choice(["training_iteration", "time_total_s"]),
                      metric="score", mode=rng.choice(["min", "max"]),
                      max_t=rng.randint(1, 27), reduction_factor=rng.choice([2, 3, 4]),
                      stop_last_trials=rng.random() < 0.7)
        log = compare(kwargs, events, slots=rng.randint(1, 4))
        decisions, pauses, stops = totals(log)
        counts["streams"] += 1
        counts["decisions"] += decisions
        counts["pauses"] += pauses
        counts["stops"] += stops
        counts["restarts"] += sum(1 for e in log if isinstance(e, tuple) and
                                  e[:1] == ("run",) and e[2] == "PAUSED")
    print(counts)
    assert counts["pauses"] > 200 and counts["stops"] > 100 and counts["restarts"] > 30, counts


def test_a_bracket_pauses_at_its_milestone_then_keeps_the_best():
    # max_t=9, eta=3: bracket s=0 takes 3 trials (judged at 9 = max_t only), s=1 the next
    # 5 (judged at 3, then at 9)
    hb = HyperBandScheduler(metric="loss", mode="min", max_t=9, reduction_factor=3)
    controller = Controller(hb)
    trials = [Trial(f"t{i}") for i in range(8)]
    for t in trials:
        controller.trials.append(t)
        hb.on_trial_add(controller, t)
    # trials 3..7 share bracket s=1: judged at 3, keeping ceil(5/3) = 2
    second = trials[3:]
    for t in second:
        t.status = "RUNNING"
    answers = []
    for i, t in enumerate(second):
        for it in (1, 2, 3):
            result = {"training_iteration": it, "loss": float(i)}
            answer = hb.on_trial_result(controller, t, result)
            keep_result(t, result)
        answers.append(answer)
        if answer == "PAUSE":
            controller.pause_trial(t)
        elif answer == "STOP":
            controller.stop_trial(t)
    assert answers == ["PAUSE"] * 4 + [TrialScheduler.STOP]  # the last (worst) stops itself
    assert [t.status for t in second] == ["PAUSED", "PAUSED", "TERMINATED", "TERMINATED",
                                          "TERMINATED"]
    # the two kept stay PAUSED until chosen; bracket s=0's pending trials come first
    assert hb.choose_trial_to_run(controller) is trials[0]
    for t in trials[:3]:
        t.status = "TERMINATED"
    assert hb.choose_trial_to_run(controller) is second[0]


def test_bad_arguments_fail_as_rays_do():
    with pytest.raises(AssertionError, match=r"Max \(time_attr\) not valid!.*max_t=0"):
        HyperBandScheduler(max_t=0)
    with pytest.raises(AssertionError, match="`mode` must be 'min' or 'max'!"):
        HyperBandScheduler(mode="maximum")
    with pytest.raises(ValueError, match=r"reduction_factor=1\b"):
        HyperBandScheduler(reduction_factor=1)
    with pytest.raises(ValueError, match="without a valid `metric`"):
        HyperBandScheduler().on_trial_add(Controller(None), Trial("t"))
    hb = HyperBandScheduler(mode="max")
    assert hb.set_search_properties(None, None) and hb.metric == "_metric"
    assert not HyperBandScheduler(metric="a", mode="max").set_search_properties("b", None)


def test_fifo_chooses_pending_then_paused_in_the_order_added():
    fifo, controller = FIFOScheduler(), Controller(None)
    controller.trials = [Trial("a"), Trial("b"), Trial("c")]
    controller.trials[0].status, controller.trials[1].status = "PAUSED", "RUNNING"
    assert fifo.choose_trial_to_run(controller) is controller.trials[2]
    controller.trials[2].status = "TERMINATED"
    assert fifo.choose_trial_to_run(controller) is controller.trials[0]
    controller.trials[0].status = "RUNNING"
    assert fifo.choose_trial_to_run(controller) is None
    assert fifo.debug_string() == "Using FIFO scheduling algorithm."
