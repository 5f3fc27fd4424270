"""Placement of resource bundles on nodes: pure logic, no processes, no clocks.

Design note. Amounts are fixed-point integers (1/10000 of a unit, as Ray does) so that sums of
fractions never oversubscribe through rounding. Device resources (GPU, TPU) are tracked per
device: a whole-number request takes that many wholly free devices, a fraction below one
shares the fullest device that still has room (best fit), so a bundle's device ids are known.

`plan` is a depth-first search over bundles (largest first) with a per-strategy node order,
so the first answer it finds is the heuristic one (PACK: onto nodes already used, after trying
a single node; SPREAD: onto the least used node). Backtracking makes it exact for small
requests, and two nodes in the same state are tried only once per level. Equal bundles (a
Train group) first go through a heap that finds the search's first answer in O(bundles x log
nodes), where the search sorts all nodes for every bundle. The search keeps its path on an explicit stack,
so a request of thousands of bundles needs no deep recursion. A step budget (distinct node
states tried) bounds pathological cases: an exhausted search means "unknown", never
"impossible". Fractional device requests are packed greedily inside a node, which is exact
when the fractions divide one another (1/2, 1/4, ...).
"""

from __future__ import annotations

import dataclasses
import heapq
import math
from collections.abc import Mapping, Sequence

UNIT = 10_000
STRATEGIES = ("PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD")
DEVICE_RESOURCES = ("GPU", "TPU")
DEFAULT_BUDGET = 50_000

Bundle = dict  # resource name -> amount in units


def to_units(amount: float) -> int:
    return int(round(amount * UNIT))


def from_units(units: int) -> float:
    return units / UNIT


def describe_bundles(bundles: Sequence[Mapping], shown: int = 3) -> str:
    """`bundles` for a message, runs of equal bundles folded and at most `shown` runs listed:
    a request of a million bundles must not make a message of megabytes."""
    runs: list[list] = []
    for bundle in bundles:
        bundle = dict(bundle) if isinstance(bundle, Mapping) else bundle
        if runs and runs[-1][0] == bundle:
            runs[-1][1] += 1
        else:
            runs.append([bundle, 1])
    parts = [f"[{_short(b)}]" + (f" * {n}" if n > 1 else "") for b, n in runs[:shown]]
    if len(runs) > shown:
        parts.append(f"... ({sum(n for _, n in runs[shown:])} more bundles)")
    return " + ".join(parts) or "[]"


def _short(value: object, limit: int = 200) -> str:
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def validate_strategy(strategy: object) -> str:
    if strategy not in STRATEGIES:
        raise ValueError(f"place(strategy={_short(strategy)}): expected one of {STRATEGIES}")
    return strategy  # type: ignore[return-value]


def validate_bundles(bundles: object) -> list[Bundle]:
    """Bundles as unit dicts; zero amounts are dropped (as Ray drops them)."""
    if isinstance(bundles, Mapping) or not isinstance(bundles, Sequence) or not bundles:
        raise ValueError(f"place(bundles={_short(bundles)}): expected a non-empty list of dicts "
                         "such as [{'CPU': 1}, {'CPU': 1, 'GPU': 1}]")
    out = []
    for i, bundle in enumerate(bundles):
        if not isinstance(bundle, Mapping):
            raise TypeError(f"place(bundles[{i}]={_short(bundle)}): expected a dict of resource "
                            "amounts")
        units: Bundle = {}
        for key, amount in bundle.items():
            if isinstance(amount, bool) or not isinstance(amount, (int, float)) \
                    or not isinstance(key, str) or not key or not amount >= 0 \
                    or (isinstance(amount, float) and not math.isfinite(amount)):
                raise ValueError(f"place(bundles[{i}]={_short(dict(bundle))}): amounts must be "
                                 "finite numbers >= 0 keyed by non-empty resource names")
            u = to_units(amount)
            if key in DEVICE_RESOURCES and u > UNIT and u % UNIT:
                raise ValueError(f"place(bundles[{i}][{key!r}]={amount!r}): a request above one "
                                 "device must be a whole number of devices")
            if u:
                units[key] = u
        out.append(units)
    return out


