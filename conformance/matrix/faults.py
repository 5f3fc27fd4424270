"""The matrix's fault kinds: what each asks of the run, does during it, and expects after.

A `FaultKind` is data (cluster shape, workers, failure budget, the probe's worker-side
faults, the script's pace) plus two functions over a running `Cell` (see `_matrix_cells`):
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
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Callable

from conformance import assertions, journal_checks
from conformance.adapters.base import NodeSpec, Unsupported
from conformance.probe import Fault
from conformance.scenarios import wait_for

PAUSE_S = 2.0
ELASTIC_INTERVAL_S = 2.0
SETTLE_S = 0.5
NODE_STEP_S = 1.0


@dataclasses.dataclass(frozen=True)
class FaultKind:
    name: str
    doc: str
    #: the cluster the cell runs on; None: the adapter's default one
    nodes: tuple | None = None
    #: adapter capabilities the cell needs (a missing one makes the cell unsupported)
    needs: tuple = ()
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
    cell.handle.kill_node(node)


def _kill_node_of_last_rank(cell) -> None:
    await_acknowledged(cell)
    world = cell.run.events("start")[0]["world_size"]
    node = node_of_rank(cell, world - 1)
    cell.facts["killed"] = node_key(node)
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
    assertions.verdict(journal_checks.restores_latest(events), setting)
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
    assertions.verdict(journal_checks.restores_latest(events), setting)
    _ran_to_the_end(cell, result)


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
    assertions.verdict(journal_checks.restores_latest(events), setting)


def _expect_shrunk(cell) -> None:
    r, setting = cell.run, cell.setting
    result = assertions.succeeded(r.outcome, setting)
    events = r.events()
    sizes = _sizes(events)
    assertions.equal((sizes[0], sizes[-1]), (4, 2),
                     "world sizes of the first and the last attempt", setting)
    assertions.verdict(journal_checks.world_size_within(events, 1, 4), setting)
    assertions.verdict(journal_checks.ranks_complete(events), setting)
    assertions.verdict(journal_checks.restores_latest(events), setting)
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
        "preemption", "a node is preempted (drained with notice, as a spot instance is)",
        unsupported="no adapter offers a preemption action (drain a node with notice); "
                    "ClusterHandle has add/remove/kill/pause/resume only",
    ),
    FaultKind(
        "failed-upload", "a checkpoint upload to storage_path fails",
        unsupported="no adapter offers a storage fault action (make a checkpoint upload "
                    "fail); the probe can only fault workers",
    ),
]}
