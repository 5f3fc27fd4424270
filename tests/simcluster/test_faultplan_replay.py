"""Plans replay: the same plan on the same job gives the same history (timestamps aside),
and any drawn plan leaves every fault it injected in the history."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from simcluster_waits import wait_until
from test_faultplan_actions import acking, chatty

from simcluster import Cluster, FaultPlan, NodeSpec, SimclusterError, Trigger, action
from simcluster.strategies import fault_plans

pytestmark = pytest.mark.slow

VOLATILE = {"t", "wall", "pid", "seconds"}


def normalized(events: list[dict]) -> list[dict]:
    out = []
    for e in events:
        e = {k: v for k, v in e.items() if k not in VOLATILE}
        if e["event"] == "cluster_start":
            e.pop("address")
        out.append(e)
    return out


def run_job(plan: FaultPlan, path) -> list[dict]:
    with Cluster(nodes=[NodeSpec(cpus=4)], history_path=path, faults=plan) as c:
        acking(c)
        for name, upload_at in (("w0", -1), ("w1", -1), ("w2", 1)):
            c.start_worker("node-0", chatty, (4, upload_at), name=name).wait(10)
        assert c.plan_runs[0].wait(10)
        wait_until(lambda: c.node("node-0").state == "down", 10, "node-0 killed by step 3")
    return normalized(c.history.events())


def test_the_same_plan_replays_the_same_history(tmp_path):
    plan = FaultPlan([
        (Trigger.message("w0", nth=3), action("raise_in_worker", worker="$trigger")),
        (Trigger.message("w1", nth=2), action("kill_worker", worker="$trigger")),
        (Trigger.on("worker_start", worker="w2"), action("fail_upload", worker="$trigger")),
        (Trigger.worker_exit("w2"), action("kill_node", node="$trigger")),
    ], seed=11)
    replayed = FaultPlan.from_json(plan.to_json())
    first = run_job(plan, tmp_path / "a.jsonl")
    second = run_job(replayed, tmp_path / "b.jsonl")
    assert first == second
    kinds = [e["action"] for e in first if e["event"] == "fault"]
    assert kinds == ["raise_in_worker", "kill_worker", "fail_upload", "kill_node"]
    assert [e["reason"] for e in first if e["event"] == "node_down"] == ["killed"]


def job(name):
    from simcluster import worker

    ch = worker.channel()
    for i in range(3):
        ch.send(i)
        ch.recv(10)
        if i == 1:
            worker.before_upload(name)


@settings(max_examples=5, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(fault_plans(nodes=["node-0", "node-1", "$trigger", "worker:w*"],
                   workers=["w*", "w1", "$trigger"], max_steps=3, max_after_s=0.3,
                   max_seconds=0.2, events=("message", "worker_start", "worker_exit",
                                            "node_up", "upload")))
def test_every_injected_fault_is_in_the_history(tmp_path, plan):
    with Cluster(nodes=[NodeSpec(cpus=2), NodeSpec(cpus=2)], grace_s=0.2,
                 history_path=tmp_path / f"h-{uuid.uuid4().hex}.jsonl", faults=plan) as c:
        acking(c)
        handles = []
        for i, node in enumerate(("node-0", "node-1")):
            try:
                handles.append(c.start_worker(node, job, (f"w{i}",), name=f"w{i}",
                                              timeout_s=2))
            except SimclusterError:
                pass  # its node was killed, removed or paused by the plan
        for h in handles:
            try:
                h.wait(3)
            except TimeoutError:
                pass  # e.g. on a node the plan paused
        run = c.plan_runs[0]
        run.wait(0.5)
    recorded = {(e["step"], e["action"]) for e in c.history.events("fault") if "step" in e}
    injected = {(f["step"], f["action"]) for f in run.injected}
    assert injected <= recorded, (plan, injected, recorded)
    assert {step for step, _ in recorded} <= {f["step"] for f in run.injected}, plan
