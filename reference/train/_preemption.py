"""`PreemptionInfo`: what `get_preemption_info()` returns while a node of the run is being
preempted (Ray 2.60, alpha).

On simcluster a fault plan's ``preempt_node`` gives the workers on that node a deadline
(`simcluster.worker.preemption()`); `get_preemption_info()` is a collective over all ranks
that builds one `PreemptionInfo` from every rank's notice and hands rank 0's view to all of
them, as Ray broadcasts rank 0's. The deadline is UNIX time in milliseconds, as in Ray.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class PreemptionInfo:
    """An imminent preemption: the earliest deadline (UNIX ms, None when none was given)
    and, for each preempted node id, the world ranks that go with it."""

    deadline_ms: Optional[int]
    preempted_node_to_ranks: dict[str, list[int]]

    @property
    def preempted_node_ids(self) -> list[str]:
        """The preempted node ids, sorted."""
        return sorted(self.preempted_node_to_ranks)

    @property
    def preempted_ranks(self) -> list[int]:
        """Every affected rank, sorted, each once."""
        return sorted({r for ranks in self.preempted_node_to_ranks.values() for r in ranks})


def merge_notices(notices: dict[int, tuple[str, Optional[float]]]) -> Optional[PreemptionInfo]:
    """One PreemptionInfo from each rank's ``(node_id, deadline_unix_s or None)``, None when
    no rank's node has a notice."""
    by_node: dict[str, list[int]] = {}
    deadlines: dict[str, float] = {}
    for rank, (node_id, deadline) in sorted(notices.items()):
        by_node.setdefault(node_id, []).append(rank)
        if deadline is not None:
            deadlines[node_id] = deadline
    if not deadlines:
        return None
    return PreemptionInfo(
        deadline_ms=int(min(deadlines.values()) * 1000),
        preempted_node_to_ranks={n: sorted(by_node[n]) for n in sorted(deadlines)})
