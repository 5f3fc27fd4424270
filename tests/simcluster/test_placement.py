"""Placement: pure logic (no processes). Properties checked against a brute-force oracle."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simcluster import STRATEGIES, Unschedulable
from simcluster.driver.placement import UNIT, NodeView, plan, to_units, validate_bundles
from simcluster.driver.resources import ResourceBook

# -- strategies ----------------------------------------------------------------------------
halves = st.sampled_from([0, 0.5, 1, 1.5, 2, 3, 4])
node_totals = st.fixed_dictionaries({
    "CPU": halves,
    "GPU": st.integers(0, 3),
    "mem": st.integers(0, 3),
})
bundle = st.fixed_dictionaries({
    "CPU": st.sampled_from([0, 0.5, 1, 2, 3]),
    "GPU": st.sampled_from([0, 0, 0.25, 0.5, 1, 2]),   # fractions that divide one another
    "mem": st.integers(0, 2),
})
clusters = st.lists(node_totals, min_size=1, max_size=4)
requests = st.lists(bundle, min_size=1, max_size=5)


def views(cluster):
    return [NodeView.from_totals(f"n{i}", t) for i, t in enumerate(cluster)]


# -- the oracle ------------------------------------------------------------------------------
def node_can_hold(total: dict, bundles: list[dict]) -> bool:
    for key in ("CPU", "mem"):
        if sum(b.get(key, 0) for b in bundles) > to_units(total.get(key, 0)):
            return False
    demands = [b["GPU"] for b in bundles if b.get("GPU")]
    free = int(total.get("GPU", 0)) - sum(d // UNIT for d in demands if d >= UNIT)
    if free < 0:
        return False
    parts = [d for d in demands if d < UNIT]
    return any(all(sum(p for p, dev in zip(parts, where, strict=True) if dev == k) <= UNIT
                   for k in range(free))
               for where in itertools.product(range(free), repeat=len(parts))) if parts else True


def oracle(cluster, units, strategy) -> bool:
    n = len(cluster)
    for where in itertools.product(range(n), repeat=len(units)):
        if strategy == "STRICT_PACK" and len(set(where)) > 1:
            continue
        if strategy == "STRICT_SPREAD" and len(set(where)) < len(where):
            continue
        if all(node_can_hold(cluster[k], [b for b, w in zip(units, where, strict=True) if w == k])
               for k in range(n)):
            return True
    return False


def assert_not_oversubscribed(cluster, units, found):
    for k, total in enumerate(cluster):
        mine = [b for b, a in zip(units, found, strict=True) if a.node_id == f"n{k}"]
        for key in ("CPU", "mem"):
            assert sum(b.get(key, 0) for b in mine) <= to_units(total[key]), (key, total, mine)
        per_device = [0] * int(total["GPU"])
        for a in found:
            if a.node_id == f"n{k}":
                for i, taken in a.picks.get("GPU", []):
                    per_device[i] += taken
        assert all(u <= UNIT for u in per_device), (total, per_device)
    for b, a in zip(units, found, strict=True):
        assert sum(t for _, t in a.picks.get("GPU", [])) == b.get("GPU", 0)


# -- properties --------------------------------------------------------------------------------
@settings(max_examples=300, deadline=None)
@given(clusters, requests, st.sampled_from(STRATEGIES))
def test_plan_is_sound_and_complete_on_an_empty_cluster(cluster, request, strategy):
    units = validate_bundles(request)
    found = plan(units, strategy, views(cluster))
    feasible = oracle(cluster, units, strategy)
    assert (found is not None) == feasible, f"plan={found}, oracle={feasible}"
    if found is not None:
        assert_not_oversubscribed(cluster, units, found)
        nodes = [a.node_id for a in found]
        if strategy == "STRICT_SPREAD":
            assert len(set(nodes)) == len(nodes)
        if strategy == "STRICT_PACK":
            assert len(set(nodes)) == 1


@settings(max_examples=200, deadline=None)
@given(clusters, requests, st.sampled_from(STRATEGIES))
def test_unschedulable_at_once_exactly_when_it_can_never_fit(cluster, request, strategy):
    book = ResourceBook()
    for i, totals in enumerate(cluster):
        book.add_node(f"n{i}", totals)
    if oracle(cluster, validate_bundles(request), strategy):
        assert book.try_place(book.check(request, strategy), strategy) is not None
    else:
        with pytest.raises(Unschedulable, match="can never be placed"):
            book.check(request, strategy)


@settings(max_examples=150, deadline=None)
@given(clusters, st.lists(st.tuples(requests, st.sampled_from(STRATEGIES), st.booleans()),
                          max_size=6))
def test_ledger_never_oversubscribes_and_releases_everything(cluster, ops):
    book = ResourceBook()
    for i, totals in enumerate(cluster):
        book.add_node(f"n{i}", totals)
    held = []
    for request, strategy, release_one in ops:
        try:
            units = book.check(request, strategy)
        except Unschedulable:
            continue
        got = book.try_place(units, strategy)
        if got is not None:
            held.append(got)
        for key, amount in book.available().items():
            assert amount >= 0, (key, amount)
        if release_one and held:
            assert book.release(held.pop(0).id)
    for h in held:
        assert book.release(h.id)
        assert not book.release(h.id)  # twice is a no-op
    assert book.available() == book.total()


# -- examples ------------------------------------------------------------------------------------
def test_pack_prefers_a_single_node_and_spread_spreads():
    cluster = [{"CPU": 2}, {"CPU": 8}]
    packed = plan(validate_bundles([{"CPU": 1}] * 4), "PACK", views(cluster))
    assert {a.node_id for a in packed} == {"n1"}
    spread = plan(validate_bundles([{"CPU": 1}] * 2), "SPREAD", views(cluster))
    assert {a.node_id for a in spread} == {"n0", "n1"}


def test_fractional_gpus_share_a_device_and_whole_ones_do_not():
    found = plan(validate_bundles([{"GPU": 0.5}, {"GPU": 0.5}, {"GPU": 1}]), "STRICT_PACK",
                 views([{"GPU": 2}]))
    ids = [a.device_ids("GPU") for a in found]
    assert ids[0] == ids[1] and ids[2] != ids[0] and len(ids[2]) == 1


def test_homogeneous_scale_is_fast_and_spreads_evenly():
    book = ResourceBook()
    for i in range(64):
        book.add_node(f"n{i}", {"CPU": 4})
    held = book.try_place(book.check([{"CPU": 1}] * 256, "SPREAD"), "SPREAD")
    counts = {}
    for a in held.assignments:
        counts[a.node_id] = counts.get(a.node_id, 0) + 1
    assert set(counts.values()) == {4}
    assert book.try_place(book.check([{"CPU": 1}], "PACK"), "PACK") is None


@pytest.mark.parametrize("strategy", ["PACK", "SPREAD"])
def test_a_thousand_bundles_on_256_full_fitting_nodes_place(strategy):
    # Every node is filled exactly: the search must neither run out of its
    # step budget nor recurse once per bundle.
    book = ResourceBook()
    for i in range(256):
        book.add_node(f"n{i}", {"CPU": 4})
    held = book.try_place(book.check([{"CPU": 1}] * 1024, strategy), strategy)
    assert held is not None and len(held.assignments) == 1024
    counts = {}
    for a in held.assignments:
        counts[a.node_id] = counts.get(a.node_id, 0) + 1
    assert len(counts) == 256 and set(counts.values()) == {4}


@pytest.mark.parametrize("bad, match", [
    ([], "non-empty list"),
    ({"CPU": 1}, "non-empty list"),
    ([{"CPU": -1}], "numbers >= 0"),
    ([{"CPU": "1"}], "numbers >= 0"),
    ([{"GPU": 1.5}], "whole number of devices"),
])
def test_bad_bundles_name_the_argument(bad, match):
    with pytest.raises((ValueError, TypeError), match=match):
        validate_bundles(bad)


def test_bad_strategy_names_the_allowed_values():
    book = ResourceBook()
    book.add_node("n0", {"CPU": 1})
    with pytest.raises(ValueError, match=r"strategy='FOO'.*PACK.*STRICT_SPREAD"):
        book.check([{"CPU": 1}], "FOO")


def test_unschedulable_names_the_request_and_the_nodes():
    book = ResourceBook()
    book.add_node("n0", {"CPU": 2})
    with pytest.raises(Unschedulable) as info:
        book.check([{"CPU": 3}], "PACK")
    assert "{'CPU': 3}" in str(info.value) and "n0 {'CPU': 2}" in str(info.value)


def test_removed_node_takes_its_bundles_along():
    book = ResourceBook()
    book.add_node("n0", {"CPU": 1})
    book.add_node("n1", {"CPU": 1})
    held = book.try_place(book.check([{"CPU": 1}] * 2, "STRICT_SPREAD"), "STRICT_SPREAD")
    book.remove_node("n0")
    assert book.available() == {"CPU": 0.0}
    assert book.release(held.id)
    assert book.available() == {"CPU": 1.0}
