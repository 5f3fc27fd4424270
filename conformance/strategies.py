"""Hypothesis strategies shared by the checks.

Config strategies draw keyword-argument dicts (a key that is absent means "use the default"),
valid and invalid alike; each check carries its own oracle that decides what the call must do.

Directory trees, for anything that copies folders (checkpoints) and must keep them whole.
A tree is a dict: name -> bytes (a file) or name -> dict (a folder, possibly empty).
  trees(max_leaves=8, max_width=3)  strategy: nested and empty folders, empty and binary files
  file_names(), file_contents()     the strategies trees() is made of
  write_tree(root, tree)            create a tree under an existing folder
  read_tree(root)                   the tree on disk, comparable with == to what trees() drew
  describe_tree(tree)               one line of names and sizes, for assertion messages
They are public for other test suites too (they import nothing from the suite).
"""

from __future__ import annotations

import os
import random

from hypothesis import strategies as st

__all__ = [
    # ScalingConfig
    "TPU_ACCELERATOR_TYPES", "TPU_TOPOLOGIES", "BAD_TPU_TOPOLOGIES", "resource_values",
    "resources_per_worker", "valid_num_workers", "any_num_workers", "label_selector_dicts",
    "label_selectors", "tpu_settings", "scaling_kwargs", "tpu_scaling_kwargs",
    "valid_scaling_kwargs",
    # other configs
    "json_values", "json_dicts", "arbitrary_objects",
    # directory trees
    "file_names", "file_contents", "trees", "write_tree", "read_tree", "describe_tree",
]

# ---------------------------------------------------------------------------- ScalingConfig

#: TPU accelerator types the API knows; the checks hold their own chips-per-host table.
TPU_ACCELERATOR_TYPES = ("TPU-V4", "TPU-V5P", "TPU-V6E", "TPU-V5LITEPOD", "TPU-V7X")
#: Topologies that parse ("AxB[xC]" with positive sides).
TPU_TOPOLOGIES = ("1x1", "2x2", "2x4", "4x4", "4x8", "2x2x1", "2x2x2", "2x2x4", "4x4x4")
#: Topologies that do not parse.
BAD_TPU_TOPOLOGIES = ("4y4", "axb", "4x", "x4", "2x2x", "four")

_RESOURCE_KEYS = ("CPU", "GPU", "TPU", "memory", "special_hardware", "custom_a")


def resource_values() -> st.SearchStrategy:
    """Non-negative resource amounts, zero included (zero entries are dropped by the API)."""
    return st.one_of(
        st.just(0),
        st.just(0.0),
        st.integers(1, 4),
        st.sampled_from([0.25, 0.5, 1.5, 2.0]),
        st.just(1e9),
    )


def resources_per_worker(keys=_RESOURCE_KEYS, allow_none: bool = True) -> st.SearchStrategy:
    dicts = st.dictionaries(st.sampled_from(keys), resource_values(), max_size=len(keys))
    return st.one_of(st.none(), dicts) if allow_none else dicts


def valid_num_workers(max_workers: int = 8) -> st.SearchStrategy:
    """A worker count the API accepts: a non-negative int or an ordered (min, max) pair."""
    fixed = st.integers(0, max_workers)
    elastic = st.tuples(st.integers(0, max_workers), st.integers(0, max_workers)).map(
        lambda t: (min(t), max(t)))
    return st.one_of(fixed, elastic)


def any_num_workers() -> st.SearchStrategy:
    """Worker counts of every shape: valid, out of range, and of the wrong type."""
    small = st.integers(-3, 8)
    return st.one_of(
        small,
        st.booleans(),
        st.tuples(small, small),
        st.tuples(st.booleans(), small),
        st.floats(-2, 8, allow_nan=False),
        st.lists(st.integers(0, 4), max_size=3),
        st.tuples(small),
        st.tuples(small, small, small),
        st.tuples(st.integers(0, 4), st.floats(0, 4, allow_nan=False)),
        st.tuples(st.integers(0, 4), st.none()),
        st.none(),
        st.sampled_from(["2", "(1, 2)", ""]),
    )


