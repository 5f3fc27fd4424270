"""TrainContext: world/local/node ranks on one and several nodes (clauses `context.*`)."""

from __future__ import annotations

import os

import pytest

from conformance import assertions, journal_checks
from conformance.adapters.base import NodeSpec, require
from conformance.catalogue import clause
from conformance.probe import worker_environment
from conformance.scenarios import (
    TrainerFactory,
    basic_run,
    collectives_seen,
    new_script,
    run,
    workspace,
)


@clause("context.ranks")
def check_context_single_node(impl):
    r = basic_run(impl)
    assertions.succeeded(r.outcome, r.setting)
    starts = r.events("start")
    assertions.verdict(journal_checks.ranks_complete(r.events()), r.setting)
    for s in starts:
        seen = (s["world_size"], s["local_rank"], s["local_world_size"], s["node_rank"],
                s["experiment"])
        assertions.equal(seen, (2, s["rank"], 2, 0, r.name),
                         f"rank {s['rank']} (world_size, local_rank, local_world_size, node_rank, "
                         "experiment name)", r.setting)


@pytest.mark.cluster
@clause("context.multi-node")
def check_ranks_contiguous_per_node(impl):
    require(impl, "multinode")
    with impl.cluster([NodeSpec(cpus=2), NodeSpec(cpus=2)]):
        folder = workspace()
        script = new_script(impl, folder, steps=1, checkpoints={})
        r = run(impl, script, num_workers=4, folder=folder)
    setting = r.setting + ", 2 nodes x 2 CPUs"
    assertions.succeeded(r.outcome, setting)
    events = r.events()
    assertions.verdict(journal_checks.ranks_complete(events), setting)
    assertions.verdict(journal_checks.contiguous_per_node(events), setting)
    nodes = {s["node_id"] for s in r.events("start")}
    assertions.equal(len(nodes), 2, "number of distinct nodes the 4 workers ran on", setting)


@clause("context.omp-threads")
def check_openmp_threads_follow_the_cpus(impl):
    t = impl.train
    folder = workspace()
    for cpus, expected in ((None, "1"), (2, "2")):
        resources = None if cpus is None else {"CPU": cpus}
        setting = f"{impl.name}: DataParallelTrainer(num_workers=1, resources_per_worker=" \
                  f"{resources!r}), OMP_NUM_THREADS unset in the driver"
        factory = TrainerFactory(impl.DataParallelTrainer, dict(
            train_loop_per_worker=worker_environment,
            train_loop_config={"names": ["OMP_NUM_THREADS"]},
            scaling_config=t.ScalingConfig(num_workers=1, resources_per_worker=resources),
            run_config=t.RunConfig(name=f"omp-{cpus}", storage_path=os.path.join(folder, "s"))))
        result = assertions.succeeded(impl.fit(factory), setting)
        assertions.equal(result.return_value, {"OMP_NUM_THREADS": expected},
                         "the worker's OMP_NUM_THREADS", setting)


@clause("context.collectives")
def check_collectives_across_ranks(impl):
    r, seen = collectives_seen(impl, num_workers=2)
    assertions.succeeded(r.outcome, r.setting)
    assertions.equal(seen, {0: ({"from_rank": 0}, "None"), 1: ({"from_rank": 0}, "None")},
                     "rank -> (broadcast_from_rank_zero({'from_rank': rank}), barrier())",
                     r.setting)
