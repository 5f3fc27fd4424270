"""Every action and trigger of a fault plan, on small process clusters."""

from __future__ import annotations

import signal
import time

import pytest

from simcluster import (
    FaultPlan,
    NodeSpec,
    RecordingProvider,
    SimclusterError,
    Trigger,
    action,
    worker,
)

pytestmark = pytest.mark.slow


def chatty(n: int, upload_at: int = -1):
    """Send n messages, each acknowledged; optionally `before_upload` after message i."""
    ch = worker.channel()
    for i in range(n):
        ch.send(i)
        ch.recv(10)
        if i == upload_at:
            worker.before_upload(f"ckpt-{i}")
    return n


def sleepy(seconds: float = 30.0):
    time.sleep(seconds)


def watch_preemption(timeout: float = 10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        notice = worker.preemption()
        if notice is not None:
            worker.channel().send(("preempted", notice - time.monotonic()))
            time.sleep(60)  # the node goes at the deadline
        time.sleep(0.01)
    return "no notice"


def timed_upload():
    start = time.monotonic()
    worker.before_upload("ckpt")
    return time.monotonic() - start


def acking(cluster):
    def ack(worker_id, _msg):
        try:
            cluster.send(worker_id, "ack")
        except SimclusterError:
            pass  # it was killed meanwhile
    cluster.on_message(ack)


def faults(cluster, **match):
    return [e for e in cluster.history.events("fault")
            if all(e.get(k) == v for k, v in match.items())]


def test_worker_actions_on_message_triggers(make_cluster):
    plan = FaultPlan([
        (Trigger.message("a", nth=3), action("raise_in_worker", worker="$trigger",
                                              error="ValueError", message="boom")),
        (Trigger.message("b*", nth=2), action("kill_worker", worker="$trigger",
                                              signal=signal.SIGTERM)),
    ])
    c = make_cluster(NodeSpec(cpus=4), faults=plan)
    acking(c)
    a = c.start_worker(c.nodes[0].id, chatty, (5,), name="a")
    b = c.start_worker(c.nodes[0].id, chatty, (5,), name="b1")
    assert isinstance(a.wait(10).error, ValueError) and str(a.exit.error) == "boom"
    assert b.wait(10).signal == signal.SIGTERM
    assert c.plan_runs[0].wait(5)
    sent = [e for e in c.history.events("message") if e["direction"] == "from_worker"]
    assert sum(e["worker"] == a.id for e in sent) == 3  # raised at its 3rd: no 4th
    assert sum(e["worker"] == b.id for e in sent) == 2
    assert faults(c, action="raise_in_worker", worker=a.id, step=0)
    assert faults(c, action="kill_worker", worker=b.id, step=1)


def test_upload_faults_hit_the_next_matching_upload(make_cluster):
    plan = FaultPlan([
        (Trigger.after(0), action("fail_upload", worker="f")),
        (Trigger.after(0), action("slow_upload", worker="s", seconds=0.3)),
    ])
    c = make_cluster(faults=plan)
    acking(c)
    assert c.plan_runs[0].wait(5)
    f = c.start_worker(c.nodes[0].id, chatty, (3, 0), name="f")
    assert isinstance(f.wait(10).error, OSError) and "ckpt-0" in str(f.exit.error)
    again = c.start_worker(c.nodes[0].id, chatty, (3, 0), name="f")
    assert again.wait(10).ok  # the fault was for the next upload only
    assert c.start_worker(c.nodes[0].id, timed_upload, name="s").wait(10).result >= 0.3
    uploads = c.history.events("upload")
    assert [u["fault"] for u in uploads] == [0, None, 1]


def test_worker_exit_trigger_and_node_actions(make_cluster):
    plan = FaultPlan([
        (Trigger.worker_exit("victim", signal="*"), action("pause_node", node="node-1",
                                                           seconds=0.2)),
        (Trigger.on("node_resumed", node="node-1"), action("remove_node", node="node-1",
                                                           grace_s=0.1)),
        (Trigger.on("node_down", node="node-1"), action("add_node", spec={"cpus": 3})),
        (Trigger.node_up("node-3"), action("kill_node", node="$trigger")),
        (Trigger.on("node_down", node="node-3"), action("resume_node", node="node-2")),
    ])
    c = make_cluster(NodeSpec(cpus=1), NodeSpec(cpus=1), NodeSpec(cpus=1), faults=plan)
    c.pause_node("node-2")
    c.start_worker("node-0", sleepy, name="victim").kill()
    assert c.plan_runs[0].wait(20), c.plan_runs[0].skipped
    states = {n.id: n.state for n in c.nodes}
    assert states == {"node-0": "up", "node-1": "down", "node-2": "up", "node-3": "down"}
    downs = {e["node"]: e["reason"] for e in c.history.events("node_down")}
    assert downs == {"node-1": "removed", "node-3": "killed"}
    assert [e["action"] for e in c.history.events("fault") if "step" in e] == [
        "pause_node", "resume_node", "remove_node", "add_node", "kill_node", "resume_node"]


def test_preemption_notice_then_removal(make_cluster):
    c = make_cluster(NodeSpec(cpus=2), NodeSpec(cpus=2))
    c.on_message(lambda w, m: notices.append(m))
    notices: list = []
    early = c.start_worker("node-1", watch_preemption, name="early")
    # a deadline long enough for the late worker to start and be told on a loaded machine
    run = c.run_plan(FaultPlan([(Trigger.after(0.1), action("preempt_node", node="node-1",
                                                            deadline_s=3.0))]))
    late = c.start_worker("node-1", watch_preemption, name="late")  # told on its start
    assert run.wait(10)
    assert early.wait(5).reason == "preempted" and late.wait(5).reason == "preempted"
    # Both saw the deadline before the node went (the time left depends on the load here).
    assert len(notices) == 2 and all(left <= 3.0 for _, left in notices), notices
    assert c.node("node-1").state == "down"
    assert [e["reason"] for e in c.history.events("node_down")] == ["preempted"]


def test_time_triggers_seeded_picks_and_skips(make_cluster):
    plan = FaultPlan([(Trigger.after(0.05), action("kill_worker", worker="w*")),
                      (Trigger.after(0.05), action("kill_node", node="node-9"))], seed=3)
    picks = []
    for _ in range(2):
        c = make_cluster(NodeSpec(cpus=4))
        ws = [c.start_worker("node-0", sleepy, name=f"w{i}") for i in range(4)]
        run = c.run_plan(plan)
        assert run.wait(5)
        killed = [w for w in ws if w.id == run.injected[0]["worker"]]
        assert killed[0].wait(5).signal == signal.SIGKILL
        assert sum(w.exit is not None for w in ws) == 1
        picks.append(killed[0].name)
        assert run.skipped and "node-9" in run.skipped[0]["why"]
        assert c.history.events("plan_skipped")[0]["step"] == 1
        c.close()
    assert picks[0] == picks[1]


def test_partitions_need_netns_and_are_recorded_by_the_fake(make_cluster):
    plan = FaultPlan([(Trigger.after(0), action("partition", nodes=["node-1"], seconds=0.1))])
    with pytest.raises(ValueError, match="needs provider='netns'.*'process'"):
        make_cluster(NodeSpec(), NodeSpec(), faults=plan)
    fake = RecordingProvider()
    c = make_cluster(NodeSpec(), NodeSpec(), provider=fake, faults=plan)
    assert c.plan_runs[0].wait(5)
    assert fake.cuts == [("node-1", True), ("node-1", False)]
    assert [e["nodes"] for e in c.history.events("heal")] == [["node-1"]]


def test_resume_of_a_running_node_is_skipped_not_claimed(tmp_path):
    from simcluster import Cluster, FaultPlan, NodeSpec, Trigger, action

    plan = FaultPlan([(Trigger.after(0.0), action("resume_node", node="node-0"))])
    with Cluster(nodes=[NodeSpec(cpus=1)], faults=plan,
                 history_path=tmp_path / "h.jsonl") as c:
        run = c.plan_runs[0]
        assert run.wait(5)
    assert run.injected == []
    assert [s["step"] for s in run.skipped] == [0]
    assert not [e for e in c.history.events("fault") if e.get("action") == "resume_node"]
