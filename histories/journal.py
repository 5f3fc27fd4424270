"""Jepsen-style checkers over a journal: the events of the ranks of a fit, in order.

The events (each a dict with `ev`, `rank`, `attempt`):
- `start`: a rank's training function began; with `world_size`, `local_rank`,
  `local_world_size`, `node_rank`, `node_id` (None: unknown) and `restored` (the restored
  checkpoint's state, e.g. `{"step": 3}`, or None);
- `report`: the rank calls report() for `step`, `checkpoint` telling whether it passes one;
- `reported`: that report() returned on the rank (the round was acknowledged to it).

`conformance.probe` writes them on a real cluster; `reference.train.simulation` builds them
from a simulated fit. Each checker returns a `Verdict`: `valid`, `invalid` (with the
evidence) or `unknown` (the journal cannot decide, e.g. nothing started). Checkers never
raise on bad journals.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict


@dataclasses.dataclass(frozen=True)
class Verdict:
    name: str
    status: str  # "valid" | "invalid" | "unknown"
    reason: str = ""

    @property
    def valid(self) -> bool:
        return self.status == "valid"


def _ok(name):
    return Verdict(name, "valid")


def _bad(name, reason):
    return Verdict(name, "invalid", reason)


def _unknown(name, reason):
    return Verdict(name, "unknown", reason)


def attempts(events: list[dict]) -> dict[int, list[dict]]:
    """Start events grouped by attempt number."""
    out: dict[int, list[dict]] = defaultdict(list)
    for e in events:
        if e["ev"] == "start":
            out[e["attempt"]].append(e)
    return dict(sorted(out.items()))


def ranks_complete(events: list[dict]) -> Verdict:
    """Every attempt's ranks are exactly 0..N-1, each once, agreeing on N."""
    name = "ranks_complete"
    groups = attempts(events)
    if not groups:
        return _unknown(name, "no worker started")
    for a, starts in groups.items():
        sizes = {s["world_size"] for s in starts}
        ranks = sorted(s["rank"] for s in starts)
        if len(sizes) != 1:
            return _bad(name, f"attempt {a}: ranks disagree on world size: {sorted(sizes)}")
        if ranks != list(range(sizes.pop())):
            return _bad(name, f"attempt {a}: ranks {ranks} are not 0..N-1 once each")
    return _ok(name)


def contiguous_per_node(events: list[dict]) -> Verdict:
    """World ranks contiguous per node; local ranks 0..k-1 per node; node ranks in order."""
    name = "contiguous_per_node"
    groups = attempts(events)
    if not groups:
        return _unknown(name, "no worker started")
    for a, starts in groups.items():
        starts = sorted(starts, key=lambda s: s["rank"])
        if any(s["node_id"] is None for s in starts):
            return _unknown(name, "the adapter cannot tell which node a worker is on")
        by_node: dict[str, list[dict]] = defaultdict(list)
        order: list[str] = []
        for s in starts:
            if s["node_id"] not in by_node:
                order.append(s["node_id"])
            by_node[s["node_id"]].append(s)
        for node_rank, node in enumerate(order):
            members = by_node[node]
            ranks = [m["rank"] for m in members]
            if ranks != list(range(ranks[0], ranks[0] + len(ranks))):
                return _bad(name, f"attempt {a}: node {node} holds ranks {ranks}, not contiguous")
            locals_ = [m["local_rank"] for m in members]
            if locals_ != list(range(len(members))):
                return _bad(name, f"attempt {a}: node {node} local ranks {locals_}")
            if {m["local_world_size"] for m in members} != {len(members)}:
                return _bad(name, f"attempt {a}: node {node} local_world_size "
                                  f"{[m['local_world_size'] for m in members]}, expected "
                                  f"{len(members)}")
            if {m["node_rank"] for m in members} != {node_rank}:
                return _bad(name, f"attempt {a}: node {node} node_rank "
                                  f"{[m['node_rank'] for m in members]}, expected {node_rank}")
    return _ok(name)


def world_size_within(events: list[dict], lo: int, hi: int) -> Verdict:
    name = "world_size_within"
    groups = attempts(events)
    if not groups:
        return _unknown(name, "no worker started")
    for a, starts in groups.items():
        n = starts[0]["world_size"]
        if not lo <= n <= hi:
            return _bad(name, f"attempt {a} ran with world size {n}, outside [{lo}, {hi}]")
    return _ok(name)


