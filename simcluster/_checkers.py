"""Jepsen-style checkers over a cluster history (see `_history.py` for the events).

Each checker takes the list of events (`History.read(path)` or `cluster.history.events()`)
and returns a `Verdict`: "valid", "invalid" with the evidence, or "unknown" when the history
cannot decide (it stops before `cluster_stop`, so a worker may simply still be running).
Checkers never raise on a malformed history; they say "unknown" instead.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from .driver.placement import to_units


@dataclasses.dataclass(frozen=True)
class Verdict:
    name: str
    status: str  # "valid" | "invalid" | "unknown"
    reason: str = ""

    @property
    def valid(self) -> bool:
        return self.status == "valid"

    def __str__(self) -> str:
        return f"{self.name}: {self.status}" + (f" ({self.reason})" if self.reason else "")


def _guard(fn: Callable[[list[dict]], Verdict]) -> Callable[[list[dict]], Verdict]:
    def checker(events: list[dict]) -> Verdict:
        try:
            return fn(events)
        except (KeyError, TypeError, ValueError) as exc:
            return Verdict(fn.__name__, "unknown", f"malformed history: {exc!r}")
    checker.__name__ = fn.__name__
    checker.__doc__ = fn.__doc__
    return checker


@_guard
def every_worker_exits(events: list[dict]) -> Verdict:
    """Every started worker has exactly one exit, and no exit lacks a start."""
    name = "every_worker_exits"
    started, exits = {}, {}
    for e in events:
        if e["event"] == "worker_start":
            started[e["worker"]] = e
        elif e["event"] == "worker_exit":
            if e["worker"] in exits:
                return Verdict(name, "invalid", f"worker {e['worker']} exited twice "
                                                f"(seq {exits[e['worker']]['seq']} and {e['seq']})")
            if e["worker"] not in started:
                return Verdict(name, "invalid", f"worker {e['worker']} exited without a start "
                                                f"(seq {e['seq']})")
            exits[e["worker"]] = e
    missing = sorted(set(started) - set(exits))
    if not missing:
        return Verdict(name, "valid")
    if not any(e["event"] == "cluster_stop" for e in events):
        return Verdict(name, "unknown", f"history ends before cluster_stop; {missing} may still run")
    return Verdict(name, "invalid", f"workers {missing} started and never exited")


@_guard
def no_worker_on_down_node(events: list[dict]) -> Verdict:
    """No worker started, or sent a message, on a node after that node went down."""
    name = "no_worker_on_down_node"
    down: dict[str, int] = {}
    node_of: dict[str, str] = {}
    for e in events:
        kind = e["event"]
        if kind == "node_down":
            down[e["node"]] = e["seq"]
        elif kind == "worker_start":
            node_of[e["worker"]] = e["node"]
            if e["node"] in down:
                return Verdict(name, "invalid", f"worker {e['worker']} started (seq {e['seq']}) on "
                                                f"{e['node']}, down since seq {down[e['node']]}")
        elif kind == "message" and e.get("direction") == "from_worker":
            node = node_of.get(e["worker"])
            if node in down:
                return Verdict(name, "invalid", f"worker {e['worker']} sent a message (seq "
                                                f"{e['seq']}) from {node}, down since seq {down[node]}")
    return Verdict(name, "valid")


@_guard
def never_oversubscribed(events: list[dict]) -> Verdict:
    """The placements held on a node never ask for more than the node has."""
    name = "never_oversubscribed"
    totals: dict[str, dict[str, int]] = {}
    held: dict[str, list[tuple[str, dict]]] = {}
    used: dict[str, dict[str, int]] = {}

    def add(node: str, bundle: dict, sign: int) -> None:
        for key, amount in bundle.items():
            used.setdefault(node, {})[key] = used.get(node, {}).get(key, 0) + sign * to_units(amount)

    for e in events:
        kind = e["event"]
        if kind == "node_up":
            totals[e["node"]] = {k: to_units(v) for k, v in e["resources"].items()}
        elif kind == "node_down":
            totals.pop(e["node"], None)
            used.pop(e["node"], None)
        elif kind == "placement":
            pairs = list(zip(e["nodes"], e["bundles"], strict=True))
            held[e["placement"]] = pairs
            for node, bundle in pairs:
                add(node, bundle, +1)
                for key, units in used.get(node, {}).items():
                    if units > totals.get(node, {}).get(key, 0):
                        return Verdict(name, "invalid", f"{node} holds {key}={units / 1e4} > its "
                                       f"{totals.get(node, {}).get(key, 0) / 1e4} after "
                                       f"placement {e['placement']} (seq {e['seq']})")
        elif kind == "placement_released":
            for node, bundle in held.pop(e["placement"], []):
                if node in totals:
                    add(node, bundle, -1)
    return Verdict(name, "valid")


CHECKERS = (every_worker_exits, no_worker_on_down_node, never_oversubscribed)


def check_all(events: list[dict]) -> dict[str, Verdict]:
    """Run every checker; returns name -> Verdict."""
    return {check.__name__: check(events) for check in CHECKERS}