def label_selector_dicts() -> st.SearchStrategy:
    name = st.text("abcxyz-/.", min_size=1, max_size=6)
    return st.dictionaries(name, name, max_size=2)


def label_selectors(max_len: int = 6) -> st.SearchStrategy:
    return st.one_of(
        st.none(),
        label_selector_dicts(),
        st.lists(label_selector_dicts(), max_size=max_len),
    )


def tpu_settings() -> st.SearchStrategy:
    """(use_tpu, topology, accelerator_type), mostly TPU-shaped, sometimes unparsable."""
    return st.tuples(
        st.booleans(),
        st.one_of(st.none(), st.sampled_from(TPU_TOPOLOGIES), st.sampled_from(BAD_TPU_TOPOLOGIES)),
        st.one_of(st.none(), st.sampled_from(TPU_ACCELERATOR_TYPES)),
    )


@st.composite
def scaling_kwargs(draw, num_workers=None, tpu: bool = True, deprecated: bool = True) -> dict:
    """ScalingConfig keyword arguments, any mix of valid and invalid."""
    kwargs: dict = {}
    kwargs["num_workers"] = draw(num_workers if num_workers is not None else st.one_of(
        valid_num_workers(), any_num_workers()))
    if draw(st.booleans()):
        kwargs["use_gpu"] = draw(st.booleans())
    if draw(st.booleans()):
        kwargs["resources_per_worker"] = draw(resources_per_worker())
    if draw(st.integers(0, 3)) == 3:
        kwargs["label_selector"] = draw(label_selectors())
    if draw(st.integers(0, 4)) == 4:
        kwargs["placement_strategy"] = draw(
            st.sampled_from(["PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD", "BOGUS"]))
    if tpu and draw(st.booleans()):
        use_tpu, topology, accelerator_type = draw(tpu_settings())
        kwargs.update(use_tpu=use_tpu, topology=topology, accelerator_type=accelerator_type)
    if deprecated and draw(st.integers(0, 9)) == 9:
        kwargs["trainer_resources"] = draw(st.one_of(
            st.just({}), resources_per_worker(allow_none=False), st.just(0)))
    return kwargs


@st.composite
def tpu_scaling_kwargs(draw) -> dict:
    """ScalingConfig keyword arguments around the TPU rules (mostly use_tpu=True)."""
    kwargs: dict = {
        "num_workers": draw(st.one_of(
            st.sampled_from([0, 1, 2, 4, 8, 16, (0, 4), (2, 4), (4, 8), (1, 16)]),
            valid_num_workers(16))),
        "use_tpu": draw(st.integers(0, 4)) > 0,
        "topology": draw(st.one_of(st.none(), st.sampled_from(TPU_TOPOLOGIES),
                                   st.sampled_from(BAD_TPU_TOPOLOGIES))),
        "accelerator_type": draw(st.one_of(st.none(), st.sampled_from(TPU_ACCELERATOR_TYPES))),
    }
    if draw(st.integers(0, 4)) == 4:
        kwargs["use_gpu"] = draw(st.booleans())
    shape = draw(st.integers(0, 3))
    if shape == 1:
        kwargs["resources_per_worker"] = {"TPU": draw(st.sampled_from([0, 1, 2, 4, 8]))}
    elif shape == 2:
        kwargs["resources_per_worker"] = draw(resources_per_worker(allow_none=False))
    if draw(st.integers(0, 4)) == 4:
        kwargs["label_selector"] = draw(label_selectors(max_len=3))
    return kwargs


