"""TrainContext: world/local/node ranks on one and several nodes (clauses `context.*`)."""

from __future__ import annotations

from conformance import assertions, journal_checks
from conformance.adapters.base import NodeSpec, Unsupported
from conformance.catalogue import clause
from conformance.scenarios import basic_run, new_script, run, workspace


def needs(impl, capability: str) -> None:
    if capability not in impl.capabilities:
        raise Unsupported(f"adapter {impl.name!r} lacks the capability {capability!r}")


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


@clause("context.multi-node")
def check_ranks_contiguous_per_node(impl):
    needs(impl, "multinode")
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
