"""NodeSpec validation, node addresses, and the accelerator environment (pure)."""

from __future__ import annotations

import pytest

from simcluster import NodeSpec
from simcluster._spec import node_address
from simcluster.driver.accelerators import tpu_chip_bounds, visible_devices_env


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
    (NodeSpec(tpus=4), [0, 1, 2, 3], {"TPU_VISIBLE_CHIPS": "0,1,2,3",
                                      "TPU_CHIPS_PER_HOST_BOUNDS": "2,2,1",
                                      "TPU_HOST_BOUNDS": "1,1,1"}),
    (NodeSpec(tpus=4), [3], {"TPU_VISIBLE_CHIPS": "3", "TPU_CHIPS_PER_HOST_BOUNDS": "1,1,1",
                             "TPU_HOST_BOUNDS": "1,1,1"}),
    (NodeSpec(cpus=2), [], {}),
])
def test_visible_devices_env(spec, ids, expected):
    assert visible_devices_env(spec, ids) == expected


def test_tpu_bounds():
    assert [tpu_chip_bounds(n) for n in (1, 2, 4, 8)] == ["1,1,1", "1,2,1", "2,2,1", "2,4,1"]
