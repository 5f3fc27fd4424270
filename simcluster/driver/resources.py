"""The cluster's resource ledger: which node has what free, which placements hold what.

Pure bookkeeping (no processes, no locks: the cluster serialises calls under its own lock),
so the whole placement contract is testable without starting a node.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Mapping, Sequence

from .._errors import Unschedulable
from .placement import (
    Assignment,
    NodeView,
    SearchExhausted,
    describe_bundles,
    from_units,
    plan,
    validate_bundles,
    validate_strategy,
)


@dataclasses.dataclass
class Held:
    """A committed placement: per bundle, its node and the devices it holds."""

    id: str
    strategy: str
    bundles: list[dict]            # in units, as requested
    assignments: list[Assignment]


class ResourceBook:
    def __init__(self) -> None:
        self._totals: dict[str, dict[str, float]] = {}
        self._views: dict[str, NodeView] = {}
        self._held: dict[str, Held] = {}
        self._order: dict[str, int] = {}
        self._ids = itertools.count()

    # -- nodes ---------------------------------------------------------------------------
    def add_node(self, node_id: str, totals: Mapping[str, float], order: int | None = None) -> None:
        """Add a node; the algorithm considers nodes by `order` (default: as added)."""
        self._order[node_id] = len(self._order) if order is None else order
        self._totals[node_id] = dict(totals)
        self._views[node_id] = NodeView.from_totals(node_id, totals)
        if order is not None:
            for table in (self._totals, self._views):
                items = sorted(table.items(), key=lambda kv: self._order[kv[0]])
                table.clear()
                table.update(items)

    def remove_node(self, node_id: str) -> None:
        """Forget a node; bundles held there are lost (nothing to give back)."""
        self._totals.pop(node_id, None)
        self._views.pop(node_id, None)

    @property
    def node_ids(self) -> list[str]:
        return list(self._views)

    def total(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for totals in self._totals.values():
            for key, amount in totals.items():
                out[key] = out.get(key, 0.0) + amount
        return out

    def available(self) -> dict[str, float]:
        out = {key: 0.0 for key in self.total()}
        for view in self._views.values():
            for key, units in view.available().items():
                out[key] = out.get(key, 0.0) + from_units(units)
        return out

    # -- placements ----------------------------------------------------------------------
    def check(self, bundles: Sequence[Mapping[str, float]], strategy: str) -> list[dict]:
        """Validate a request; raise Unschedulable now if it could never fit."""
        strategy = validate_strategy(strategy)
        units = validate_bundles(bundles)
        if self.never_fits(units, strategy):
            raise Unschedulable(
                f"place(bundles={describe_bundles(bundles)}, strategy={strategy!r}) can never "
                f"be placed on the current nodes [{self.describe()}], even with everything free; "
                "add a node that can hold it or ask for less"
            )
        return units

    def never_fits(self, units: list[dict], strategy: str) -> bool:
        empty = [NodeView.from_totals(n, t) for n, t in self._totals.items()]
        try:
            return plan(units, strategy, empty) is None
        except SearchExhausted:
            return False  # undecided: let the caller wait for its timeout

    def try_place(self, units: list[dict], strategy: str) -> Held | None:
        """Commit the request if it fits the free resources now; None if it does not."""
        try:
            found = plan(units, strategy, list(self._views.values()))
        except SearchExhausted:
            return None
        if found is None:
            return None
        held = Held(f"pg-{next(self._ids)}", strategy, units, found)
        self._held[held.id] = held
        return held

    def release(self, placement_id: str) -> bool:
        """Give a placement's bundles back; False if it was not held (released twice)."""
        held = self._held.pop(placement_id, None)
        if held is None:
            return False
        for bundle, where in zip(held.bundles, held.assignments, strict=True):
            view = self._views.get(where.node_id)
            if view is not None:  # a bundle on a node that went down is simply gone
                view.give(bundle, where.picks)
        return True

    def holds(self, placement_id: str) -> bool:
        return placement_id in self._held

    def describe(self) -> str:
        return ", ".join(f"{n} {t}" for n, t in self._totals.items()) or "no nodes"
