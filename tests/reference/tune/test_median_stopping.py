"""MedianStoppingRule decides as Ray 2.60's does over drawn result streams."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reference.tune.schedulers import MedianStoppingRule


class Handle:
    """A trial as the schedulers see it (hashable by identity, as Ray's Trial objects)."""

    def __init__(self, trial_id: str, status: str = "RUNNING"):
        self.trial_id, self.status = trial_id, status


class Controller:
    """What the rule asks a tuner: its live trials (some pending)."""

    def __init__(self, pending: int):
        self.trials = [Handle(f"p{i}", "PENDING") for i in range(pending)]

    def get_live_trials(self):
        return self.trials


def drive(rule, trials, events, pending):
    controller = Controller(pending)
    handles = [Handle(f"t{i}") for i in range(trials)]
    for h in handles:
        rule.on_trial_add(controller, h)
    clock, done, decisions = [0.0] * trials, set(), []
    for index, step, value in events:
        if index in done:
            continue
        clock[index] += step
        action = rule.on_trial_result(controller, handles[index],
                                      {"time_total_s": clock[index], "score": value})
        decisions.append((index, str(action)))
        if action == "STOP":
            done.add(index)
    return decisions


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 6), st.lists(st.tuples(st.integers(0, 5), st.sampled_from([0.5, 1.0, 2.0]),
                                             st.floats(-3, 3, allow_nan=False)), max_size=60),
       st.sampled_from(["min", "max"]), st.sampled_from([0.0, 1.0, 3.0]), st.integers(1, 3),
       st.booleans(), st.integers(0, 2), st.sampled_from([0, 2]))
def test_decisions_equal_rays(trials, events, mode, grace, samples, hard, pending, time_slice):
    ray_schedulers = pytest.importorskip("ray.tune.schedulers")
    events = [(i % trials, step, v) for i, step, v in events]
    kwargs = dict(metric="score", mode=mode, grace_period=grace, min_samples_required=samples,
                  hard_stop=hard, min_time_slice=time_slice)

    ours = drive(MedianStoppingRule(**kwargs), trials, events, pending)
    theirs = drive(ray_schedulers.MedianStoppingRule(**kwargs), trials, events, pending)
    assert ours == theirs


def test_a_trial_worse_than_the_median_stops():
    rule = MedianStoppingRule(metric="loss", mode="min", grace_period=0, min_samples_required=2)
    trials = [Handle(f"t{i}") for i in range(3)]
    for t in trials:
        rule.on_trial_add(None, t)
    for t, loss in zip(trials[:2], (0.1, 0.2), strict=True):
        assert rule.on_trial_result(None, t, {"time_total_s": 1, "loss": loss}) == "CONTINUE"
    assert rule.on_trial_result(None, trials[2], {"time_total_s": 1, "loss": 0.9}) == "STOP"
