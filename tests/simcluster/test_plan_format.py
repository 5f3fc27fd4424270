"""The fault-plan file format (JSON and YAML, checked against plan.schema.json), worker tags
and events of a layer above as targets and triggers, and steps that never acted."""

from __future__ import annotations

import re
import signal
import time

import jsonschema
import pytest

import simcluster
from simcluster import ACTIONS, FaultPlan, NodeSpec, Trigger, action
from simcluster.faults.plan import _REQUIRED, schema, selects

PLAN_YAML = """\
version: 1
seed: 7
steps:
  - trigger: {event: train.report, match: {report: 3}}
    action: {kind: kill_worker, worker: "rank=1"}
  - trigger: {after_s: 2.5}
    action: {kind: kill_node, node: 1}
    optional: true
"""


def test_the_shipped_schema_is_a_valid_schema_and_covers_every_action_and_parameter():
    jsonschema.Draft202012Validator.check_schema(schema())
    branches = {b["title"]: b for b in schema()["$defs"]["action"]["oneOf"]}
    assert set(branches) == set(ACTIONS)
    for kind, params in ACTIONS.items():
        assert set(branches[kind]["properties"]) == {"kind", *params}, kind
        assert set(branches[kind]["required"]) == {
            "kind", *[p for p, d in params.items() if d is _REQUIRED]}, kind


def test_yaml_and_json_forms_read_the_same_plan(tmp_path):
    (tmp_path / "plan.yaml").write_text(PLAN_YAML)
    plan = FaultPlan.load(tmp_path / "plan.yaml")
    (tmp_path / "plan.json").write_text(plan.to_json())
    assert FaultPlan.load(tmp_path / "plan.json") == plan
    assert FaultPlan.from_yaml(plan.to_yaml()) == plan
    (trigger0, act0), (trigger1, act1) = plan.steps
    assert (trigger0.event, trigger0.match, trigger0.optional) == ("train.report",
                                                                  {"report": 3}, False)
    assert act0.worker == "rank=1"
    assert (trigger1.optional, act1.node) == (True, "node-1")  # node: 1 is node-1
    assert plan.to_dict()["steps"][1]["optional"] is True
    assert "(optional)" in str(plan)


@pytest.mark.parametrize("text, expected", [
    ("steps: [{trigger: {event: x}, action: {kind: kill_worker, workr: a}}]",
     [r"steps\[0\]\.action: Additional properties .*'workr' was unexpected.*"
      r"allowed: \['kind', 'signal', 'worker'\]", r"steps\[0\]\.action: 'worker' is a required"]),
    ("steps: [{trigger: {event: x}, action: {kind: kill_wroker, worker: a}}]",
     [r"steps\[0\]\.action\.kind: 'kill_wroker' is not one of \['kill_worker'"]),
    ("steps: [{trigger: {evnt: x}, action: {kind: kill_node, node: 1}}]",
     [r"steps\[0\]\.trigger: Additional properties .*'evnt' was unexpected.*'event'"]),
    ("steps: [{trigger: {after_s: -1}, action: {kind: kill_node, node: 1}}]",
     [r"steps\[0\]\.trigger\.after_s: -1 is less than the minimum of 0"]),
    ("steps:\n- {trigger: {after_s: 1}, action: {kind: pause_node, node: n}}\n"
     "- {trigger: {after_s: 1}, action: {kind: kill_worker, worker: 5}}",
     [r"steps\[1\]\.action\.worker: 5 is not of type 'string'"]),
    ("steps: [{trigger: {after_s: 1}, action: {kind: kill_worker, worker: 'rank='}}]",
     [r"steps\[0\]\.action: .*worker selector 'rank='"]),
    ("stpes: []", [r"'stpes' was unexpected"]),
    ("steps: [{trigger: {after_s: 1}", [r"not valid YAML"]),
])
def test_a_bad_plan_file_is_refused_naming_the_file_entry_and_field(tmp_path, text, expected):
    path = tmp_path / "plan.yml"
    path.write_text(text)
    with pytest.raises(ValueError) as info:
        FaultPlan.load(path)
    message = str(info.value)
    assert message.startswith(f"{path}: ")
    for pattern in expected:
        assert re.search(pattern, message), message


