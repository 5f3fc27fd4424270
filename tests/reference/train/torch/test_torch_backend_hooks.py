"""The torch backend's hooks on real rank processes: env, process group, teardown."""

from __future__ import annotations

import pytest
import torch_rank_fns as fns
from torch_rank_pool import RankError, make_slots

from reference.train.torch import TorchConfig
from reference.train.torch._config import TorchBackend

pytestmark = pytest.mark.slow
CONFIG = TorchConfig(backend="gloo", timeout_s=30)


@pytest.mark.parametrize("init_method", ["env", "tcp"])
def test_ranks_join_one_gloo_group(rank_pool, init_method):
    config = TorchConfig(backend="gloo", init_method=init_method, timeout_s=30)
    seen = rank_pool.run(config, make_slots(4, nodes=2), fns.inspect_rank)
    assert [s["rank"] for s in seen] == [0, 1, 2, 3]
    assert {s["backend"] for s in seen} == {"gloo"} and {s["sum"] for s in seen} == {10.0}
    for rank, s in enumerate(seen):
        env = s["env"]
        assert (env["RANK"], env["WORLD_SIZE"], env["LOCAL_RANK"], env["LOCAL_WORLD_SIZE"],
                env["NODE_RANK"]) == (str(rank), "4", str(rank % 2), "2", str(rank // 2))
        assert env["ACCELERATE_TORCH_DEVICE"] == "cpu" and s["devices"] == ["cpu"]
        assert (env["MASTER_ADDR"] is None) is (init_method == "tcp")


def test_simulated_gpu_workers_use_gloo_on_the_cpu(rank_pool):
    # nccl is what TorchTrainer picks with use_gpu=True.
    config = TorchConfig(backend="nccl", timeout_s=30)
    slots = make_slots(4, nodes=2, accelerator="CUDA", ids_per_worker=1)
    seen = rank_pool.run(config, slots, fns.inspect_rank)
    assert {s["backend"] for s in seen} == {"gloo"} and {s["sum"] for s in seen} == {10.0}
    assert [s["env"]["CUDA_VISIBLE_DEVICES"] for s in seen] == ["0,1"] * 4
    assert all(s["devices"] == ["cpu"] for s in seen)


@pytest.mark.parametrize("world_size, left", [(1, True), (2, False)])
def test_on_shutdown_destroys_the_group_only_for_several_workers(rank_pool, world_size, left):
    backend = TorchBackend()
    with rank_pool.group(CONFIG, make_slots(world_size)) as group:
        backend.on_start(group, CONFIG)
        assert group.execute(fns.group_exists) == [True] * world_size
        backend.on_shutdown(group, CONFIG)
        assert group.execute(fns.group_exists) == [left] * world_size


def test_the_port_rank_0_offers_is_free_on_every_address(rank_pool):
    import socket

    from reference.train._internal.network import address_and_port

    with rank_pool.group(CONFIG, make_slots(1)) as group:
        address, port = group.execute_single(0, address_and_port)
    assert address == "127.0.0.1"
    with socket.socket() as sock:
        sock.bind(("", port))


def test_the_torch_backend_is_chosen_from_the_resources_when_none_is_set(rank_pool):
    # GPU workers ask for nccl; their simulated devices make each rank fall back to gloo.
    slots = make_slots(2, accelerator="CUDA", ids_per_worker=1)
    seen = rank_pool.run(TorchConfig(backend=None, timeout_s=30), slots, fns.inspect_rank)
    assert {s["backend"] for s in seen} == {"gloo"} and {s["sum"] for s in seen} == {3.0}


def test_more_than_one_worker_wraps_the_model_in_ddp(rank_pool):
    assert rank_pool.run(CONFIG, make_slots(2), fns.wrapped_model_type) == \
        ["DistributedDataParallel"] * 2
    assert rank_pool.run(CONFIG, make_slots(1), fns.wrapped_model_type) == ["Linear"]


@pytest.mark.parametrize("shuffle", [False, True])
def test_prepared_loaders_partition_the_data_and_reshuffle_per_epoch(rank_pool, shuffle):
    per_rank = rank_pool.run(CONFIG, make_slots(2), fns.sampler_indices, 10, 2, shuffle, 2)
    for epoch in range(2):
        seen = per_rank[0][epoch] + per_rank[1][epoch]
        assert sorted(seen) == list(range(10)), f"epoch {epoch}: {per_rank}"
    assert (per_rank[0][0] != per_rank[0][1]) is shuffle


@pytest.mark.parametrize("backend, error", [
    ("bogus", "Unknown backend type bogus"),
    ("nccl", "NCCL"),  # asked for explicitly on CPU workers: torch's own error, as in Ray
])
def test_a_bad_backend_fails_the_setup_with_torchs_error(rank_pool, backend, error):
    import torch

    if backend == "nccl" and torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with pytest.raises(RankError, match=error):
        rank_pool.run(TorchConfig(backend=backend, timeout_s=10), make_slots(1),
                      fns.inspect_rank, timeout=30)
