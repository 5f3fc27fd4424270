"""Hypothesis strategies for fault plans: a failing plan shrinks to a minimal one.

    from simcluster.strategies import fault_plans

    @given(fault_plans(nodes=["node-0", "node-1"], workers=["w*"], max_steps=3))
    def test_survives(plan): ...

Shrinking goes towards fewer steps, earlier times, smaller counts and the first listed
action kind and target, so order `actions` from the mildest to the harshest.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

from hypothesis import strategies as st

from .faults.plan import ACTIONS, Action, FaultPlan, Trigger

#: action kinds that need no particular provider (partition / heal need netns)
DEFAULT_ACTIONS = tuple(k for k in ACTIONS if k not in ("partition", "heal"))
DEFAULT_EVENTS = ("message", "worker_start", "worker_exit", "node_up", "upload")


def triggers(*, max_after_s: float = 2.0, max_nth: int = 3, workers: Sequence[str] = ("*",),
             nodes: Sequence[str] = ("*",), events: Sequence[str] = DEFAULT_EVENTS):
    """Time triggers within `max_after_s` and event triggers over `events`."""
    seconds = st.floats(0.0, max_after_s, allow_nan=False).map(lambda s: round(s, 3))
    nth = st.integers(1, max_nth)

    def event_trigger(event: str):
        if event == "message":
            return st.builds(Trigger.message, st.sampled_from(workers), nth)
        if event == "node_up":
            return st.builds(Trigger.node_up, st.sampled_from(nodes), nth)
        if event in ("worker_start", "worker_exit", "upload"):
            return st.builds(functools.partial(Trigger.on, event), nth=nth,
                             worker=st.sampled_from(workers))
        return st.builds(functools.partial(Trigger.on, event), nth=nth)

    return st.one_of(st.builds(Trigger.after, seconds), *[event_trigger(e) for e in events])


def actions(*, kinds: Sequence[str] = DEFAULT_ACTIONS, workers: Sequence[str] = ("*",),
            nodes: Sequence[str] = ("*",), max_seconds: float = 1.0):
    """Actions of the given kinds, aimed at the given worker / node globs ("$trigger" is
    allowed too)."""
    for kind in kinds:
        if kind not in ACTIONS:
            raise ValueError(f"actions(kinds=...): {kind!r} is not one of {sorted(ACTIONS)}")
    seconds = st.floats(0.0, max_seconds, allow_nan=False).map(lambda s: round(s, 3))
    worker = st.sampled_from(list(workers))
    node = st.sampled_from(list(nodes))
    params = {
        "kill_worker": st.fixed_dictionaries({"worker": worker,
                                              "signal": st.sampled_from([9, 15])}),
        "raise_in_worker": st.fixed_dictionaries({"worker": worker}),
        "kill_node": st.fixed_dictionaries({"node": node}),
        "pause_node": st.fixed_dictionaries({"node": node, "seconds": seconds}),
        "resume_node": st.fixed_dictionaries({"node": node}),
        "remove_node": st.fixed_dictionaries({"node": node, "graceful": st.booleans(),
                                              "grace_s": seconds}),
        "add_node": st.fixed_dictionaries({"spec": st.fixed_dictionaries(
            {"cpus": st.integers(1, 4)})}),
        "preempt_node": st.fixed_dictionaries({"node": node, "deadline_s": seconds}),
        "fail_upload": st.fixed_dictionaries({"worker": worker}),
        "slow_upload": st.fixed_dictionaries({"worker": worker, "seconds": seconds}),
        "partition": st.fixed_dictionaries({"nodes": st.lists(node, min_size=1, max_size=2),
                                            "seconds": seconds}),
        "heal": st.fixed_dictionaries({"nodes": st.lists(node, min_size=1, max_size=2)}),
    }
    return st.one_of(*[params[kind].map(functools.partial(Action, kind)) for kind in kinds])


def fault_plans(*, nodes: Sequence[str] = ("*",), workers: Sequence[str] = ("*",),
                kinds: Sequence[str] = DEFAULT_ACTIONS, events: Sequence[str] = DEFAULT_EVENTS,
                min_steps: int = 0, max_steps: int = 4, max_after_s: float = 2.0,
                max_seconds: float = 1.0, max_nth: int = 3):
    """`FaultPlan`s of `min_steps`..`max_steps` (trigger, action) steps with a drawn seed."""
    step = st.tuples(triggers(max_after_s=max_after_s, max_nth=max_nth, workers=workers,
                              nodes=nodes, events=events),
                     actions(kinds=kinds, workers=workers, nodes=nodes,
                             max_seconds=max_seconds))
    return st.builds(lambda steps, seed: FaultPlan(tuple(steps), seed=seed),
                     st.lists(step, min_size=min_steps, max_size=max_steps),
                     st.integers(0, 2**32 - 1))


__all__ = ["DEFAULT_ACTIONS", "DEFAULT_EVENTS", "actions", "fault_plans", "triggers"]
