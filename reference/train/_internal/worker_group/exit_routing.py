"""Which worker group, and which rank in it, a simcluster worker exit belongs to.

A Train worker is started with the name `<group id>:rank<N>`, and its exit is normally
routed by that name: it may arrive before `start_worker` has returned the handle (a worker
that dies at once), when only the name can say whose it is. But an exit is not always named
as its worker was: a client that lost its connection to the cluster reports every worker it
had with whatever it still knows. An exit of one of our workers must never be dropped (the
controller would wait for it forever), so the name is only the first try:

1. the name names a live group and one of its ranks: that rank;
2. else the worker id is one of a live group's workers: that rank;
3. else the name names a live group without a usable rank: the group fails, charged to its
   lowest rank still training (the worker is gone, its rank unknown);
4. else the exit is not ours (another user of the same cluster endpoint): dropped.
"""

from __future__ import annotations

from collections.abc import Mapping


def route_exit(groups: Mapping[str, object], exit) -> tuple[object, int] | None:
    """(group, rank) for a `simcluster.WorkerExit`, or None when no live group owns it."""
    live = {gid: g for gid, g in list(groups.items()) if not g.closed}
    group_id, sep, rank_text = (exit.name or "").partition(":rank")
    named = live.get(group_id) if sep else None
    if named is not None and rank_text.isdigit() and int(rank_text) < named.world_size:
        return named, int(rank_text)
    for group in live.values():
        for rank, handle in list(group.workers.items()):
            if handle.id == exit.worker_id:
                return group, rank
    if named is not None:
        training = [r for r in range(named.world_size) if r not in named.finished]
        return named, min(training, default=0)
    return None
