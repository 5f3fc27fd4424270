"""The matrix's fault kinds: what each asks of the run, does during it, and expects after.

A `FaultKind` is data (cluster shape, workers, failure budget, the probe's worker-side
faults, the script's pace) plus two functions over a running `Cell` (see `cells`):
`action`, run on the driver's main thread while the fit runs in the background (Ray's
cluster_utils adds and removes nodes with signals, so only the main thread may), and
`expect`, the assertions on the finished first run. Node faults pick their node from the
journal: the `node_id` of a rank's start event, matched to the cluster handle's nodes.

Ordering hazards. A node fault must strike mid-run, and not in the instant after a report
returned: an implementation may still be registering that report (Ray 2.60 drops one it
has not consumed yet at a restart; that weaker guarantee is the SHOULD clause
fault.acknowledged-checkpoint, while fault.restore-latest leaves 0.5 s). So the action
waits until the journal shows two checkpointed steps acknowledged on every rank and
`SETTLE_S` more, and gives up (the cell fails with "never fired") if the run ends or the
deadline passes first. Node faults pace their steps at `NODE_STEP_S` > `SETTLE_S`, so
the fault lands between two reports; worker faults keep 0.5 s before every report, as
`check_faults` does. Journal times are `time.monotonic()` of the worker processes, which
on Linux is one clock for every process of the machine.

Preemption and failed upload go through the adapter's cluster handle
(`ClusterHandle.preempt_node`, `fail_next_upload`). What they expect, from Ray 2.60's
contract as the reference implements it: a preempted node's failure is charged to
`FailureConfig.max_preemption_failures` (unlimited by default), not to `max_failures`, so
the cell runs with max_failures=0 and must still finish, moved off the node and resumed from
the latest checkpoint. A failed upload fails that rank's `train.report()` before anything
reaches storage: the round's checkpoint never becomes visible (no folder holds it, the
restart restores the step before), the failure is an ordinary one charged to
max_failures=1, and the run finishes with a later checkpoint. Rank 0's upload is the one
failed: a user's job may checkpoint from rank 0 only.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from typing import Any, Callable

from conformance import assertions, journal_checks
from conformance.adapters.base import NodeSpec, Unsupported
from conformance.matrix.job_file import read_marker
from conformance.probe import Fault
from conformance.scenarios import wait_for

PAUSE_S = 2.0
ELASTIC_INTERVAL_S = 2.0
SETTLE_S = 0.5
NODE_STEP_S = 1.0
PREEMPT_DEADLINE_S = 1.0


@dataclasses.dataclass(frozen=True)
class FaultKind:
    name: str
    doc: str
    #: the cluster the cell runs on; None: the adapter's default one
    nodes: tuple | None = None
    #: adapter capabilities the cell needs (a missing one makes the cell unsupported)
    needs: tuple = ()
    #: capability -> what an adapter lacking it cannot do (ends the unsupported reason)
    needs_hint: dict = dataclasses.field(default_factory=dict)
    num_workers: Any = 2
    max_failures: int = 1
    probe_faults: tuple = ()
    steps: int = 8
    step_sleep_s: float = 0.5
    stop_at_world_size: int | None = None
    elastic_interval_s: float | None = None
    #: multiple of the adapter's fit deadline each fit of the cell gets
    deadline_scale: float = 1.0
    action: Callable | None = None
    expect: Callable | None = None
    #: non-empty: no adapter can inject this fault yet; the reason the cell is unsupported
    unsupported: str = ""


# ------------------------------------------------------------------ driver-side actions
def _ended(events: list[dict]) -> bool:
    return any(e["ev"] == "end" for e in events)


def await_acknowledged(cell, count: int = 2) -> None:
    """Wait until `count` checkpointed steps of attempt 0 were acknowledged on every rank,
    the latest of them at least `SETTLE_S` ago."""
    def ready():
        events = cell.run.events()
        acked = journal_checks.acknowledged_steps(events, 0)
        if _ended(events):
            return True
        if len(acked) < count:
            return False
        settled = max(e["t"] for e in events if e["ev"] == "reported"
                      and e["attempt"] == 0 and e["step"] == acked[-1])
        return time.monotonic() - settled >= SETTLE_S

    wait_for(ready, timeout_s=cell.deadline_s, interval_s=0.05)
    events = cell.run.events()
    acked = journal_checks.acknowledged_steps(events, 0)
    if len(acked) < count or _ended(events):
        state = "the run ended" if _ended(events) else f"{cell.deadline_s:.0f} s passed"
        raise AssertionError(f"{cell.fault.name} never fired: {state} with steps {acked} of "
                             f"attempt 0 acknowledged, waiting for {count}")


def _faulted_now(cell) -> None:
    """Note when a fault injected from outside the ranks began (the journal's clock)."""
    cell.facts["fault_at"] = time.monotonic()


def _restores_latest(cell, events: list[dict], in_flight: int = 0):
    """`journal_checks.restores_latest`; after a fault from outside the ranks, against the
    steps acknowledged `SETTLE_S` before it began: the pause the clause fault.restore-latest
    leaves between a report and the next fault (`await_acknowledged` waits it out for the
    latest step, but the ranks go on reporting while the fault is set up). `in_flight`: see
    `journal_checks.acknowledged_steps`."""
    at = cell.facts.get("fault_at")
    return journal_checks.restores_latest(
        events, acknowledged_by=None if at is None else at - SETTLE_S, in_flight=in_flight)


def node_key(node) -> str | None:
    """The id a worker on `node` reports through the adapter's `node_id_function`:
    simcluster's `Node.id`, or the `node_id` of a Ray cluster_utils node."""
    for attr in ("id", "node_id"):
        value = getattr(node, attr, None)
        if isinstance(value, str):
            return value
    return None


def node_of_rank(cell, rank: int, attempt: int = 0):
    """The cluster handle's node that the journal says `rank` started on."""
    starts = [e for e in cell.run.events("start")
              if e["rank"] == rank and e["attempt"] == attempt]
    if not starts:
        raise AssertionError(f"no start event of rank {rank} in attempt {attempt}")
    node_id = starts[0]["node_id"]
    if node_id is None:
        raise Unsupported(f"adapter {cell.impl.name!r} cannot tell which node a worker is on "
                          "(its node_id_function() is None)")
    for node in cell.handle.nodes:
        if node_key(node) == node_id:
            return node
    raise AssertionError(f"rank {rank} started on node {node_id!r}, none of the cluster's "
                         f"nodes {[node_key(n) for n in cell.handle.nodes]}")


def _kill_node_of_rank_1(cell) -> None:
    await_acknowledged(cell)
    node = node_of_rank(cell, 1)
    cell.facts["killed"] = node_key(node)
    _faulted_now(cell)
    cell.handle.kill_node(node)


def _kill_node_of_last_rank(cell) -> None:
    await_acknowledged(cell)
    world = cell.run.events("start")[0]["world_size"]
    node = node_of_rank(cell, world - 1)
    cell.facts["killed"] = node_key(node)
    _faulted_now(cell)
    cell.handle.kill_node(node)


def _pause_node_of_rank_1(cell) -> None:
    await_acknowledged(cell)
    node = node_of_rank(cell, 1)
    cell.handle.pause_node(node)
    try:
        time.sleep(PAUSE_S)  # the fault itself lasts this long; nothing to wait for
    finally:
        cell.handle.resume_node(node)
    cell.facts["resumed_at"] = time.monotonic()
    cell.facts["paused"] = node_key(node)


def _preempt_node_of_rank_1(cell) -> None:
    await_acknowledged(cell)
    node = node_of_rank(cell, 1)
    cell.facts["killed"] = node_key(node)
    _faulted_now(cell)
    cell.handle.preempt_node(node, deadline_s=PREEMPT_DEADLINE_S)


def _fail_upload_of_rank_0(cell) -> None:
    await_acknowledged(cell)
    cell.handle.fail_next_upload(rank=0)


def _add_node(cell) -> None:
    started = wait_for(lambda: cell.run.events("start"), timeout_s=cell.deadline_s / 2)
    cell.facts["sizes_before"] = sorted({s["world_size"] for s in cell.run.events("start")})
    if not started:
        raise AssertionError(f"no worker group started within {cell.deadline_s / 2:.0f} s "
                             "on the first node")
    cell.handle.add_node(NodeSpec(cpus=2))


# ------------------------------------------------------------------ expectations
def _sizes(events: list[dict]) -> list[int]:
    return [starts[0]["world_size"] for starts in journal_checks.attempts(events).values()]


def _ran_to_the_end(cell, result) -> None:
    assertions.equal((result.metrics or {}).get("step"), cell.fault.steps - 1,
                     "result.metrics['step']", cell.setting)


def _expect_one_restart(cell) -> None:
    r, setting = cell.run, cell.setting
    result = assertions.succeeded(r.outcome, setting)
    events = r.events()
    assertions.equal(len(r.events("fault")), 1, "faults that fired", setting)
    assertions.equal(len(journal_checks.attempts(events)), 2, "attempts started", setting)
    assertions.verdict(journal_checks.ranks_complete(events), setting)
    assertions.verdict(_restores_latest(cell, events), setting)
    _ran_to_the_end(cell, result)


def _expect_moved_off_lost_node(cell) -> None:
    r, setting = cell.run, cell.setting
    result = assertions.succeeded(r.outcome, setting)
    events = r.events()
    groups = journal_checks.attempts(events)
    assertions.equal(len(groups), 2, "attempts started (one restart after the node loss)", setting)
    last = groups[max(groups)]
    assertions.equal(sorted(s["rank"] for s in last), [0, 1], "ranks of the restarted group",
                     setting)
    nodes = sorted({s["node_id"] for s in last})
    assertions.equal(cell.facts["killed"] in nodes, False,
                     f"the killed node {cell.facts['killed']!r} among the nodes of the restarted "
                     f"group {nodes}", setting)
    assertions.verdict(_restores_latest(cell, events), setting)
    _ran_to_the_end(cell, result)


def _expect_preempted(cell) -> None:
    cell.setting += " (max_failures=0: a preemption is charged to max_preemption_failures)"
    _expect_moved_off_lost_node(cell)


def checkpoint_rounds(run_dir: str) -> dict[str, list[tuple]]:
    """Folder name -> (step, attempt) of each shard (the probe's jobs) or of the marker (a
    job file) in every checkpoint folder of the run folder."""
    out: dict[str, list[tuple]] = {}
    for entry in sorted(os.listdir(run_dir)) if os.path.isdir(run_dir) else ():
        folder = os.path.join(run_dir, entry)
        if entry.startswith(".") or not os.path.isdir(folder):
            continue
        found = []
        for name in sorted(os.listdir(folder)):
            if name.startswith("shard-"):
                with open(os.path.join(folder, name)) as f:
                    found.append(json.load(f))
        marker = read_marker(folder)
        found += [marker] if marker is not None else []
        out[entry] = [(m["step"], m["attempt"]) for m in found]
    return out


def _held_step(checkpoint) -> int | None:
    """The step a checkpoint holds: its marker, else its first shard (None: neither)."""
    if checkpoint is None:
        return None
    with checkpoint.as_directory() as d:
        marker = read_marker(d)
        shards = sorted(n for n in os.listdir(d) if n.startswith("shard-"))
        if marker is None and shards:
            with open(os.path.join(d, shards[0])) as f:
                marker = json.load(f)
    return None if marker is None else marker["step"]


def _expect_upload_retried(cell) -> None:
    r, setting = cell.run, cell.setting
    result = assertions.succeeded(r.outcome, setting)
    events = r.events()
    groups = journal_checks.attempts(events)
    assertions.equal(len(groups), 2, "attempts started (one restart after the failed upload)",
                     setting)
    returned = {e["step"] for e in events
                if e["ev"] == "reported" and e["rank"] == 0 and e["attempt"] == 0}
    failed = [e["step"] for e in events if e["ev"] == "report" and e["rank"] == 0
              and e["attempt"] == 0 and e["checkpoint"] and e["step"] not in returned]
    if not failed:
        raise AssertionError("every checkpointed report of rank 0 in attempt 0 returned: the "
                             f"upload set to fail did not fail train.report() [{setting}]")
    step = failed[0]
    restored = sorted({(s["restored"] or {}).get("step") for s in groups[1]}, key=str)
    assertions.equal(restored, [step - 1], f"steps restored by attempt 1 (the upload of step "
                     f"{step} failed, so its checkpoint must not exist)", setting)
    partial = {name: rounds for name, rounds in checkpoint_rounds(r.run_dir).items()
               if (step, 0) in rounds}
    assertions.equal(partial, {}, f"checkpoint folders holding step {step} of attempt 0, "
                     "whose upload failed", setting)
    _ran_to_the_end(cell, result)
    assertions.equal(_held_step(result.checkpoint), cell.fault.steps - 1,
                     "step held by result.checkpoint", setting)


def _expect_no_failure(cell) -> None:
    r, setting = cell.run, cell.setting
    result = assertions.succeeded(r.outcome, setting)
    events = r.events()
    assertions.equal(len(journal_checks.attempts(events)), 1,
                     f"attempts started (node {cell.facts['paused']!r} paused {PAUSE_S} s)",
                     setting)
    later = [e for e in events if e["ev"] == "reported" and e["t"] > cell.facts["resumed_at"]]
    assertions.equal(bool(later), True, "reports returned after the node resumed", setting)
    _ran_to_the_end(cell, result)


def _expect_grown(cell) -> None:
    r, setting = cell.run, cell.setting
    assertions.succeeded(r.outcome, setting + " (max_failures=0: a resize is not a failure)")
    events = r.events()
    assertions.equal(cell.facts["sizes_before"], [2], "world sizes before the node was added",
                     setting)
    assertions.equal(_sizes(events)[-1], 4, "world size of the last attempt", setting)
    assertions.verdict(journal_checks.world_size_within(events, 1, 4), setting)
    assertions.verdict(journal_checks.ranks_complete(events), setting)
    # the controller stops the group for the resize at a poll of its own: each rank's newest
    # returned report may not have been taken yet
    assertions.verdict(_restores_latest(cell, events, in_flight=1), setting)


def _expect_shrunk(cell) -> None:
    r, setting = cell.run, cell.setting
    result = assertions.succeeded(r.outcome, setting)
    events = r.events()
    sizes = _sizes(events)
    assertions.equal((sizes[0], sizes[-1]), (4, 2),
                     "world sizes of the first and the last attempt", setting)
    assertions.verdict(journal_checks.world_size_within(events, 1, 4), setting)
    assertions.verdict(journal_checks.ranks_complete(events), setting)
    assertions.verdict(_restores_latest(cell, events), setting)
    _ran_to_the_end(cell, result)


# ------------------------------------------------------------------ the kinds
def _worker_fault(kind: str, what: str) -> FaultKind:
    return FaultKind(
        f"worker-{kind}", f"rank 1 {what} just before its 2nd report on attempt 0",
        probe_faults=(Fault(kind, rank=1, report=1, attempt=0),), steps=4,
        expect=_expect_one_restart,
    )


FAULTS: dict[str, FaultKind] = {f.name: f for f in [
    _worker_fault("raise", "raises"),
    _worker_fault("sigkill", "is SIGKILLed"),
    FaultKind(
        "node-loss", "the node of rank 1 is killed after 2 acknowledged steps",
        nodes=(NodeSpec(cpus=1),) * 3, needs=("multinode", "kill_node"), steps=6,
        step_sleep_s=NODE_STEP_S, action=_kill_node_of_rank_1,
        expect=_expect_moved_off_lost_node,
    ),
    FaultKind(
        "node-pause", f"the node of rank 1 is paused for {PAUSE_S} s after 2 acknowledged "
                      "steps, then resumed",
        nodes=(NodeSpec(cpus=1),) * 2, needs=("multinode", "pause_node"), steps=6,
        step_sleep_s=NODE_STEP_S, action=_pause_node_of_rank_1, expect=_expect_no_failure,
    ),
    FaultKind(
        "elastic-grow", "num_workers=(1, 4) on 1 node x 2 CPUs; a second node is added once "
                        "a group started",
        nodes=(NodeSpec(cpus=2),), needs=("multinode", "add_node", "elastic"),
        num_workers=(1, 4), max_failures=0, steps=160, step_sleep_s=0.25,
        stop_at_world_size=4, elastic_interval_s=ELASTIC_INTERVAL_S, deadline_scale=2.0,
        action=_add_node, expect=_expect_grown,
    ),
    FaultKind(
        "elastic-shrink", "num_workers=(1, 4) on 2 nodes x 2 CPUs; the node of the last rank "
                          "is killed after 2 acknowledged steps",
        nodes=(NodeSpec(cpus=2),) * 2, needs=("multinode", "kill_node", "elastic"),
        num_workers=(1, 4), steps=8, step_sleep_s=NODE_STEP_S,
        elastic_interval_s=ELASTIC_INTERVAL_S,
        deadline_scale=2.0, action=_kill_node_of_last_rank, expect=_expect_shrunk,
    ),
    FaultKind(
        "preemption", f"the node of rank 1 is preempted after 2 acknowledged steps (notice, "
                      f"then gone {PREEMPT_DEADLINE_S:g} s later)",
        nodes=(NodeSpec(cpus=1),) * 3, needs=("multinode", "preempt_node"),
        needs_hint={"preempt_node": "its cluster can remove or kill a node but not give the "
                                    "workers a preemption notice first "
                                    "(ClusterHandle.preempt_node)"},
        max_failures=0, steps=6, step_sleep_s=NODE_STEP_S, action=_preempt_node_of_rank_1,
        expect=_expect_preempted,
    ),
    FaultKind(
        "failed-upload", "rank 0's checkpoint upload fails once, after 2 acknowledged steps",
        nodes=(NodeSpec(cpus=2),), needs=("multinode", "fail_upload"),
        needs_hint={"fail_upload": "it has no hook between a worker and storage to fail one "
                                   "checkpoint upload (ClusterHandle.fail_next_upload)"},
        steps=6, step_sleep_s=NODE_STEP_S, action=_fail_upload_of_rank_0,
        expect=_expect_upload_retried,
    ),
]}
