"""What a driver's Ray job holds on a cluster, and giving it back: the cluster's inventory,
the job's actors and placement groups still alive, their release after a fit, and the check
that the session is whole again (every CPU, GPU and custom resource free).

After a fit that raised, the job's leftovers are released and the resources checked: a
session whose resources came back is as good as a fresh one (Ray 2.60's leak, a failed
group's resources never coming back, shows as a resource still held), and a fresh session
costs a `ray.init` (about 4 s and 3 CPU-seconds here). Only where that check fails, or after
a hang, does the adapter replace the session.
"""

from __future__ import annotations

import contextlib
import sys
import time


def inventory() -> dict:
    """The cluster's alive nodes and their resources, as the connected driver sees them."""
    import ray

    nodes = [n for n in ray.nodes() if n.get("Alive")]
    return {"nodes": len(nodes),
            "resources": {k: v for k, v in ray.cluster_resources().items()
                          if not k.startswith("node:")},
            "accelerators": sorted({k.removeprefix("accelerator_type:")
                                    for n in nodes for k in n.get("Resources", {})
                                    if k.startswith("accelerator_type:")})}


def job_leftovers() -> tuple[list[str], list[str]]:
    """(actors as "Class(id, state)", placement group ids) of this driver's job that are not
    dead/removed. Detached actors are left out: they are Ray's cluster-wide services that a
    job starts on first use and later jobs share (Ray Data's _AutoscalingCoordinatorActor),
    not a fit's, and the suite creates none itself. Read from the GCS tables (no dashboard
    needed)."""
    import ray
    from ray._private.state import state
    from ray.core.generated import gcs_pb2

    job = ray.get_runtime_context().get_job_id()
    actors = [f"{a.get('ActorClassName')}({a_id[:8]}, {a.get('State')})"
              for a_id, a in state.actor_table(None).items()
              if a.get("JobID") == job and a.get("State") != "DEAD" and not a.get("IsDetached")]
    groups = []
    for raw in state._connect_and_get_accessor().get_placement_group_table():
        pg = gcs_pb2.PlacementGroupTableData.FromString(raw)
        if pg.creator_job_id.hex() == job and pg.state != gcs_pb2.PlacementGroupTableData.REMOVED:
            groups.append(pg.placement_group_id.hex())
    return actors, groups


def release_job(timeout_s: float = 30.0) -> None:
    """Remove this driver's placement groups that are still there (which ends the actors
    placed in them), then wait until the cluster shows none of its actors alive: the fit's
    task was cancelled (or returned), and the actors it owned go with it. An actor is never
    looked up by id: Ray 2.60 aborts the process for an actor handle it does not hold."""
    from ray._raylet import PlacementGroupID
    from ray.util.placement_group import PlacementGroup, remove_placement_group

    deadline = time.monotonic() + timeout_s
    _, groups = job_leftovers()
    for pg_id in groups:
        with contextlib.suppress(Exception):
            remove_placement_group(PlacementGroup(PlacementGroupID.from_hex(pg_id)))
    while True:
        actors, groups = job_leftovers()
        if not actors and not groups:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"this suite's job still has actors {actors} "
                               f"and placement groups {groups} after {timeout_s:.0f} s")
        time.sleep(0.2)


def _free(total: dict, available: dict) -> list[str]:
    """The resources of `total` not all available: "CPU 2/4", ... (memory and the per-node
    and per-placement-group entries Ray lists beside them left out)."""
    held = []
    for key, amount in total.items():
        if key.startswith("node:") or "_group_" in key or key in ("memory",
                                                                  "object_store_memory"):
            continue
        if available.get(key, 0.0) + 1e-6 < amount:
            held.append(f"{key} {available.get(key, 0.0):g}/{amount:g}")
    return held


def released(timeout_s: float = 10.0) -> bool:
    """Release this job's leftovers, then wait until every resource of the cluster is free;
    False (the session is not to be trusted; the reason is printed to stderr, which pytest
    keeps with the check) when either takes longer than `timeout_s`."""
    import ray

    deadline = time.monotonic() + timeout_s
    try:
        release_job(timeout_s)
    except RuntimeError as exc:
        print(f"ray adapter: a fresh session after a failed fit: {exc}", file=sys.stderr)
        return False
    while held := _free(ray.cluster_resources(), ray.available_resources()):
        if time.monotonic() > deadline:
            print(f"ray adapter: a fresh session after a failed fit: {', '.join(held)} still "
                  f"held after {timeout_s:.0f} s", file=sys.stderr)
            return False
        time.sleep(0.1)
    return True
