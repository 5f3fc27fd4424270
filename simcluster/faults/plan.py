"""Fault plans as data: `FaultPlan` = seed + a list of (`Trigger`, `Action`) steps.

A plan is plain data with a JSON form (`to_json` / `from_json` round-trip exactly), so a
failing schedule can be saved, shrunk (see `simcluster.strategies`) and replayed. What a plan
does on a cluster is in `faults/runner.py`; this module only says what a plan may contain.

Triggers (each fires at most once):

    Trigger.after(s)                      s seconds after the plan started
    Trigger.on(event, nth=1, per_worker=False, **match)
                                          the nth history event named `event` whose fields
                                          match; per_worker: the first worker to reach nth
    Trigger.message(worker="*", nth=1)    a worker's nth message to the driver (per worker)
    Trigger.node_up(node="*", nth=1)      Trigger.worker_exit(worker="*", **match)

Matching: `worker` is a worker selector (below), `node` a glob over node ids; other fields
compare equal, or as a glob over `str(value)` when the pattern is a str. A field the event
lacks is looked up in the tags of the event's worker (`start_worker(tags=...)`), so
`Trigger.on("message", rank=1)` means "a message of the worker tagged rank=1". A pattern
never matches a field that is absent or None, so `signal="*"` means "ended by a signal".

Worker selectors: a glob over the worker's *name* (its id when unnamed), or tags:
"key=glob[,key=glob...]" (e.g. "rank=1", "rank=1,attempt=0"), each a glob over
`str(tag value)`. Tags are how a layer above simcluster (the reference tags its Train
workers with run, attempt and rank) lets a plan name workers the way its users think.

Targets of actions: `worker` is a selector or "$trigger" (the worker of the triggering
event); `node` is a node-id glob, an int i (node "node-<i>"), "$trigger" (the triggering
event's node) or "worker:<selector>" (the node a running worker is on). Several
candidates: one is picked with the plan's seed, so a replay picks the same one.

A step that never acts (its trigger never came, or its target was gone) fails
`simcluster run` unless the step is `optional`: a plan that tested nothing is not a pass.
The file format (JSON or YAML) is `plan.schema.json` beside this module; `load` checks a
file against it and names the entry and field of each mistake; `limits.py` bounds durations,
nesting and size.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from .._spec import NodeSpec
from .limits import check_data, check_json_text, check_seconds, check_yaml_text

_REQUIRED = object()
# kind -> {parameter: default}; _REQUIRED marks the ones a caller must give.
ACTIONS: dict[str, dict[str, Any]] = {
    "kill_worker": {"worker": _REQUIRED, "signal": 9},
    "raise_in_worker": {"worker": _REQUIRED, "error": "RuntimeError",
                        "message": "injected fault"},
    "kill_node": {"node": _REQUIRED},
    "pause_node": {"node": _REQUIRED, "seconds": None},
    "resume_node": {"node": _REQUIRED},
    "remove_node": {"node": _REQUIRED, "graceful": True, "grace_s": None},
    "add_node": {"spec": {"cpus": 1}},
    "preempt_node": {"node": _REQUIRED, "deadline_s": 1.0},
    "fail_upload": {"worker": "*", "error": "OSError", "message": "injected upload failure"},
    "slow_upload": {"worker": "*", "seconds": 1.0},
    "partition": {"nodes": _REQUIRED, "seconds": None},
    "heal": {"nodes": ("*",)},
}
_SCALAR = (str, int, float, bool, type(None))
_SCHEMA_PATH = Path(__file__).with_name("plan.schema.json")


def parse_selector(pattern: str) -> dict[str, str] | None:
    """"rank=1,attempt=0" -> {"rank": "1", "attempt": "0"}; a name glob -> None."""
    if "=" not in pattern:
        return None
    out = {}
    for part in pattern.split(","):
        key, eq, value = part.partition("=")
        if not eq or not key.strip() or not value.strip():
            raise ValueError(f"worker selector {pattern!r}: expected 'key=glob[,key=glob...]' "
                             "(e.g. 'rank=1'), or a glob over worker names")
        out[key.strip()] = value.strip()
    return out


def selects(pattern: str, name: str, tags: Mapping[str, Any]) -> bool:
    """Whether a worker selector (a name glob or "key=glob,...") picks this worker."""
    wanted = parse_selector(pattern)
    if wanted is None:
        return fnmatchcase(name, pattern)
    return all(key in tags and tags[key] is not None and fnmatchcase(str(tags[key]), glob)
               for key, glob in wanted.items())


def _check_pattern(where: str, value: Any) -> None:
    if not isinstance(value, str) or not value:
        raise TypeError(f"{where}={value!r}: expected a non-empty str (a glob, '$trigger'"
                        + (" or 'worker:<glob>'" if "node" in where else "") + ")")


@dataclasses.dataclass(frozen=True)
class Trigger:
    """When a step fires: `after_s` seconds into the plan, or the `nth` matching `event`."""

    after_s: float | None = None
    event: str | None = None
    nth: int = 1
    per_worker: bool = False
    match: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    #: the step may never act (its event may not come): not a failure of the run
    optional: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.optional, bool):
            raise TypeError(f"Trigger(optional={self.optional!r}): expected a bool")
        if (self.after_s is None) == (self.event is None):
            raise ValueError(f"Trigger(after_s={self.after_s!r}, event={self.event!r}): "
                             "give exactly one of them")
        if self.after_s is not None:
            check_seconds("Trigger(after_s", self.after_s, optional=False)
            if self.match or self.nth != 1 or self.per_worker:
                raise ValueError("Trigger(after_s=...): a time trigger takes no nth, "
                                 "per_worker or match")
        else:
            if not isinstance(self.event, str) or not self.event:
                raise TypeError(f"Trigger(event={self.event!r}): expected an event name "
                                "such as 'message', 'node_up' or 'worker_exit'")
            if isinstance(self.nth, bool) or not isinstance(self.nth, int) or self.nth < 1:
                raise ValueError(f"Trigger(nth={self.nth!r}): expected an int >= 1")
            if not isinstance(self.per_worker, bool):
                raise TypeError(f"Trigger(per_worker={self.per_worker!r}): expected a bool")
        if not isinstance(self.match, Mapping) or not all(
                isinstance(k, str) and isinstance(v, _SCALAR) for k, v in self.match.items()):
            raise TypeError(f"Trigger(match={self.match!r}): expected a mapping of field name "
                            "to str, number, bool or None")
        object.__setattr__(self, "match", dict(self.match))

    @classmethod
    def after(cls, seconds: float) -> Trigger:
        return cls(after_s=seconds)

    @classmethod
    def on(cls, event: str, *, nth: int = 1, per_worker: bool = False, **match) -> Trigger:
        return cls(event=event, nth=nth, per_worker=per_worker, match=match)

    def as_optional(self, optional: bool = True) -> Trigger:
        """This trigger, for a step that may never act without failing the run."""
        return dataclasses.replace(self, optional=optional)

    @classmethod
    def message(cls, worker: str = "*", nth: int = 1, *, per_worker: bool = True) -> Trigger:
        """The `nth` message a worker named like `worker` sends to the driver."""
        return cls.on("message", nth=nth, per_worker=per_worker, worker=worker,
                      direction="from_worker")

    @classmethod
    def node_up(cls, node: str = "*", nth: int = 1) -> Trigger:
        return cls.on("node_up", nth=nth, node=node)

    @classmethod
    def worker_exit(cls, worker: str = "*", nth: int = 1, **match) -> Trigger:
        """e.g. `Trigger.worker_exit(signal="*")`: a worker ended by a signal."""
        return cls.on("worker_exit", nth=nth, worker=worker, **match)

    def to_dict(self) -> dict:
        if self.after_s is not None:
            return {"after_s": self.after_s}
        out: dict[str, Any] = {"event": self.event}
        if self.nth != 1:
            out["nth"] = self.nth
        if self.per_worker:
            out["per_worker"] = True
        if self.match:
            out["match"] = dict(self.match)
        return out

    @classmethod
    def from_dict(cls, data: Mapping) -> Trigger:
        _check_keys("trigger", data, {"after_s", "event", "nth", "per_worker", "match",
                                      "optional"})
        return cls(**data)

    def __str__(self) -> str:
        if self.after_s is not None:
            return f"after {self.after_s:g}s"
        fields = ", ".join(f"{k}={v!r}" for k, v in self.match.items())
        each = " of one worker" if self.per_worker else ""
        return f"{_ordinal(self.nth)} {self.event}{each}({fields})"

    def describe(self) -> str:
        return str(self) + (" (optional)" if self.optional else "")


@dataclasses.dataclass(frozen=True)
class Action:
    """What a step does: `kind` (one of `ACTIONS`) and its parameters (defaults filled in)."""

    kind: str
    params: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.kind not in ACTIONS:
            raise ValueError(f"Action(kind={self.kind!r}): expected one of {sorted(ACTIONS)}")
        allowed = ACTIONS[self.kind]
        unknown = sorted(set(self.params) - set(allowed))
        if unknown:
            raise ValueError(f"Action(kind={self.kind!r}): unknown parameter(s) {unknown}; "
                             f"allowed: {sorted(allowed)}")
        params = {}
        for name, default in allowed.items():
            if name in self.params:
                params[name] = self.params[name]
            elif default is _REQUIRED:
                raise ValueError(f"Action(kind={self.kind!r}): parameter {name!r} is required")
            else:
                params[name] = default
        where = f"Action({self.kind}).{{}}"
        if "node" in params:
            params["node"] = _node_id(params["node"])
        if "nodes" in params and isinstance(params["nodes"], (list, tuple)):
            params["nodes"] = [_node_id(n) for n in params["nodes"]]
        for name, value in params.items():
            _check_param(where.format(name), name, value)
        if "nodes" in params:
            params["nodes"] = tuple(params["nodes"])
        if "spec" in params:
            params["spec"] = dict(params["spec"])
        object.__setattr__(self, "params", params)

    def __getattr__(self, name: str):
        params = self.__dict__.get("params", {})
        if name in params:
            return params[name]
        raise AttributeError(name)

    def to_dict(self) -> dict:
        out: dict[str, Any] = {"kind": self.kind}
        for name, value in self.params.items():
            out[name] = list(value) if isinstance(value, tuple) else value
        return out

    @classmethod
    def from_dict(cls, data: Mapping) -> Action:
        if not isinstance(data, Mapping) or "kind" not in data:
            raise ValueError(f"action={data!r}: expected an object with a 'kind'")
        params = {k: v for k, v in data.items() if k != "kind"}
        return cls(data["kind"], params)

    def __str__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in self.params.items()
                           if v != ACTIONS[self.kind][k])
        return f"{self.kind}({fields})"


def _node_id(value: Any) -> Any:
    """`node: 1` is node "node-1" (the cluster's nodes are numbered in start order)."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return f"node-{value}"
    return value


def _check_param(where: str, name: str, value: Any) -> None:
    if name in ("worker", "node"):
        _check_pattern(where, value)
        if name == "worker" and value != "$trigger":
            try:
                parse_selector(value)
            except ValueError as exc:
                raise ValueError(f"{where}: {exc}") from None
    elif name == "nodes":
        if isinstance(value, str) or not isinstance(value, Iterable):
            raise TypeError(f"{where}={value!r}: expected a list of node-id globs")
        for item in value:
            _check_pattern(where, item)
    elif name in ("seconds", "grace_s", "deadline_s"):
        check_seconds(where, value, optional=name != "deadline_s")
    elif name == "signal":
        if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < 65:
            raise ValueError(f"{where}={value!r}: expected a signal number (1-64)")
    elif name in ("error", "message"):
        if not isinstance(value, str):
            raise TypeError(f"{where}={value!r}: expected a str")
    elif name == "graceful":
        if not isinstance(value, bool):
            raise TypeError(f"{where}={value!r}: expected a bool")
    elif name == "spec":
        if not isinstance(value, Mapping):
            raise TypeError(f"{where}={value!r}: expected NodeSpec fields as a mapping, "
                            "e.g. {'cpus': 2}")
        NodeSpec(**value)  # its own checks name the field


def action(kind: str, **params) -> Action:
    """`action("kill_node", node="node-1")`: an `Action` with keyword parameters."""
    return Action(kind, params)


@dataclasses.dataclass(frozen=True)
class FaultPlan:
    """A seeded list of (trigger, action) steps; `Cluster(faults=plan)` or
    `cluster.run_plan(plan)` runs it. The seed picks among several matching targets."""

    steps: tuple[tuple[Trigger, Action], ...] = ()
    seed: int = 0

    def __post_init__(self) -> None:
        steps = []
        for i, step in enumerate(self.steps):
            try:
                trigger, act = step
            except (TypeError, ValueError):
                raise TypeError(f"FaultPlan(steps[{i}]={step!r}): expected a (Trigger, "
                                "Action) pair") from None
            if not isinstance(trigger, Trigger) or not isinstance(act, Action):
                raise TypeError(f"FaultPlan(steps[{i}]={step!r}): expected a (Trigger, "
                                "Action) pair")
            steps.append((trigger, act))
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise TypeError(f"FaultPlan(seed={self.seed!r}): expected an int")
        object.__setattr__(self, "steps", tuple(steps))

    def __len__(self) -> int:
        return len(self.steps)

    def __iter__(self):
        return iter(self.steps)

    @property
    def needs_partitions(self) -> bool:
        return any(a.kind in ("partition", "heal") for _, a in self.steps)

    def to_dict(self) -> dict:
        steps = []
        for t, a in self.steps:
            step = {"trigger": t.to_dict(), "action": a.to_dict()}
            if t.optional:
                step["optional"] = True
            steps.append(step)
        return {"version": 1, "seed": self.seed, "steps": steps}

    @classmethod
    def from_dict(cls, data: Mapping, *, source: str = "plan") -> FaultPlan:
        """A plan from its data form, checked against `plan.schema.json` first: a mistake is
        a ValueError naming `source`, the entry and the field (`plan.json: steps[1].action:
        ...`)."""
        check_schema(data, source)
        steps = []
        for i, s in enumerate(data.get("steps", ())):
            where = f"{source}: steps[{i}]"
            try:
                trigger = Trigger.from_dict(s["trigger"])
            except (TypeError, ValueError) as exc:
                raise ValueError(f"{where}.trigger: {exc}") from None
            try:
                act = Action.from_dict(s["action"])
            except (TypeError, ValueError) as exc:
                raise ValueError(f"{where}.action: {exc}") from None
            steps.append((trigger.as_optional(s.get("optional", False) or trigger.optional),
                          act))
        return cls(tuple(steps), seed=data.get("seed", 0))

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    @classmethod
    def from_json(cls, text: str, *, source: str = "plan") -> FaultPlan:
        return cls.from_dict(_parse(text, json.loads, json.JSONDecodeError, "JSON", source),
                             source=source)

    def to_yaml(self) -> str:
        import yaml

        return yaml.safe_dump(self.to_dict(), sort_keys=False)

    @classmethod
    def from_yaml(cls, text: str, *, source: str = "plan") -> FaultPlan:
        import yaml

        return cls.from_dict(_parse(text, yaml.safe_load, yaml.YAMLError, "YAML", source),
                             source=source)

    @classmethod
    def load(cls, path) -> FaultPlan:
        """Read a plan file: YAML for `.yaml` / `.yml`, JSON otherwise."""
        with open(path, encoding="utf-8") as f:
            text = f.read()
        if str(path).lower().endswith((".yaml", ".yml")):
            return cls.from_yaml(text, source=str(path))
        return cls.from_json(text, source=str(path))

    def __str__(self) -> str:
        lines = [f"FaultPlan(seed={self.seed})"]
        lines += [f"  [{i}] {t.describe()} -> {a}" for i, (t, a) in enumerate(self.steps)]
        return "\n".join(lines)


def _parse(text: str, load, error: type, form: str, source: str):
    try:
        (check_json_text if form == "JSON" else check_yaml_text)(text, source)
        return load(text)
    except error as exc:
        raise ValueError(f"{source}: not valid {form}: {exc}") from None


def schema() -> dict:
    """The JSON Schema of a plan file (`plan.schema.json`, shipped with simcluster)."""
    return json.loads(_SCHEMA_PATH.read_text(encoding="utf-8"))


def check_schema(data: Any, source: str = "plan") -> None:
    """ValueError naming the entry and field of the first mistakes of `data` (at most 5)."""
    import jsonschema

    check_data(data, source)  # before anything recurses into it
    validator = jsonschema.Draft202012Validator(schema())
    lines = []
    for error in sorted(validator.iter_errors(data),
                        key=lambda e: (list(map(str, e.absolute_path)), e.message)):
        lines += [f"{_where(path)}: {message}" for path, message in _explain(error)]
    if not lines:
        return
    more = f" (and {len(lines) - 5} more)" if len(lines) > 5 else ""
    raise ValueError(f"{source}: not a valid fault plan{more} (the format: "
                     f"simcluster/faults/{_SCHEMA_PATH.name}, explained in docs/fault_plans.md):"
                     "\n  " + "\n  ".join(lines[:5]))


def _where(path) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out or "(the plan)"


def _explain(error) -> list[tuple[list, str]]:
    """(path, message) pairs, most specific first. Of a oneOf (an action's kinds, a
    trigger's forms), the branch the entry meant: the one whose `kind` matches, else the
    one with fewest errors (the more general on a tie); none if no `kind` matched (the
    `enum` error of `kind` says so already)."""
    if error.validator not in ("oneOf", "anyOf") or not error.context:
        return [(list(error.absolute_path), _message(error))]
    branches: dict[int, list] = {}
    for sub_error in error.context:
        branches.setdefault(sub_error.relative_schema_path[0], []).append(sub_error)
    meant = {i: errs for i, errs in branches.items()
             if not any(list(e.relative_schema_path)[-2:] == ["kind", "const"] for e in errs)}
    if not meant:
        return []
    options = error.schema[error.validator]
    best = min(meant, key=lambda i: (len(meant[i]), -len(options[i].get("properties", {}))))
    return [(list(e.absolute_path), _message(e)) for e in meant[best]]


def _message(error) -> str:
    if error.validator == "additionalProperties":
        return f"{error.message}; allowed: {sorted(error.schema.get('properties', {}))}"
    return error.message


def _check_keys(what: str, data: Any, allowed: set[str]) -> None:
    if not isinstance(data, Mapping):
        raise TypeError(f"{what}={data!r}: expected a JSON object")
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise ValueError(f"{what}: unknown key(s) {unknown}; allowed: {sorted(allowed)}")


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 < 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"