@st.composite
def valid_scaling_kwargs(draw) -> dict:
    """Keyword arguments that construct a ScalingConfig without error (TPU: one host)."""
    if draw(st.integers(0, 4)) == 4:
        kwargs = {"num_workers": draw(st.sampled_from([0, 1, (0, 1), (1, 1)])), "use_tpu": True}
        resources = draw(resources_per_worker(keys=("CPU", "memory", "custom_a")))
        if resources is not None:
            resources["TPU"] = draw(st.sampled_from([1, 2, 4, 0.5]))
            kwargs["resources_per_worker"] = resources
        return kwargs
    num_workers = draw(valid_num_workers())
    use_gpu = draw(st.booleans())
    resources = draw(resources_per_worker(
        keys=("CPU", "GPU", "memory", "special_hardware", "custom_a")))
    if resources and not use_gpu:
        resources.pop("GPU", None)
    kwargs: dict = {"num_workers": num_workers}
    if use_gpu or draw(st.booleans()):
        kwargs["use_gpu"] = use_gpu
    if resources is not None or draw(st.booleans()):
        kwargs["resources_per_worker"] = resources
    return kwargs


# ---------------------------------------------------------------------------- other configs

def json_values() -> st.SearchStrategy:
    scalars = st.one_of(
        st.none(), st.booleans(), st.integers(-(2**63), 2**63),
        st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=12),
    )
    return st.recursive(
        scalars,
        lambda inner: st.one_of(st.lists(inner, max_size=3),
                                st.dictionaries(st.text(max_size=8), inner, max_size=3)),
        max_leaves=8,
    )


def json_dicts() -> st.SearchStrategy:
    """Dicts that survive a JSON round trip unchanged (string keys, no NaN, no tuples)."""
    return st.dictionaries(st.text(max_size=10), json_values(), max_size=5)


def arbitrary_objects() -> st.SearchStrategy:
    """Values of assorted types, for arguments that must reject (or ignore) the wrong type."""
    return st.one_of(
        st.none(), st.booleans(), st.integers(-5, 5), st.floats(allow_nan=False),
        st.text(max_size=8), st.dictionaries(st.text(max_size=4), st.integers(), max_size=2),
        st.lists(st.integers(), max_size=2), st.builds(object),
    )


# ---------------------------------------------------------------------------- directory trees

_NAME_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789_-."


def file_names() -> st.SearchStrategy:
    """File and folder names; none starts with `.metadata`, a name Checkpoint keeps for its
    own metadata file."""
    return st.text(_NAME_ALPHABET, min_size=1, max_size=12).filter(
        lambda n: n not in (".", "..") and not n.startswith(".metadata"))


def file_contents(max_size: int = 16 * 1024) -> st.SearchStrategy:
    """Empty, small drawn, or larger seeded-random binary contents."""
    seeded = st.tuples(st.integers(0, max_size), st.integers(0, 2**32 - 1)).map(
        lambda t: random.Random(t[1]).randbytes(t[0]))
    return st.one_of(st.just(b""), st.binary(max_size=64), seeded)


def trees(max_leaves: int = 8, max_width: int = 3) -> st.SearchStrategy:
    """Directory trees: nested folders, empty folders, empty and binary files."""
    node = st.recursive(
        file_contents(),
        lambda inner: st.dictionaries(file_names(), inner, max_size=max_width),
        max_leaves=max_leaves,
    )
    return st.dictionaries(file_names(), node, max_size=max_width + 1)


def write_tree(root: str, tree: dict) -> None:
    """Create `tree` under the existing folder `root`."""
    for name, node in tree.items():
        path = os.path.join(root, name)
        if isinstance(node, dict):
            os.mkdir(path)
            write_tree(path, node)
        else:
            with open(path, "wb") as f:
                f.write(node)


def read_tree(root: str) -> dict:
    """The tree under `root` in the shape `trees()` draws (so the two compare with ==)."""
    tree: dict = {}
    for entry in os.scandir(root):
        if entry.is_dir(follow_symlinks=False):
            tree[entry.name] = read_tree(entry.path)
        else:
            with open(entry.path, "rb") as f:
                tree[entry.name] = f.read()
    return tree


def describe_tree(tree: dict, prefix: str = "") -> str:
    """A short one-line listing (names and sizes) for assertion messages."""
    parts = []
    for name in sorted(tree):
        node = tree[name]
        if isinstance(node, dict):
            inner = describe_tree(node, prefix + name + "/")
            parts.append(inner if inner else prefix + name + "/")
        else:
            parts.append(f"{prefix}{name}({len(node)}B)")
    return ", ".join(parts)