def acknowledged_steps(events: list[dict], attempt: int, by: float | None = None,
                       in_flight: int = 0) -> list[int]:
    """Checkpointed steps of an attempt whose report returned on every rank (by time `by`,
    on the journal's clock `t`, when given). `in_flight` leaves out each rank's last that
    many returned reports: ones a controller may not have taken yet when it stopped the
    group (Ray 2.60 queues one report per rank, `Queue(maxsize=1)`: a rank's report returns
    once the previous one was taken, so only the newest can still be waiting)."""
    starts = attempts(events).get(attempt, [])
    if not starts:
        return []
    world = starts[0]["world_size"]
    ckpt_steps = {e["step"] for e in events
                  if e["ev"] == "report" and e["attempt"] == attempt and e["checkpoint"]}
    per_rank: dict[int, list[int]] = defaultdict(list)
    for e in events:
        if e["ev"] == "reported" and e["attempt"] == attempt and (by is None or e["t"] <= by):
            per_rank[e["rank"]].append(e["step"])
    returned: dict[int, set] = defaultdict(set)
    for rank, steps in per_rank.items():
        for step in steps[:len(steps) - in_flight]:
            returned[step].add(rank)
    return sorted(s for s in ckpt_steps if len(returned[s]) == world)


def restores_latest(events: list[dict], allow_newer_unacknowledged: bool = True,
                    acknowledged_by: float | None = None, in_flight: int = 0) -> Verdict:
    """Each restarted attempt restores at least the latest acknowledged checkpoint.

    The restored step is compared with the steps whose report returned on every rank of
    the previous attempts (acknowledged); a restore of an unacknowledged later step is
    allowed (its report may have been consumed before the failure). `acknowledged_by`
    (the journal's clock) counts only the reports that returned by then: a fault injected
    from outside the ranks at time T guarantees, by the contract, only what was acknowledged
    a settling pause before T (Ray 2.60 registers a report when its controller next polls
    the rank; one that returned but was not yet polled is lost with the rank's node).
    `in_flight` leaves out each rank's newest returned reports (see `acknowledged_steps`):
    for a group the controller stops at a moment of its own choosing, as on an elastic
    resize, when no outside clock says what it had taken.
    """
    name = "restores_latest"
    groups = attempts(events)
    if len(groups) < 2:
        return _unknown(name, "no restart happened")
    acked: list[int] = []
    for a, starts in groups.items():
        if a > 0:
            want = max(acked) if acked else None
            for s in starts:
                got = (s["restored"] or {}).get("step")
                if want is not None and (got is None or got < want):
                    return _bad(name, f"attempt {a} rank {s['rank']} restored step {got}, but "
                                      f"step {want} was acknowledged on every rank before")
                if want is None and got is not None and not allow_newer_unacknowledged:
                    return _bad(name, f"attempt {a} rank {s['rank']} restored step {got}, "
                                      "none was acknowledged")
            if len({(s["restored"] or {}).get("step") for s in starts}) > 1:
                return _bad(name, f"attempt {a}: ranks restored different steps: "
                                  f"{[(s['rank'], (s['restored'] or {}).get('step')) for s in starts]}")
        acked.extend(acknowledged_steps(events, a, acknowledged_by, in_flight))
    return _ok(name)


def checkpoints_whole(events: list[dict], run_dir: str) -> Verdict:
    """Every checkpoint folder visible in the run folder holds the shards of the ranks that
    passed a checkpoint in its round, each a complete JSON file (nothing half-written). A
    folder that rank 0's reports named at several steps (`dir_name` of the report events)
    merges them: its shards may come from any of those steps, and the latest such step's
    writers all have theirs."""
    import json
    import os

    name = "checkpoints_whole"
    if not os.path.isdir(run_dir):
        return _unknown(name, f"{run_dir} does not exist")
    for entry in sorted(os.listdir(run_dir)):
        folder = os.path.join(run_dir, entry)
        if entry.startswith(".") or not os.path.isdir(folder):
            continue
        shards = [n for n in os.listdir(folder) if n.startswith("shard-")]
        if not shards:
            return _bad(name, f"{entry} holds no shard")
        steps = set()
        for n in shards:
            try:
                with open(os.path.join(folder, n)) as f:
                    steps.add(json.load(f)["step"])
            except (OSError, ValueError, KeyError) as exc:
                return _bad(name, f"{entry}/{n} is not whole: {exc}")
        named = {e["step"] for e in events if e["ev"] == "report" and e.get("rank") == 0
                 and e.get("dir_name") == entry}
        if len(named) > 1 and steps <= named:
            step = max(steps)
        elif len(steps) != 1:
            return _bad(name, f"{entry} mixes shards of steps {sorted(steps)}")
        else:
            step = steps.pop()
        # the latest attempt that reported this step decides which ranks wrote shards
        writers = {e["rank"] for e in events if e["ev"] == "report" and e["step"] == step
                   and e["checkpoint"]}
        missing = sorted(r for r in writers if f"shard-{r}.json" not in shards)
        if missing:
            return _bad(name, f"{entry} lacks the shards of ranks {missing}")
    return _ok(name)


ALWAYS = {
    "ranks_complete": lambda events, run_dir: ranks_complete(events),
    "restores_latest": lambda events, run_dir: restores_latest(events),
    "checkpoints_whole": checkpoints_whole,
}