def test_worker_selectors_match_names_or_tags():
    tags = {"rank": 1, "attempt": 0, "run": "r"}
    assert selects("rank=1", "g:rank1", tags)
    assert selects("rank=1,attempt=0", "g:rank1", tags)
    assert not selects("rank=1,attempt=1", "g:rank1", tags)
    assert selects("rank=[01]", "g:rank1", tags)
    assert not selects("rank=1", "g:rank1", {})          # no tag: no match
    assert selects("*:rank1", "g:rank1", {})              # a name glob
    assert not selects("rank1", "g:rank1", tags)


def _sleeper(seconds):
    time.sleep(seconds)


def test_a_plan_targets_workers_by_tag_and_triggers_on_recorded_events(make_cluster):
    plan = FaultPlan([
        (Trigger.on("train.report", report=2), action("kill_worker", worker="rank=1")),
        # a match field the event lacks is looked up in the event's worker's tags
        (Trigger.on("worker_start", rank=0), action("kill_worker", worker="$trigger", signal=15)),
    ])
    cluster = make_cluster(NodeSpec(cpus=2), faults=plan)
    w0 = cluster.start_worker("node-0", _sleeper, (30,), tags={"rank": 0})
    w1 = cluster.start_worker("node-0", _sleeper, (30,), tags={"rank": 1})
    cluster.record_event("train.report", report=1)
    time.sleep(0.2)
    assert w1.exit is None  # report 1: nothing yet
    cluster.record_event("train.report", report=2)
    assert w1.wait(10).signal == signal.SIGKILL
    assert w0.wait(10).signal == signal.SIGTERM
    starts = cluster.history.events("worker_start")
    assert [e["tags"] for e in starts] == [{"rank": 0}, {"rank": 1}]
    assert cluster.plan_runs[0].wait(5)
    assert cluster.plan_runs[0].unfired() == []


def test_recorded_events_are_checked_and_reach_the_history_from_a_client(make_cluster):
    cluster = make_cluster(NodeSpec(cpus=1))
    with pytest.raises(ValueError, match="dotted name"):
        cluster.record_event("report", x=1)
    with pytest.raises(ValueError, match=r"\['seq'\]"):
        cluster.record_event("train.report", seq=1)
    with pytest.raises(TypeError, match="JSON-able"):
        cluster.record_event("train.report", obj=object())
    with pytest.raises(TypeError, match="tags="):
        cluster.start_worker("node-0", _sleeper, (0,), tags={"rank": [1]})
    client = simcluster.connect(cluster.address)
    try:
        client.record_event("mine.thing", n=1, path=None)
        deadline = time.monotonic() + 5
        while not cluster.history.events("mine.thing") and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        client.close()
    [event] = cluster.history.events("mine.thing")
    assert (event["n"], event["path"]) == (1, None)


def test_steps_that_never_acted_are_recorded_at_close(make_cluster, tmp_path):
    plan = FaultPlan([
        (Trigger.on("train.report", report=99), action("kill_worker", worker="rank=1")),
        (Trigger.on("node_up", node="node-0"), action("kill_worker", worker="rank=7")),
        (Trigger.after(60).as_optional(), action("kill_node", node="node-0")),
    ])
    cluster = make_cluster(NodeSpec(cpus=1), faults=plan)
    time.sleep(0.3)
    cluster.close()
    missed = {e["step"]: e for e in simcluster.History.read(cluster.history.path)
              if e["event"] == "plan_unfired"}
    assert sorted(missed) == [0, 1, 2]
    assert missed[0]["why"] == "its trigger never came" and not missed[0]["optional"]
    assert missed[1]["why"].startswith("it fired but found no target")
    assert "rank=7" in missed[1]["why"]
    assert missed[2]["optional"] is True


def test_a_worker_traceback_names_the_functions_source_file(make_cluster, tmp_path):
    # A function defined in a script is pickled by value; its file and line must survive.
    source = tmp_path / "user_script.py"
    source.write_text("def boom():\n    raise ValueError('from the user file')\n")
    namespace: dict = {"__name__": "__main__"}
    exec(compile(source.read_text(), str(source), "exec"), namespace)
    cluster = make_cluster(NodeSpec(cpus=1))
    exit_ = cluster.start_worker("node-0", namespace["boom"]).wait(10)
    assert f'File "{source}", line 2, in boom' in exit_.traceback
    assert "<dynamic-code>" not in exit_.traceback
