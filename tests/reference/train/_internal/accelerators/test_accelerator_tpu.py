"""TPU: visible chips and bounds per allocation, slice arithmetic; compared with Ray."""

from __future__ import annotations

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reference.train._internal.accelerators import TPUManager, tpu

VARS = ("TPU_VISIBLE_CHIPS", "TPU_CHIPS_PER_HOST_BOUNDS", "TPU_HOST_BOUNDS")


def _apply(environ: dict, changes: dict) -> dict:
    out = dict(environ)
    for key, value in changes.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = value
    return out


@pytest.mark.parametrize("ids, node, expected", [
    ([1], 4, {"TPU_VISIBLE_CHIPS": "1", "TPU_CHIPS_PER_HOST_BOUNDS": "1,1,1",
              "TPU_HOST_BOUNDS": "1,1,1"}),
    ([2, 3], 4, {"TPU_VISIBLE_CHIPS": "2,3", "TPU_CHIPS_PER_HOST_BOUNDS": "1,2,1",
                 "TPU_HOST_BOUNDS": "1,1,1"}),
    ([4, 5, 6, 7], 8, {"TPU_VISIBLE_CHIPS": "4,5,6,7"}),  # no bounds for 4 of 8 chips
    ([0, 1, 2, 3], 4, {}),  # the whole host: no limit at all
])
def test_fresh_process(ids, node, expected):
    assert _apply({}, TPUManager.visible_devices_env(ids, node, environ={})) == expected


def test_stale_subhost_bounds_are_removed():
    before = {"TPU_CHIPS_PER_HOST_BOUNDS": "1,1,1", "TPU_HOST_BOUNDS": "1,1,1",
              "TPU_VISIBLE_CHIPS": "0"}
    after = _apply(before, TPUManager.visible_devices_env([0, 1, 2, 3], 8, environ=before))
    assert after == {"TPU_VISIBLE_CHIPS": "0,1,2,3"}


def test_slices():
    assert tpu.slice_chips("4x4") == 16
    assert tpu.chips_per_host("2x4", "TPU-V6E") == 8  # single-host v6e topology
    assert tpu.chips_per_host("4x4", "TPU-V6E") == 4
    assert tpu.workers_per_slice("4x4", "TPU-V6E") == 4
    assert tpu.workers_per_slice("2x2x2", "TPU-V4", {"TPU": 1}) == 8
    assert tpu.cores_per_chip("v6e") == 1 and tpu.cores_per_chip("v4") == 2
    assert tpu.multislice_env("10.0.0.1:8081", 2, 1) == {
        "MEGASCALE_COORDINATOR_ADDRESS": "10.0.0.1:8081", "MEGASCALE_PORT": "8081",
        "MEGASCALE_NUM_SLICES": "2", "MEGASCALE_SLICE_ID": "1"}


# ------------------------------------------------------------------------- against Ray
ray_tpu = pytest.importorskip("ray._private.accelerators.tpu")

_BOUNDS = st.sampled_from([None, "1,1,1", "1,2,1", "2,2,1"])


@settings(max_examples=200, deadline=None)
@given(node=st.sampled_from([1, 2, 4, 8]), data=st.data(), chip_bounds=_BOUNDS,
       host_bounds=st.sampled_from([None, "1,1,1", "2,2,1"]),
       visible=st.sampled_from([None, "0", "0,1"]))
def test_visible_env_same_as_ray(node, data, chip_bounds, host_bounds, visible):
    ids = data.draw(st.lists(st.integers(0, node - 1), min_size=1, max_size=node, unique=True))
    before = {k: v for k, v in zip(VARS, (visible, chip_bounds, host_bounds), strict=True)
              if v is not None}
    ours = _apply(before, TPUManager.visible_devices_env(ids, node, environ=before))

    saved = {k: os.environ.get(k) for k in VARS}
    original = ray_tpu.TPUAcceleratorManager.__dict__["get_current_node_num_accelerators"]
    try:
        for key in VARS:
            os.environ.pop(key, None)
        os.environ.update(before)
        ray_tpu.TPUAcceleratorManager.get_current_node_num_accelerators = staticmethod(
            lambda: node)
        ray_tpu.TPUAcceleratorManager.set_current_process_visible_accelerator_ids(
            [str(i) for i in ids])
        theirs = {k: os.environ[k] for k in VARS if k in os.environ}
    finally:
        ray_tpu.TPUAcceleratorManager.get_current_node_num_accelerators = original
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    assert ours == theirs, f"ids={ids} node={node} before={before}"


_TYPES = st.sampled_from(["v2", "v3", "v4", "v5p", "v5litepod", "v6e", "v7x", "TPU-V6E",
                          "tpu7x", "V5P", "v9"])
_TOPOLOGIES = st.sampled_from(["1x1", "2x2", "2x4", "2x8", "4x4", "4x8", "8x8", "16x16",
                               "2x2x1", "2x2x2", "2x4x4", "4x4x4", "4x4x8", "8x8x16",
                               "12x12x16", "16x16x24", "4x4x12", "3x3"])


@settings(max_examples=200, deadline=None)
@given(_TYPES, _TOPOLOGIES)
def test_topology_validity_same_as_ray(accelerator_type, topology):
    theirs = ray_tpu.TPUAcceleratorManager.is_valid_tpu_accelerator_topology(
        accelerator_type, topology)
    assert tpu.is_valid_topology(accelerator_type, topology) == theirs


@pytest.mark.parametrize("name", ["v4-32", "v5litepod-16", "tpu7x-16", "v6e", "TPU-V6E-8",
                                  "v4-", "a100-8"])
def test_pod_type_same_as_ray(name):
    assert tpu.is_valid_pod_type(name) == \
        ray_tpu.TPUAcceleratorManager.is_valid_tpu_accelerator_type(name)


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(["TPU-V4", "TPU-V5P", "TPU-V6E", "TPU-V5LITEPOD", "TPU-V7X"]),
       st.sampled_from(["2x2", "2x4", "4x4", "4x8", "2x2x1", "2x2x2", "2x4x4", "4x4x4"]),
       st.sampled_from([None, {"TPU": 1}, {"TPU": 2}, {"TPU": 4}, {"TPU": 8, "CPU": 2}]))
def test_workers_per_slice_same_as_ray(accelerator_type, topology, resources):
    from ray.util.tpu import get_tpu_worker_resources

    try:
        theirs = get_tpu_worker_resources(topology, accelerator_type, resources)[0]
    except ValueError:
        with pytest.raises(ValueError):
            tpu.workers_per_slice(topology, accelerator_type, resources)
        return
    assert tpu.workers_per_slice(topology, accelerator_type, resources) == theirs
