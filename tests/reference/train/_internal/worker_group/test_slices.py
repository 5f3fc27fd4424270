"""SliceRequest: which TPU slices a job may use, its capacity in whole slices, and the
bundles that pin a group to whole slices (pure logic over node records)."""

from __future__ import annotations

import dataclasses

import pytest

import reference.train as train
import simcluster
from reference.train._internal.worker_group.slices import SliceRequest
from simcluster import tpu


@dataclasses.dataclass
class FakeNode:
    spec: simcluster.NodeSpec
    state: str = "up"


def nodes(*slices, down=()):
    out = []
    for name, kind, topology in slices:
        for i, spec in enumerate(tpu.tpu_slice(name, kind, topology)):
            out.append(FakeNode(spec, "down" if (name, i) in down else "up"))
    return out


def request(workers=4, topology="2x2x4", kind="TPU-V4", **kwargs):
    return SliceRequest.from_scaling_config(train.ScalingConfig(
        num_workers=workers, use_tpu=True, topology=topology, accelerator_type=kind, **kwargs))


def test_only_slice_jobs_make_a_request():
    assert SliceRequest.from_scaling_config(train.ScalingConfig(num_workers=2)) is None
    r = request()
    assert (r.per_slice, r.hosts, r.per_host) == (4, 4, 1)  # v4-32: 16 chips, 4 hosts


def test_capacity_counts_whole_slices_of_the_right_kind_only():
    cluster = nodes(("a", "TPU-V4", "2x2x4"), ("b", "TPU-V4", "2x2x4"),
                    ("c", "TPU-V4", "2x2x2"), ("d", "TPU-V6E", "4x4"), down={("b", 2)})
    assert list(request().complete_slices(cluster)) == ["a"]  # b lost a host
    assert request().capacity(cluster) == 4


def test_bundles_pin_every_host_and_prefer_free_slices():
    cluster = nodes(("a", "TPU-V4", "2x2x4"), ("b", "TPU-V4", "2x2x4"))
    available = {tpu.host_resource("a", 0): 0.0}  # another job holds host 0 of "a"
    available.update({tpu.host_resource("b", i): 1.0 for i in range(4)})
    bundles = request().bundles(4, cluster, available, {"CPU": 1, "TPU": 4})
    assert bundles == [{"CPU": 1, "TPU": 4, tpu.host_resource("b", i): 1.0} for i in range(4)]


def test_several_workers_per_host_share_its_pin():
    r = request(workers=16, resources_per_worker={"TPU": 1})
    assert (r.per_slice, r.per_host) == (16, 4)
    bundles = r.bundles(16, nodes(("a", "TPU-V4", "2x2x4")), {}, {"CPU": 1, "TPU": 1})
    assert [b[tpu.host_resource("a", i // 4)] for i, b in enumerate(bundles)] == [0.25] * 16


@pytest.mark.parametrize("kind, topology, expected", [
    ("TPU-V4", "2x2x4", "v4-32"), ("TPU-V6E", "4x4", "v6e-16"), ("TPU-V5P", "2x2x1", "v5p-8"),
])
def test_pod_types_count_cores(kind, topology, expected):
    assert tpu.pod_type(kind, topology) == expected


def test_a_worker_bigger_than_a_host_is_refused_naming_the_setting():
    with pytest.raises(ValueError, match="2 workers cannot cover the slice's 4 hosts"):
        request(workers=2, resources_per_worker={"TPU": 8})
