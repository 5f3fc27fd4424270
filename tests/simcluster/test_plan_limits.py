"""The bounds of a fault plan (`simcluster/faults/limits.py`): durations up to one week,
nesting up to 32 levels, at most 100,000 values; a plan past them is refused when it is
read, naming the file, the field or the limit (it used to kill the plan thread with an
OverflowError, or the reader with a RecursionError or a hang)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml

from simcluster import FaultPlan, Trigger, action
from simcluster.faults.limits import MAX_DEPTH, MAX_SECONDS, MAX_VALUES


def _step(trigger: dict, act: dict) -> dict:
    return {"version": 1, "steps": [{"trigger": trigger, "action": act}]}


DURATIONS = {
    "trigger.after_s": ({"after_s": "X"}, {"kind": "kill_node", "node": 1}),
    "action.seconds": ({"after_s": 1}, {"kind": "pause_node", "node": 1, "seconds": "X"}),
    "action.deadline_s": ({"after_s": 1}, {"kind": "preempt_node", "node": 1,
                                           "deadline_s": "X"}),
    "action.grace_s": ({"after_s": 1}, {"kind": "remove_node", "node": 1, "grace_s": "X"}),
}


def _with(field: str, value: float) -> dict:
    trigger, act = (dict(part) for part in DURATIONS[field])
    for part in (trigger, act):
        for key in part:
            if part[key] == "X":
                part[key] = value
    return _step(trigger, act)


@pytest.mark.parametrize("suffix", [".json", ".yaml"])
@pytest.mark.parametrize("field", sorted(DURATIONS))
@pytest.mark.parametrize("value", [1e308, MAX_SECONDS + 1])
def test_a_duration_past_one_week_is_refused_naming_the_file_and_field(tmp_path, field, value,
                                                                       suffix):
    path = tmp_path / f"plan{suffix}"
    data = _with(field, value)
    path.write_text(json.dumps(data) if suffix == ".json" else yaml.safe_dump(data))
    with pytest.raises(ValueError) as info:
        FaultPlan.load(path)
    message = str(info.value)
    assert message.startswith(f"{path}: ") and f"steps[0].{field}: " in message, message
    assert "greater than the maximum of 604800" in message, message


@pytest.mark.parametrize("field", sorted(DURATIONS))
def test_a_duration_of_exactly_one_week_is_a_valid_plan(field):
    plan = FaultPlan.from_dict(_with(field, MAX_SECONDS))
    assert FaultPlan.from_json(plan.to_json()) == plan


@pytest.mark.parametrize("build, where", [
    (lambda: Trigger.after(1e308), "Trigger(after_s=1e+308"),
    (lambda: action("pause_node", node=1, seconds=1e308), "Action(pause_node).seconds=1e+308"),
    (lambda: action("preempt_node", node=1, deadline_s=MAX_SECONDS + 1),
     "Action(preempt_node).deadline_s=604801"),
    (lambda: action("slow_upload", seconds=1e308), "Action(slow_upload).seconds=1e+308"),
])
def test_the_python_api_has_the_same_bound(build, where):
    with pytest.raises(ValueError) as info:
        build()
    assert str(info.value).startswith(where) and "<= 604800 (one week)" in str(info.value)


DEEP = 100_000


@pytest.mark.parametrize("form, text", [
    ("json", '{"steps": ' + "[" * DEEP + "]" * DEEP + "}"),
    ("json", '{"steps": [{"trigger": {"event": "x", "match": ' + '{"a": ' * DEEP + "1"
     + "}" * DEEP + "}}]}"),
    ("yaml", "steps: " + "[" * DEEP + "]" * DEEP),
    ("yaml", "steps: " + "{a: " * DEEP + "1" + "}" * DEEP),
])
def test_a_file_nested_100k_deep_is_refused_naming_the_limit(tmp_path, form, text):
    path = tmp_path / f"plan.{form}"
    path.write_text(text)
    with pytest.raises(ValueError) as info:
        FaultPlan.load(path)
    assert str(info.value).startswith(f"{path}: nested more than {MAX_DEPTH} levels deep "
                                      "at line 1; a fault plan nests at most 32 levels")


def test_python_data_nested_100k_deep_is_refused_naming_the_limit():
    data = inner = []
    for _ in range(DEEP):
        inner.append([])
        inner = inner[0]
    with pytest.raises(ValueError, match=f"nested more than {MAX_DEPTH} levels deep"):
        FaultPlan.from_dict({"steps": data})


LAUGHS = "\n".join(['a0: &a0 ["x", "x", "x", "x", "x", "x", "x", "x", "x", "x"]']
                   + [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]
                   + ["steps: *a8"])


def test_yaml_aliases_that_stand_for_a_billion_values_are_refused_at_once(tmp_path):
    """Ten lines of anchors are 10**9 values once expanded (the schema check then walked
    them for ever). In a child process, with a deadline, since that could hang."""
    path = tmp_path / "plan.yaml"
    path.write_text(LAUGHS)
    code = ("import sys\nfrom simcluster import FaultPlan\n"
            "try:\n    FaultPlan.load(sys.argv[1])\nexcept ValueError as exc:\n"
            "    print(exc)\n")
    try:
        out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True,
                             text=True, timeout=20)
    except subprocess.TimeoutExpired:
        pytest.fail("reading a plan of ten lines of YAML anchors took more than 20 s")
    assert out.stdout.startswith(f"{path}: more than {MAX_VALUES} values (counting each use "
                                 "of an alias"), out.stdout + out.stderr


def test_a_few_aliases_are_fine():
    text = ("steps:\n  - {trigger: {after_s: 1}, action: &kill {kind: kill_node, node: 1}}\n"
            "  - {trigger: {after_s: 2}, action: *kill}\n")
    plan = FaultPlan.from_yaml(text)
    assert [a.node for _, a in plan.steps] == ["node-1", "node-1"]
