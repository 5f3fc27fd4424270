"""The shared strategies: the public surface, and the tree helpers on disk."""

import os
import types

from hypothesis import given, settings

from conformance import strategies as s


def test_all_lists_the_public_names():
    public = {name for name, value in vars(s).items()
              if not name.startswith("_") and not isinstance(value, types.ModuleType)
              and getattr(value, "__module__", s.__name__) == s.__name__}
    assert sorted(s.__all__) == sorted(public)


@settings(max_examples=25, deadline=None)
@given(tree=s.trees())
def test_trees_round_trip_through_disk(tree, tmp_path_factory):
    root = tmp_path_factory.mktemp("tree")
    s.write_tree(str(root), tree)
    assert s.read_tree(str(root)) == tree


def test_describe_tree_lists_names_and_sizes(tmp_path):
    tree = {"b.bin": b"xyz", "a": {}, "sub": {"c": b"", "d": {"e": b"1"}}}
    assert s.describe_tree(tree) == "a/, b.bin(3B), sub/c(0B), sub/d/e(1B)"
    s.write_tree(str(tmp_path), tree)
    assert sorted(os.listdir(tmp_path)) == ["a", "b.bin", "sub"]
    assert s.read_tree(str(tmp_path)) == tree
