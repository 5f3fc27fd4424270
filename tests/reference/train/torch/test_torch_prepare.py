"""prepare_model, prepare_data_loader and enable_reproducibility in one process (the
multi-rank behaviour is in test_torch_backend_hooks.py)."""

from __future__ import annotations

import collections
import logging
import os
import random

import numpy as np
import pytest
import torch
import torch.distributed as dist
from torch.utils.data import (
    DataLoader,
    DistributedSampler,
    IterableDataset,
    RandomSampler,
    TensorDataset,
)
from torch_rank_pool import RankSession

from reference.train._context import TrainContext
from reference.train._internal.session import set_session
from reference.train.torch import enable_reproducibility, prepare_data_loader, prepare_model
from reference.train.torch._data_loader import DeviceDataLoader, move_to_device


def _be_rank(world_size: int, rank: int = 0):
    set_session(RankSession(TrainContext("t", world_size=world_size, world_rank=rank)))


@pytest.fixture
def one_rank():
    _be_rank(1)
    yield
    set_session(None)


@pytest.fixture
def two_ranks():
    """Rank 0 of 2 as the context says; a 1-process gloo group so samplers can be built."""
    _be_rank(2)
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    yield
    dist.destroy_process_group()
    set_session(None)


def _dataset(n=10):
    return TensorDataset(torch.arange(n, dtype=torch.float32).unsqueeze(1), torch.arange(n))


class Stream(IterableDataset):
    def __iter__(self):
        return iter(range(4))


# --------------------------------------------------------------------------- prepare_model
def test_single_worker_model_is_moved_not_wrapped(one_rank):
    model = torch.nn.Linear(2, 1)
    assert prepare_model(model) is model  # .to(cpu) returns the same module


def test_move_to_device_may_name_the_device(one_rank):
    prepared = prepare_model(torch.nn.Linear(2, 1), move_to_device=torch.device("meta"))
    assert prepared.weight.device.type == "meta"


def test_move_to_device_false_leaves_the_model(one_rank):
    model = torch.nn.Linear(2, 1).to("meta")
    assert prepare_model(model, move_to_device=False).weight.device.type == "meta"


def test_no_parallel_strategy_means_no_wrapper(two_ranks):
    model = torch.nn.Linear(2, 1)
    assert prepare_model(model, parallel_strategy=None) is model


@pytest.mark.parametrize("strategy", ["fsdp", "zero"])
def test_fsdp_without_cuda_raises_rays_error(two_ranks, strategy):
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with pytest.raises(RuntimeError) as info:
        prepare_model(torch.nn.Linear(2, 1), parallel_strategy=strategy)
    assert str(info.value) == ("FSDP is only available with GPU-enabled training. Set "
                               "`use_gpu=True` in your Trainer to train with GPUs.")


def test_outside_a_training_function():
    with pytest.raises(RuntimeError, match="cannot be used outside"):
        prepare_model(torch.nn.Linear(2, 1))
    with pytest.raises(RuntimeError, match="cannot be used outside"):
        prepare_data_loader(DataLoader(_dataset()))


# --------------------------------------------------------------------- prepare_data_loader
@pytest.mark.parametrize("shuffle", [False, True])
def test_distributed_sampler_keeps_the_shuffle_setting(two_ranks, shuffle):
    loader = DataLoader(_dataset(), batch_size=3, shuffle=shuffle, drop_last=True)
    prepared = prepare_data_loader(loader)
    assert isinstance(prepared, DataLoader) and isinstance(prepared, DeviceDataLoader)
    assert isinstance(prepared.sampler, DistributedSampler)
    assert prepared.sampler.shuffle is shuffle
    assert (prepared.batch_size, prepared.drop_last, len(prepared)) == (3, True, 3)
    prepared.sampler.set_epoch(5)
    assert prepared.sampler.epoch == 5


def test_a_custom_sampler_is_replaced_with_a_warning(two_ranks, caplog):
    dataset = _dataset()
    loader = DataLoader(dataset, sampler=list(range(10)), batch_size=2)
    with caplog.at_level(logging.WARNING):
        prepared = prepare_data_loader(loader, move_to_device=False)
    assert isinstance(prepared.sampler, DistributedSampler) and prepared.sampler.shuffle
    assert "list will be overwritten with a DistributedSampler" in caplog.text


def test_add_dist_sampler_false_leaves_the_loader(two_ranks):
    loader = DataLoader(_dataset(), batch_size=2)
    assert prepare_data_loader(loader, add_dist_sampler=False, move_to_device=False) is loader


def test_an_existing_distributed_sampler_is_kept(two_ranks):
    dataset = _dataset()
    loader = DataLoader(dataset, batch_size=2,
                        sampler=DistributedSampler(dataset, num_replicas=2, rank=1))
    assert prepare_data_loader(loader, move_to_device=False) is loader


def test_iterable_datasets_get_no_sampler(two_ranks):
    loader = DataLoader(Stream(), batch_size=2)
    assert prepare_data_loader(loader, move_to_device=False) is loader


def test_single_worker_keeps_its_sampler(one_rank):
    loader = DataLoader(_dataset(), batch_size=4, shuffle=True)
    prepared = prepare_data_loader(loader)
    assert isinstance(prepared.sampler, RandomSampler)
    assert [len(x) for x, _ in prepared] == [4, 4, 2]


def test_loader_worker_settings_survive_the_rebuild(two_ranks):
    loader = DataLoader(_dataset(), batch_size=2, num_workers=1, prefetch_factor=3,
                        persistent_workers=True, timeout=7.0)
    prepared = prepare_data_loader(loader, move_to_device=False)
    assert (prepared.num_workers, prepared.prefetch_factor, prepared.persistent_workers,
            prepared.timeout) == (1, 3, True, 7.0)


Pair = collections.namedtuple("Pair", "x y")


def test_batches_move_through_nested_structures():
    t = torch.ones(2)
    batch = {"a": [t, (t, "s")], "b": Pair(t, 3), "c": None}
    moved = move_to_device(batch, torch.device("meta"))
    assert moved["a"][0].device.type == "meta" and moved["a"][1][0].device.type == "meta"
    assert isinstance(moved["a"], list) and moved["a"][1][1] == "s"
    assert isinstance(moved["b"], Pair) and moved["b"].x.device.type == "meta"
    assert moved["b"].y == 3 and moved["c"] is None


def test_device_loader_is_a_view_of_the_loader():
    loader = DataLoader(_dataset(), batch_size=4)
    wrapped = DeviceDataLoader(loader, torch.device("meta"), auto_transfer=True)
    assert len(wrapped) == 3 and wrapped.sampler is loader.sampler
    assert wrapped.dataset is loader.dataset and wrapped.batch_size == 4
    batches = list(wrapped)
    assert [x.device.type for x, _ in batches] == ["meta"] * 3
    assert list(wrapped) and len(list(wrapped)) == 3  # iterable again


# --------------------------------------------------------------------- enable_reproducibility
def test_enable_reproducibility(monkeypatch):
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    was_deterministic = torch.are_deterministic_algorithms_enabled()
    benchmark = torch.backends.cudnn.benchmark
    try:
        enable_reproducibility(7)
        first = (torch.rand(2).tolist(), random.random(), np.random.rand())
        enable_reproducibility(7)
        assert (torch.rand(2).tolist(), random.random(), np.random.rand()) == first
        assert torch.are_deterministic_algorithms_enabled()
        assert torch.backends.cudnn.benchmark is False
        assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8"
    finally:
        torch.use_deterministic_algorithms(was_deterministic)
        torch.backends.cudnn.benchmark = benchmark
