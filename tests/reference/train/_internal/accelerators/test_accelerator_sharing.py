"""Sharing GPU visibility across the workers of a node (Ray's CUDA_VISIBLE_DEVICES rule)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reference.train._internal.accelerators import shared_visible_ids
from reference.train._internal.worker_group.api import WorkerSlot


def _slot(rank, node, ids, accelerator="CUDA"):
    return WorkerSlot(rank=rank, local_rank=0, node_rank=0, world_size=1, local_world_size=1,
                      node_id=node, node_address="127.0.0.1", accelerator=accelerator,
                      accelerator_ids=tuple(ids))


def test_union_per_node():
    # Node 1 holds workers with GPUs {0,1} and {2,3}; node 2 one worker with {0,1}.
    slots = [_slot(0, "n1", [0, 1]), _slot(1, "n1", [2, 3]), _slot(2, "n2", [0, 1])]
    assert shared_visible_ids(slots, "GPU") == ["0,1,2,3", "0,1,2,3", "0,1"]


def test_ids_sort_as_strings_like_ray():
    slots = [_slot(0, "n", [2]), _slot(1, "n", [10])]
    assert shared_visible_ids(slots, "GPU") == ["10,2", "10,2"]


def test_workers_without_gpus_are_left_alone():
    slots = [_slot(0, "n", [], accelerator=None), _slot(1, "n", [], accelerator="CUDA"),
             _slot(2, "t", [0], accelerator="TPU")]
    assert shared_visible_ids(slots, "GPU") == [None, None, None]
    assert shared_visible_ids(slots, "TPU") == [None, None, "0"]


def test_rocm_gpus_count_as_gpus():
    slots = [_slot(0, "n", [1], "ROCm"), _slot(1, "n", [0], "ROCm")]
    assert shared_visible_ids(slots, "GPU") == ["0,1", "0,1"]


_NODES = st.lists(st.tuples(st.sampled_from(["a", "b", "c"]),
                            st.lists(st.integers(0, 11), min_size=1, max_size=3, unique=True)),
                  min_size=1, max_size=6)


@settings(max_examples=150, deadline=None)
@given(_NODES)
def test_same_as_ray(workers):
    accelerators = pytest.importorskip("ray.train.v2._internal.callbacks.accelerators")
    from ray.train.v2._internal.execution.worker_group.worker import ActorMetadata

    metadata = [ActorMetadata(hostname=node, node_id=node, node_ip="127.0.0.1", pid=1,
                              accelerator_ids={"GPU": [str(i) for i in ids]})
                for node, ids in workers]
    theirs = accelerators._get_visible_accelerator_ids_per_worker(metadata, "GPU")
    slots = [_slot(rank, node, ids) for rank, (node, ids) in enumerate(workers)]
    assert shared_visible_ids(slots, "GPU") == theirs
