"""Fault plans as data: construction, validation, JSON round trips, the strategies."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings

from simcluster import ACTIONS, Action, FaultPlan, Trigger, action
from simcluster.faults.runner import matches
from simcluster.strategies import actions, fault_plans, triggers

EVERY_KIND = list(ACTIONS)


def test_a_plan_is_data_with_a_json_form():
    plan = FaultPlan([
        (Trigger.after(1.5), action("kill_node", node="node-1")),
        (Trigger.message("*:rank1", nth=3), action("raise_in_worker", worker="$trigger",
                                                   error="ValueError", message="boom")),
        (Trigger.node_up("node-2"), action("preempt_node", node="$trigger", deadline_s=2)),
        (Trigger.worker_exit(signal="*"), action("add_node", spec={"cpus": 2, "gpus": 1})),
        (Trigger.on("upload", nth=2), action("slow_upload", seconds=0.5)),
        (Trigger.after(0), action("partition", nodes=["node-0", "node-1"], seconds=1)),
    ], seed=7)
    text = plan.to_json()
    assert FaultPlan.from_json(text) == plan
    data = json.loads(text)
    assert data["seed"] == 7 and data["version"] == 1
    assert data["steps"][1]["trigger"] == {
        "event": "message", "nth": 3, "per_worker": True,
        "match": {"worker": "*:rank1", "direction": "from_worker"}}
    assert data["steps"][0]["action"] == {"kind": "kill_node", "node": "node-1"}
    assert plan.needs_partitions
    assert "3rd message of one worker" in str(plan)


def test_actions_fill_in_defaults_and_expose_parameters():
    act = action("kill_worker", worker="w*")
    assert act.signal == 9 and act.worker == "w*"
    assert action("heal").nodes == ("*",)
    assert action("fail_upload").error == "OSError"


@pytest.mark.parametrize("build, match", [
    (lambda: action("explode", node="x"), r"kind='explode'.*expected one of"),
    (lambda: action("kill_node"), r"'node' is required"),
    (lambda: action("kill_node", nod="x"), r"unknown parameter.*'nod'.*allowed: \['node'\]"),
    (lambda: action("kill_worker", worker="w", signal=0), r"signal=0.*1-64"),
    (lambda: action("pause_node", node="n", seconds=-1), r"seconds=-1.*>= 0"),
    (lambda: action("add_node", spec={"cpus": -1}), r"cpus=-1"),
    (lambda: action("partition", nodes="node-1"), r"list of node-id globs"),
    (lambda: Trigger(), r"exactly one"),
    (lambda: Trigger(after_s=1, event="message"), r"exactly one"),
    (lambda: Trigger.on("message", nth=0), r"nth=0"),
    (lambda: Trigger.after(float("nan")), r"after_s=nan"),
    (lambda: Trigger.on("message", worker=["a"]), r"match="),
    (lambda: FaultPlan([(action("kill_node", node="n"), Trigger.after(1))]), r"steps\[0\]"),
    (lambda: FaultPlan.from_dict({"steps": [], "speed": 1}), r"'speed' was unexpected"),
    (lambda: FaultPlan.from_dict({"version": 2}), r"version: 1 was expected"),
])
def test_bad_plans_are_refused_naming_the_field(build, match):
    with pytest.raises((ValueError, TypeError), match=match):
        build()


def test_matching_rules():
    assert matches("w*", "w1") and not matches("w*", "x1")
    assert matches("*", 9) and not matches("*", None)  # "*": the field is set
    assert matches(9, 9) and not matches(9, "9") and not matches(True, 1)
    assert matches(None, None)


@settings(max_examples=200)
@given(fault_plans(nodes=["node-0", "node-1", "$trigger", "worker:w*"],
                   workers=["w*", "w1", "$trigger"], kinds=EVERY_KIND, max_steps=6))
def test_every_drawn_plan_round_trips_through_json(plan):
    assert FaultPlan.from_json(plan.to_json()) == plan
    assert FaultPlan.from_json(plan.to_json(indent=None)) == plan


@settings(max_examples=50)
@given(triggers(), actions(kinds=EVERY_KIND))
def test_strategies_draw_valid_steps(trigger, act):
    assert isinstance(trigger, Trigger) and isinstance(act, Action)
    assert Trigger.from_dict(trigger.to_dict()) == trigger


def test_strategies_refuse_unknown_kinds():
    with pytest.raises(ValueError, match="'explode' is not one of"):
        actions(kinds=["explode"])
