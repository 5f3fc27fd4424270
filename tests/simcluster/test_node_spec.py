"""NodeSpec validation, node addresses, and the accelerator environment (pure)."""

from __future__ import annotations

import itertools
import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simcluster import NodeSpec
from simcluster._spec import node_address
from simcluster.driver.accelerators import visible_devices_env


def test_defaults_and_totals():
    spec = NodeSpec(cpus=2, gpus=2, accelerator_type="A100", resources={"mem": 3})
    assert spec.accelerator == "CUDA"
    assert spec.total_resources() == {"CPU": 2.0, "GPU": 2.0, "accelerator_type:A100": 1.0,
                                      "mem": 3.0}
    assert NodeSpec(tpus=4).accelerator == "TPU"
    assert NodeSpec(tpus=4).total_resources() == {"CPU": 1.0, "TPU": 4.0}
    assert NodeSpec(cpus=64).total_resources() == {"CPU": 64.0}  # logical, not the machine's


@pytest.mark.parametrize("kwargs, match", [
    (dict(cpus=-1), r"cpus=-1"),
    (dict(cpus="2"), r"cpus='2'"),
    (dict(gpus=1.5), r"gpus=1.5.*whole number"),
    (dict(accelerator="NPU"), r"accelerator='NPU'.*CUDA"),
    (dict(gpus=2, accelerator="TPU"), r"tpus="),
    (dict(tpus=2, accelerator="CUDA"), r"one kind of accelerator"),
    (dict(resources={"GPU": 1}), r"key 'GPU' is not allowed"),
    (dict(resources={"x": -1}), r"resources\['x'\]=-1"),
    (dict(labels={"a": 1}), r"labels="),
    (dict(env={"A": 1}), r"env="),
])
def test_bad_specs_name_the_field(kwargs, match):
    with pytest.raises((ValueError, TypeError), match=match):
        NodeSpec(**kwargs)


def test_spec_keeps_private_copies():
    labels = {"zone": "a"}
    spec = NodeSpec(labels=labels)
    labels["zone"] = "b"
    assert spec.labels == {"zone": "a"}


def test_node_addresses_are_distinct_loopback_addresses():
    addresses = [node_address(i) for i in range(600)]
    assert len(set(addresses)) == 600
    assert addresses[0] == "127.0.0.2"
    assert all(a.startswith("127.") and "127.0.0.1" != a for a in addresses)
    assert all(0 < int(part) < 255 for a in addresses for part in a.split(".")[1:][-1:])


@pytest.mark.parametrize("spec, ids, expected", [
    (NodeSpec(gpus=4), [2, 0], {"CUDA_VISIBLE_DEVICES": "0,2"}),
    (NodeSpec(gpus=4, accelerator="ROCm"), [1], {"HIP_VISIBLE_DEVICES": "1"}),
    (NodeSpec(gpus=4), [], {"CUDA_VISIBLE_DEVICES": ""}),
    (NodeSpec(tpus=4), [], {"TPU_VISIBLE_CHIPS": ""}),
    (NodeSpec(tpus=4), [0, 1, 2, 3], {}),  # the whole host: the runtime uses every chip
    (NodeSpec(tpus=8), [4, 5, 6, 7], {"TPU_VISIBLE_CHIPS": "4,5,6,7"}),  # no bounds
    (NodeSpec(tpus=4), [3], {"TPU_VISIBLE_CHIPS": "3", "TPU_CHIPS_PER_HOST_BOUNDS": "1,1,1",
                             "TPU_HOST_BOUNDS": "1,1,1"}),
    (NodeSpec(tpus=8), [3, 2], {"TPU_VISIBLE_CHIPS": "2,3",
                                "TPU_CHIPS_PER_HOST_BOUNDS": "1,2,1",
                                "TPU_HOST_BOUNDS": "1,1,1"}),
    (NodeSpec(cpus=2), [], {}),
])
def test_visible_devices_env(spec, ids, expected):
    assert visible_devices_env(spec, ids) == expected


# Ray 2.60's rule for a fresh worker process holding TPU chips `ids` of a node (what
# set_current_process_visible_accelerator_ids in ray/_private/accelerators/tpu.py does):
# the whole node -> no variable at all; otherwise TPU_VISIBLE_CHIPS lists the chips, and
# only a 1- or 2-chip allocation also gets chip bounds 1,1,1 / 1,2,1 and host bounds 1,1,1.
_SUBHOST_BOUNDS = {1: "1,1,1", 2: "1,2,1"}


@st.composite
def _tpu_allocations(draw):
    node = draw(st.sampled_from([1, 2, 4, 8]))
    ids = draw(st.lists(st.integers(0, node - 1), min_size=1, max_size=node, unique=True))
    return node, ids


@given(_tpu_allocations())
def test_tpu_env_follows_rays_rule(allocation):
    node, ids = allocation
    env = visible_devices_env(NodeSpec(tpus=node), ids)
    if len(ids) == node:
        assert env == {}, f"ids={ids} hold the whole {node}-chip node: expected no variables"
        return
    assert env["TPU_VISIBLE_CHIPS"] == ",".join(str(i) for i in sorted(ids))
    bounds = _SUBHOST_BOUNDS.get(len(ids))
    if bounds is None:
        assert set(env) == {"TPU_VISIBLE_CHIPS"}, f"ids={ids} of {node}: no bounds expected"
    else:
        assert env == {"TPU_VISIBLE_CHIPS": env["TPU_VISIBLE_CHIPS"],
                       "TPU_CHIPS_PER_HOST_BOUNDS": bounds, "TPU_HOST_BOUNDS": "1,1,1"}


def test_tpu_env_same_as_rays_own_function(monkeypatch):
    """Every allocation on 1-, 2-, 4- and 8-chip nodes, against Ray's function itself."""
    ray_tpu = pytest.importorskip("ray._private.accelerators.tpu")
    manager = ray_tpu.TPUAcceleratorManager
    tpu_vars = ("TPU_VISIBLE_CHIPS", "TPU_CHIPS_PER_HOST_BOUNDS", "TPU_HOST_BOUNDS")
    # monkeypatch puts back whatever was there; the loop below clears the variables again
    # before each call, as a fresh worker process would have them.
    for var in (*tpu_vars, "RAY_TPU_RESOURCE_PER_CHIP",
                "RAY_EXPERIMENTAL_NOSET_TPU_VISIBLE_CHIPS"):
        monkeypatch.delenv(var, raising=False)
    mismatches = []
    for node in (1, 2, 4, 8):
        monkeypatch.setattr(manager, "get_current_node_num_accelerators",
                            staticmethod(lambda node=node: node))
        for size in range(1, node + 1):
            for ids in itertools.combinations(range(node), size):
                for var in tpu_vars:
                    os.environ.pop(var, None)
                manager.set_current_process_visible_accelerator_ids([str(i) for i in ids])
                theirs = {var: os.environ[var] for var in tpu_vars if var in os.environ}
                ours = visible_devices_env(NodeSpec(tpus=node), list(ids))
                if ours != theirs:
                    mismatches.append(f"NodeSpec(tpus={node}), ids={list(ids)}: "
                                      f"simcluster={ours}, Ray={theirs}")
    assert not mismatches, "\n".join(mismatches[:10])
