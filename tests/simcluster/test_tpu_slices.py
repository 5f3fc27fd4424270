"""simcluster.tpu_slice: the NodeSpecs of a simulated TPU slice."""

from __future__ import annotations

import pytest

import simcluster
from simcluster import tpu


def test_a_v4_32_slice_is_four_labelled_hosts():
    hosts = simcluster.tpu_slice("s", "TPU-V4", "2x2x4", cpus=2)
    assert len(hosts) == 4
    for i, spec in enumerate(hosts):
        assert (spec.tpus, spec.cpus, spec.accelerator) == (4, 2, "TPU")
        assert spec.labels == {tpu.SLICE_LABEL: "s", tpu.WORKER_ID_LABEL: str(i),
                               tpu.POD_TYPE_LABEL: "v4-32", tpu.TOPOLOGY_LABEL: "2x2x4"}
        assert spec.env["TPU_WORKER_ID"] == str(i) and spec.env["TPU_NAME"] == "s"
        assert spec.env["TPU_WORKER_HOSTNAMES"] == "s-w-0,s-w-1,s-w-2,s-w-3"
        resources = spec.total_resources()
        assert resources[tpu.host_resource("s", i)] == 1.0
        assert resources["accelerator_type:TPU-V4"] == 1.0
        assert ("TPU-v4-32-head" in resources) == (i == 0)


@pytest.mark.parametrize("kwargs, message", [
    ({"name": "a:b"}, "without ':'"),
    ({"topology": "2xq"}, "expected sides"),
    ({"accelerator_type": "GPU-A100"}, "expected 'TPU-'"),
    ({"chips_per_host": 3}, "must divide the 16 chips"),
])
def test_bad_slices_name_the_argument(kwargs, message):
    args = {"name": "s", "accelerator_type": "TPU-V4", "topology": "2x2x4", **kwargs}
    name = args.pop("name")
    with pytest.raises(ValueError, match=message):
        simcluster.tpu_slice(name, **args)
