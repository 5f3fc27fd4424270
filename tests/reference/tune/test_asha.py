"""ASHAScheduler decides as Ray 2.60's does: both driven with the same drawn result streams
(several trials interleaved, brackets, grace periods, reduction factors, min and max)."""

from __future__ import annotations

import types

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reference.tune.schedulers import ASHAScheduler, FIFOScheduler, TrialScheduler


@st.composite
def streams(draw):
    trials = draw(st.integers(1, 6))
    events = draw(st.lists(st.tuples(st.integers(0, trials - 1),
                                     st.floats(-5, 5, allow_nan=False)), max_size=60))
    return trials, events


def drive(scheduler, trials: int, events, metric: str, seed: int) -> list:
    np.random.seed(seed)  # the bracket choice uses numpy's global generator, in both
    handles = [types.SimpleNamespace(trial_id=f"t{i}") for i in range(trials)]
    for h in handles:
        scheduler.on_trial_add(None, h)
    iteration, stopped, decisions = [0] * trials, set(), []
    for index, value in events:
        if index in stopped:
            continue
        iteration[index] += 1
        action = scheduler.on_trial_result(
            None, handles[index], {"training_iteration": iteration[index], metric: value})
        decisions.append((index, iteration[index], str(action)))
        if action == "STOP":
            stopped.add(index)
            scheduler.on_trial_complete(None, handles[index],
                                        {"training_iteration": iteration[index], metric: value})
    return decisions


@settings(max_examples=300, deadline=None)
@given(streams(), st.integers(1, 3), st.integers(1, 3), st.sampled_from([2, 3, 4]),
       st.integers(4, 20), st.sampled_from(["min", "max"]), st.booleans(),
       st.integers(0, 1000))
def test_decisions_equal_rays(stream, brackets, grace, rf, max_t, mode, stop_last, seed):
    ray_schedulers = pytest.importorskip("ray.tune.schedulers")
    if grace > max_t:
        return
    kwargs = dict(metric="score", mode=mode, max_t=max_t, grace_period=grace,
                  reduction_factor=rf, brackets=brackets, stop_last_trials=stop_last)
    trials, events = stream
    ours = drive(ASHAScheduler(**kwargs), trials, events, "score", seed)
    theirs = drive(ray_schedulers.ASHAScheduler(**kwargs), trials, events, "score", seed)
    assert ours == theirs


def test_a_weak_trial_stops_at_the_first_rung():
    asha = ASHAScheduler(metric="loss", mode="min", max_t=8, grace_period=1, reduction_factor=2)
    good, bad = types.SimpleNamespace(trial_id="good"), types.SimpleNamespace(trial_id="bad")
    asha.on_trial_add(None, good)
    asha.on_trial_add(None, bad)
    assert asha.on_trial_result(None, good, {"training_iteration": 1, "loss": 0.1}) == \
        TrialScheduler.CONTINUE
    assert asha.on_trial_result(None, bad, {"training_iteration": 1, "loss": 0.9}) == \
        TrialScheduler.STOP
    assert asha.on_trial_result(None, good, {"training_iteration": 8, "loss": 0.05}) == \
        TrialScheduler.STOP  # max_t reached


def test_metric_and_mode_come_from_the_tune_config_or_fail_clearly():
    asha = ASHAScheduler()
    with pytest.raises(ValueError, match="without a valid `metric`"):
        asha.on_trial_add(None, types.SimpleNamespace(trial_id="t"))
    assert asha.set_search_properties("acc", "max")
    assert not ASHAScheduler(metric="a", mode="max").set_search_properties("b", None)
    with pytest.raises(AssertionError, match="grace_period must be <= max_t!"):
        ASHAScheduler(max_t=2, grace_period=3)


def test_fifo_always_continues():
    fifo = FIFOScheduler()
    assert fifo.on_trial_result(None, types.SimpleNamespace(trial_id="t"), {"x": 1}) == \
        TrialScheduler.CONTINUE
