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


# Values observed from ray.util.tpu.get_tpu_worker_resources in Ray 2.60.
@pytest.mark.parametrize("topology, accelerator_type, resources, workers, per_worker", [
    ("4x4", "TPU-V6E", None, 4, {"CPU": 1, "TPU": 4}),
    ("2x4", "TPU-V6E", None, 1, {"CPU": 1, "TPU": 8}),  # single-host v6e: one host, 8 chips
    ("2x2", "TPU-V5LITEPOD", None, 1, {"CPU": 1, "TPU": 4}),
    ("1x1", "TPU-V6E", None, 1, {"CPU": 1, "TPU": 1}),
    ("2x4", "TPU-V4", None, 2, {"CPU": 1, "TPU": 4}),
    ("2x2x2", "TPU-V4", None, 2, {"CPU": 1, "TPU": 4}),
    ("2x2x2", "TPU-V4", {"TPU": 1}, 8, {"TPU": 1, "CPU": 1}),
    ("4x4x4", "TPU-V5P", {"CPU": 8}, 16, {"CPU": 8, "TPU": 4}),
    ("4x4", "TPU-V6E", {"TPU": 2}, 8, {"TPU": 2, "CPU": 1}),
    ("0x4", "TPU-V4", None, 0, {"CPU": 1, "TPU": 4}),
    (" 2X4 ", "TPU-V4", None, 2, {"CPU": 1, "TPU": 4}),
    # Spellings of the generation: 'TPU-' prefix, 'TPU<n>', bare, any case.
    ("4x4", "tpu-v5p", None, 4, {"CPU": 1, "TPU": 4}),
    ("4x4", "TPU4", None, 4, {"CPU": 1, "TPU": 4}),
    ("2x2", "v6e", None, 1, {"CPU": 1, "TPU": 4}),
    ("4x4", "TPU-V2", None, 4, {"CPU": 1, "TPU": 4}),
    ("4x4", "TPU-V3", None, 4, {"CPU": 1, "TPU": 4}),
    ("2x2x1", "v7x", None, 1, {"CPU": 1, "TPU": 4}),
])
def test_slice_workers(topology, accelerator_type, resources, workers, per_worker):
    assert tpu.slice_workers(topology, accelerator_type, resources) == (workers, per_worker)


def test_slice_workers_leaves_the_callers_resources_alone():
    resources = {"TPU": 2}
    tpu.slice_workers("4x4", "TPU-V6E", resources)
    assert resources == {"TPU": 2}


@pytest.mark.parametrize("accelerator_type", ["A100", "TPU-V8", "", "tpuv4", "V6E-8"])
def test_slice_workers_rejects_other_accelerator_types(accelerator_type):
    with pytest.raises(ValueError, match="not a TPU type"):
        tpu.slice_workers("4x4", accelerator_type)


@pytest.mark.parametrize("topology", ["4y4", "axb", "4x", "x4", "2x2x", "four", ""])
def test_slice_workers_rejects_unparsable_topologies(topology):
    with pytest.raises(ValueError):
        tpu.slice_workers(topology, "TPU-V4")


@pytest.mark.parametrize("topology, resources", [("4x4", {"TPU": 3}), ("2x2", {"TPU": -1}),
                                                 ("2x2", {"TPU": 0})])
def test_slice_workers_rejects_uneven_or_non_positive_tpus(topology, resources):
    with pytest.raises(ValueError, match="TPU="):
        tpu.slice_workers(topology, "TPU-V4", resources)


# ------------------------------------------------------------------------- against Ray
ray_tpu = pytest.importorskip("ray._private.accelerators.tpu")

_BOUNDS = st.sampled_from([None, "1,1,1", "1,2,1", "2,2,1"])
# Also cleared while Ray's function runs: knobs that change what it writes.
_CLEARED = (*VARS, "RAY_TPU_RESOURCE_PER_CHIP", "RAY_EXPERIMENTAL_NOSET_TPU_VISIBLE_CHIPS")


@settings(max_examples=200, deadline=None)
@given(node=st.sampled_from([1, 2, 4, 8]), data=st.data(), chip_bounds=_BOUNDS,
       host_bounds=st.sampled_from([None, "1,1,1", "2,2,1"]),
       visible=st.sampled_from([None, "0", "0,1"]))
def test_visible_env_same_as_ray(node, data, chip_bounds, host_bounds, visible):
    ids = data.draw(st.lists(st.integers(0, node - 1), min_size=1, max_size=node, unique=True))
    before = {k: v for k, v in zip(VARS, (visible, chip_bounds, host_bounds), strict=True)
              if v is not None}
    ours = _apply(before, TPUManager.visible_devices_env(ids, node, environ=before))

    saved = {k: os.environ.get(k) for k in _CLEARED}
    original = ray_tpu.TPUAcceleratorManager.__dict__["get_current_node_num_accelerators"]
    try:
        for key in _CLEARED:
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


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(["TPU-V4", "TPU-V5P", "TPU-V6E", "TPU-V5LITEPOD", "TPU-V7X", "TPU4",
                        "v6e", "A100"]),
       st.sampled_from(["1x1", "2x2", "2x4", "4x4", "4x8", "2x2x1", "2x2x2", "2x4x4",
                        "4x4x4", "4y4"]),
       st.sampled_from([None, {"TPU": 1}, {"TPU": 2}, {"TPU": 3}, {"TPU": 4},
                        {"TPU": 8, "CPU": 2}, {"CPU": 4}]))
def test_slice_workers_same_as_ray(accelerator_type, topology, resources):
    from ray.util.tpu import get_tpu_worker_resources

    try:
        # One TPU resource per chip: the reference has no RAY_TPU_RESOURCE_PER_CHIP.
        theirs = get_tpu_worker_resources(topology, accelerator_type, resources,
                                          tpu_resource_per_chip=1)
    except ValueError:
        with pytest.raises(ValueError):
            tpu.slice_workers(topology, accelerator_type, resources)
        return
    assert tpu.slice_workers(topology, accelerator_type, resources) == theirs
