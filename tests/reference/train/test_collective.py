"""`reference.train.collective` and `get_preemption_info()` across worker processes: every
rank gets rank 0's value, a barrier waits for all, and a preempted node's notice reaches
every rank as one PreemptionInfo."""

from __future__ import annotations

import time

import pytest

import reference
import reference.train as train
import simcluster
from reference import PRELOAD
from reference.train import collective
from simcluster import FaultPlan, Trigger, action

pytestmark = pytest.mark.slow


def _collectives():
    rank = train.get_context().get_world_rank()
    seen = collective.broadcast_from_rank_zero({"from": rank})
    collective.barrier()
    none = collective.broadcast_from_rank_zero(None if rank == 0 else rank)
    return rank, seen, none, train.get_preemption_info()


def test_broadcast_and_barrier_across_ranks(tmp_path):
    result = train.DataParallelTrainer(
        _collectives, scaling_config=train.ScalingConfig(num_workers=2),
        run_config=train.RunConfig(storage_path=str(tmp_path), name="c")).fit()
    # return_value is rank 0's; the other ranks' views are checked in the next test
    assert result.return_value == (0, {"from": 0}, None, None)


def _every_rank_checks():
    rank = train.get_context().get_world_rank()
    seen = collective.broadcast_from_rank_zero(f"rank-{rank}")
    # a rank that saw anything else fails, and with it the run
    assert seen == "rank-0", f"rank {rank} got {seen!r}"
    collective.barrier()
    return seen


def test_every_rank_gets_rank_zeros_data(tmp_path):
    result = train.DataParallelTrainer(
        _every_rank_checks,
        scaling_config=train.ScalingConfig(num_workers=3, resources_per_worker={"CPU": 0.5}),
        run_config=train.RunConfig(storage_path=str(tmp_path), name="v")).fit()
    assert result.return_value == "rank-0"


def _watch_preemption(config):
    rank = train.get_context().get_world_rank()
    deadline = time.monotonic() + 20
    info = None
    while info is None and time.monotonic() < deadline:
        train.report({"rank": rank})
        info = train.get_preemption_info()
        time.sleep(0.05)
    return info, rank, time.time()


def test_preemption_notice_reaches_every_rank(tmp_path):
    plan = FaultPlan([(Trigger.message(worker="*rank1", nth=2),
                       action("preempt_node", node="worker:*rank1", deadline_s=30))])
    reference.shutdown()
    nodes = [simcluster.NodeSpec(cpus=1)] * 2
    with simcluster.Cluster(nodes=nodes, preload=PRELOAD, faults=plan) as cluster:
        reference.init(address=cluster.address)
        try:
            started = time.time()
            result = train.DataParallelTrainer(
                _watch_preemption, scaling_config=train.ScalingConfig(num_workers=2),
                run_config=train.RunConfig(storage_path=str(tmp_path), name="p")).fit()
        finally:
            reference.shutdown()
    info, rank, now = result.return_value
    assert rank == 0
    assert info is not None, "rank 0 never saw the preemption of rank 1's node"
    assert info.preempted_ranks == [1] and len(info.preempted_node_ids) == 1
    # the deadline is UNIX milliseconds, about 30 s after the notice
    assert started * 1000 < info.deadline_ms <= (now + 31) * 1000


def _validate_without_config(config):
    train.report({"step": 0}, checkpoint=train.Checkpoint.from_directory(config["folder"]),
                 validation=True)


def test_validation_without_a_validation_config_fails_the_rank(tmp_path):
    (tmp_path / "ckpt").mkdir()
    trainer = train.DataParallelTrainer(
        _validate_without_config, train_loop_config={"folder": str(tmp_path / "ckpt")},
        scaling_config=train.ScalingConfig(num_workers=1),
        run_config=train.RunConfig(storage_path=str(tmp_path / "s"), name="nv"))
    with pytest.raises(train.WorkerGroupError) as info:
        trainer.fit()
    cause = info.value.worker_failures[0]
    assert isinstance(cause, ValueError)
    assert str(cause).startswith("`validation_config` was not set on the trainer, but a "
                                 "validation was requested.")
