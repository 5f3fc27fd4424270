from hypothesis import given
from hypothesis import strategies as st

from reference.train._internal.worker_group.simcluster_group import assign_ranks


def test_contiguous_per_node_in_order_of_first_appearance():
    nodes = ["b", "a", "b", "a", "c"]
    order = assign_ranks(nodes, [[]] * 5)
    assert [nodes[i] for i in order] == ["b", "b", "a", "a", "c"]


def test_local_order_by_lowest_accelerator_id():
    order = assign_ranks(["n", "n", "n"], [[2], [0], [1]])
    assert order == [1, 2, 0]


@given(st.lists(st.sampled_from("abcd"), min_size=1, max_size=12))
def test_is_a_permutation_with_contiguous_nodes(nodes):
    order = assign_ranks(nodes, [[]] * len(nodes))
    assert sorted(order) == list(range(len(nodes)))
    seen = [nodes[i] for i in order]
    runs = [n for k, n in enumerate(seen) if k == 0 or seen[k - 1] != n]
    assert len(runs) == len(set(runs))  # each node appears as one contiguous run
    assert runs == list(dict.fromkeys(nodes))