class NodeView:
    """The free capacity of one node, as the algorithm sees it (mutable)."""

    __slots__ = ("node_id", "free", "devices")

    def __init__(self, node_id: str, free: dict[str, int], devices: dict[str, list[int]]):
        self.node_id = node_id
        self.free = free          # non-device resources, in units
        self.devices = devices    # device resource -> free units of each device

    @classmethod
    def from_totals(cls, node_id: str, totals: Mapping[str, float]) -> NodeView:
        free, devices = {}, {}
        for key, amount in totals.items():
            if key in DEVICE_RESOURCES:
                devices[key] = [UNIT] * int(amount)
            else:
                free[key] = to_units(amount)
        return cls(node_id, free, devices)

    def available(self) -> dict[str, int]:
        out = dict(self.free)
        out.update({key: sum(devs) for key, devs in self.devices.items()})
        return out

    def signature(self) -> tuple:
        return (tuple(sorted(self.free.items())),
                tuple((k, tuple(sorted(v))) for k, v in sorted(self.devices.items())))

    def take(self, bundle: Bundle) -> dict[str, list[tuple[int, int]]] | None:
        """Allocate `bundle` here and return which devices it got, or None (and no change)."""
        for key, amount in bundle.items():
            if key not in DEVICE_RESOURCES and self.free.get(key, 0) < amount:
                return None
        picks: dict[str, list[tuple[int, int]]] = {}
        for key in DEVICE_RESOURCES:
            amount = bundle.get(key, 0)
            if not amount:
                continue
            devs = self.devices.get(key, ())
            if amount >= UNIT:
                whole = [i for i, f in enumerate(devs) if f == UNIT][: amount // UNIT]
                if len(whole) < amount // UNIT:
                    return None
                picks[key] = [(i, UNIT) for i in whole]
            else:
                room = [(f, i) for i, f in enumerate(devs) if f >= amount]
                if not room:
                    return None
                picks[key] = [(min(room)[1], amount)]
        for key, amount in bundle.items():
            if key not in DEVICE_RESOURCES:
                self.free[key] -= amount
        for key, taken in picks.items():
            for i, units in taken:
                self.devices[key][i] -= units
        return picks

    def give(self, bundle: Bundle, picks: Mapping[str, list[tuple[int, int]]]) -> None:
        for key, amount in bundle.items():
            if key not in DEVICE_RESOURCES:
                self.free[key] += amount
        for key, taken in picks.items():
            for i, units in taken:
                self.devices[key][i] += units


@dataclasses.dataclass(frozen=True)
class Assignment:
    """Where one bundle went: its node and the device indices it holds per device resource."""

    node_id: str
    picks: Mapping[str, list[tuple[int, int]]]

    def device_ids(self, resource: str) -> list[int]:
        return [i for i, _ in self.picks.get(resource, ())]


class SearchExhausted(Exception):
    """The step budget ran out before the search could decide."""


def plan(bundles: Sequence[Bundle], strategy: str, nodes: Sequence[NodeView],
         budget: int = DEFAULT_BUDGET) -> list[Assignment] | None:
    """Place every bundle or none. On success the nodes keep the allocations and one
    `Assignment` per bundle (in request order) is returned; on failure (None, or
    `SearchExhausted`) the nodes are left as they were."""
    n = len(bundles)
    if strategy == "STRICT_SPREAD" and n > len(nodes):
        return None
    if not _aggregate_fits(bundles, nodes):
        return None
    if strategy in ("STRICT_PACK", "PACK"):
        packed = _on_one_node(bundles, nodes)
        if packed is not None or strategy == "STRICT_PACK":
            return packed
    if all(b == bundles[0] for b in bundles):
        found = _greedy_same(bundles, strategy, nodes)
        if found is not None:
            return found
    order = sorted(range(n), key=lambda i: _size(bundles[i]), reverse=True)
    used = [0] * len(nodes)
    sigs = [node.signature() for node in nodes]   # kept current as bundles come and go
    chosen: list[tuple[int, dict] | None] = [None] * n
    steps = 0

    def candidates() -> list[int]:
        idx = range(len(nodes))
        if strategy == "PACK":
            return sorted(idx, key=lambda i: (-used[i], i))
        if strategy == "SPREAD":
            return sorted(idx, key=lambda i: (used[i], i))
        return [i for i in idx if not used[i]]  # STRICT_SPREAD

    def unchoose(k: int) -> None:
        ni, picks = chosen[order[k]]  # type: ignore[misc]
        nodes[ni].give(bundles[order[k]], picks)
        sigs[ni] = nodes[ni].signature()
        used[ni] -= 1
        chosen[order[k]] = None

    # Depth first without recursion (a request may have thousands of bundles): one frame per
    # placed bundle holds its candidate nodes, the next one to try and the node states tried.
    # A step is one distinct (node state, bundle) try, so passing over nodes in a state already
    # tried at this level (the full nodes PACK visits first, say) costs nothing.
    frames: list[list] = [[candidates(), 0, set()]]
    try:
        while frames:
            k = len(frames) - 1
            if k == n:
                break
            frame = frames[k]
            if chosen[order[k]] is not None:
                unchoose(k)  # back here from a dead end below: take the next node instead
            cands, pos, tried = frame
            bundle = bundles[order[k]]
            advanced = False
            while pos < len(cands):
                ni = cands[pos]
                pos += 1
                sig = (sigs[ni], strategy == "STRICT_SPREAD" and used[ni] > 0)
                if sig in tried:
                    continue
                tried.add(sig)
                steps += 1
                if steps > budget:
                    raise SearchExhausted
                picks = nodes[ni].take(bundle)
                if picks is None:
                    continue
                sigs[ni] = nodes[ni].signature()
                used[ni] += 1
                chosen[order[k]] = (ni, picks)
                advanced = True
                break
            frame[1] = pos
            if advanced:
                frames.append([candidates(), 0, set()] if k + 1 < n else [])
            else:
                frames.pop()
    except SearchExhausted:
        _undo(bundles, nodes, chosen)
        raise
    if not frames:
        return None
    return [Assignment(nodes[ni].node_id, picks) for ni, picks in chosen]  # type: ignore[misc]


def _greedy_same(bundles: Sequence[Bundle], strategy: str,
                 nodes: Sequence[NodeView]) -> list[Assignment] | None:
    """The search's first answer for equal bundles in O(bundles x log nodes): each bundle
    goes to the first node in the strategy's order that takes it, as the search tries them.
    A node that cannot take one of equal bundles never takes a later one, so it leaves the
    heap for good. None (nodes unchanged) where this finds no answer: the search decides."""
    sign = -1 if strategy == "PACK" else 1
    heap = [(0, i) for i in range(len(nodes))]  # (sign * bundles placed there, index)
    chosen: list[tuple[int, dict] | None] = []
    for bundle in bundles:
        picks = None
        while heap and picks is None:
            key, ni = heapq.heappop(heap)
            picks = nodes[ni].take(bundle)
        if picks is None:
            _undo(bundles, nodes, chosen)
            return None
        chosen.append((ni, picks))
        if strategy != "STRICT_SPREAD":  # a node holds one bundle of a STRICT_SPREAD at most
            heapq.heappush(heap, (key + sign, ni))
    return [Assignment(nodes[ni].node_id, picks) for ni, picks in chosen]  # type: ignore[misc]


def _undo(bundles, nodes, chosen) -> None:
    for i, entry in enumerate(chosen):
        if entry is not None:
            nodes[entry[0]].give(bundles[i], entry[1])


def _size(bundle: Bundle) -> tuple:
    # Devices are the scarcest and the only resource with fragmentation: place those first.
    return (sum(bundle.get(k, 0) for k in DEVICE_RESOURCES), sum(bundle.values()))


def _aggregate_fits(bundles: Sequence[Bundle], nodes: Sequence[NodeView]) -> bool:
    need: dict[str, int] = {}
    for bundle in bundles:
        for key, amount in bundle.items():
            need[key] = need.get(key, 0) + amount
    have: dict[str, int] = {}
    for node in nodes:
        for key, amount in node.available().items():
            have[key] = have.get(key, 0) + amount
    return all(have.get(k, 0) >= v for k, v in need.items())


def _on_one_node(bundles: Sequence[Bundle], nodes: Sequence[NodeView]) -> list[Assignment] | None:
    order = sorted(range(len(bundles)), key=lambda i: _size(bundles[i]), reverse=True)
    tried = set()
    for node in nodes:
        sig = node.signature()
        if sig in tried:
            continue
        tried.add(sig)
        taken: list[tuple[int, dict]] = []
        for i in order:
            picks = node.take(bundles[i])
            if picks is None:
                break
            taken.append((i, picks))
        if len(taken) == len(bundles):
            by_index = dict(taken)
            return [Assignment(node.node_id, by_index[i]) for i in range(len(bundles))]
        for i, picks in taken:
            node.give(bundles[i], picks)
    return None
