"""Reference fits under simcluster fault plans: the runtime honours upload faults and
recovers from faults the plan injects (the cluster's history records each one)."""

import os
import time

import pytest

import reference
import reference.train as t
import simcluster
from reference import PRELOAD
from simcluster import FaultPlan, Trigger, action

pytestmark = pytest.mark.slow


def _train(config):
    ctx = t.get_context()
    start = t.get_checkpoint()
    first = 0
    if start is not None:
        with start.as_directory() as d:
            first = int(open(os.path.join(d, "step")).read()) + 1
    for step in range(first, 4):
        time.sleep(config.get("sleep", 0))
        d = os.path.join(config["tmp"], f"{ctx.get_world_rank()}-{step}-{os.getpid()}")
        os.makedirs(d)
        with open(os.path.join(d, "step"), "w") as f:
            f.write(str(step))
        t.report({"step": step, "first": first}, checkpoint=t.Checkpoint.from_directory(d))
    return first


def _fit(tmp_path, plan, nodes, max_failures, sleep=0.0):
    reference.shutdown()
    with simcluster.Cluster(nodes=nodes, preload=PRELOAD, faults=plan) as cluster:
        reference.init(address=cluster.address)
        try:
            result = t.DataParallelTrainer(
                _train, train_loop_config={"tmp": str(tmp_path), "sleep": sleep},
                scaling_config=t.ScalingConfig(num_workers=2),
                run_config=t.RunConfig(storage_path=str(tmp_path / "s"), name="plan",
                                       failure_config=t.FailureConfig(max_failures))).fit()
        finally:
            reference.shutdown()
        faults = [e for e in cluster.history.events() if e["event"] == "fault"]
    return result, faults


def test_failed_upload_is_a_worker_failure_and_is_retried(tmp_path):
    plan = FaultPlan([(Trigger.message(worker="*rank1", nth=2),
                       action("fail_upload", worker="*rank1"))])
    result, faults = _fit(tmp_path, plan, [simcluster.NodeSpec(cpus=2)], max_failures=1)
    assert len(faults) == 1
    assert result.metrics["step"] == 3
    assert result.return_value >= 1  # the second attempt resumed from a checkpoint


def test_node_loss_restarts_on_the_remaining_nodes(tmp_path):
    plan = FaultPlan([(Trigger.message(worker="*rank1", nth=3),
                       action("kill_node", node="worker:*rank1"))])
    nodes = [simcluster.NodeSpec(cpus=1)] * 3
    result, faults = _fit(tmp_path, plan, nodes, max_failures=1)
    assert len(faults) == 1
    assert result.metrics["step"] == 3 and result.return_value >= 1


def test_preempted_node_is_charged_to_the_preemption_budget(tmp_path):
    # max_failures=0: a worker failure would fail the run; a preemption must not
    plan = FaultPlan([(Trigger.message(worker="*rank1", nth=2),
                       action("preempt_node", node="worker:*rank1", deadline_s=0.2))])
    nodes = [simcluster.NodeSpec(cpus=1)] * 3
    result, faults = _fit(tmp_path, plan, nodes, max_failures=0, sleep=0.3)
    assert len(faults) == 1
    assert result.metrics["step"] == 3 and result.return_value >= 1
