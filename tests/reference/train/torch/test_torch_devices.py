"""get_device(s) and the process-group backend a worker ends up with."""

from __future__ import annotations

import pytest
import torch
from torch_rank_pool import RankSession

from reference.train._context import TrainContext
from reference.train._internal.accelerators import assignment_env
from reference.train._internal.local_mode import LocalSession
from reference.train._internal.session import set_session
from reference.train.torch import _devices, get_device, get_devices


@pytest.fixture
def worker(monkeypatch):
    """Be a worker of a 2-rank run holding the devices given to the returned function."""
    set_session(RankSession(TrainContext("t", world_size=2, world_rank=1)))

    def hold(accelerator=None, ids=(), cuda_visible=None):
        for key, value in assignment_env(accelerator, ids).items():
            monkeypatch.setenv(key, value)
        if cuda_visible is None:
            monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
        else:
            monkeypatch.setenv("CUDA_VISIBLE_DEVICES", cuda_visible)

    yield hold
    set_session(None)


@pytest.mark.parametrize("ids, visible, expected", [
    (["2"], "2,3", [0]),
    (["2"], "0,1,2,3", [2]),
    (["2", "3"], "0,1,2,3", [2, 3]),
    (["10"], "10,2", [0]),
    ([], None, [0]),  # no GPU given: the first device, as Ray answers on a driver
])
def test_cuda_device_index_is_the_position_in_cuda_visible_devices(ids, visible, expected):
    assert _devices.cuda_device_indices(ids, visible) == expected


@pytest.mark.parametrize("visible", ["0,1", "", None, "NoDevFiles"])
def test_a_gpu_missing_from_cuda_visible_devices_is_an_error(visible):
    with pytest.raises(RuntimeError, match="CUDA_VISIBLE_DEVICES set incorrectly"):
        _devices.cuda_device_indices(["3"], visible)


@pytest.mark.parametrize("fn", [get_device, get_devices])
def test_outside_a_training_function(fn):
    with pytest.raises(RuntimeError, match=f"`{fn.__name__}` cannot be used outside"):
        fn()


def test_local_mode_uses_the_current_cuda_device_or_the_cpu():
    set_session(LocalSession(TrainContext("t")))
    try:
        expected = (torch.device(f"cuda:{torch.cuda.current_device()}")
                    if torch.cuda.is_available() else torch.device("cpu"))
        assert get_devices() == [expected] and get_device() == expected
    finally:
        set_session(None)


def test_cpu_worker(worker):
    worker()
    assert get_devices() == [torch.device("cpu")]


def test_gpu_worker_finds_its_gpus_by_position(worker, monkeypatch):
    worker("CUDA", (2, 3), cuda_visible="0,1,2,3")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert get_devices() == [torch.device("cuda:2"), torch.device("cuda:3")]
    assert get_device() == torch.device("cuda:2")


@pytest.mark.parametrize("accelerator", ["CUDA", "ROCm", "TPU"])
def test_simulated_accelerators_compute_on_the_cpu(worker, monkeypatch, accelerator):
    worker(accelerator, (1,), cuda_visible="0,1")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(_devices, "_has_torch_tpu", lambda: False)
    assert get_devices() == [torch.device("cpu")]
    assert _devices.resolve_backend(None) == "gloo"
    assert _devices.resolve_backend("nccl") == "gloo"
    assert _devices.resolve_backend("tpu_dist") == "gloo"
    assert _devices.resolve_backend("cpu:gloo,cuda:nccl") == "gloo"
    assert _devices.resolve_backend("mpi") == "mpi"


def test_real_accelerators_keep_the_requested_backend(worker, monkeypatch):
    worker("CUDA", (0,), cuda_visible="0")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert _devices.resolve_backend(None) == "nccl"
    assert _devices.resolve_backend("gloo") == "gloo"
    worker("TPU", (0,))
    monkeypatch.setattr(_devices, "_has_torch_tpu", lambda: True)
    assert _devices.resolve_backend(None) == "tpu_dist"


def test_cpu_workers_get_what_they_ask_for(worker):
    # An explicit NCCL backend without GPUs fails in torch, as it does under Ray.
    worker()
    assert _devices.resolve_backend(None) == "gloo"
    assert _devices.resolve_backend("nccl") == "nccl"


@pytest.mark.parametrize("backend, nccl", [
    ("nccl", True), ("gloo", False), ("cpu:gloo,cuda:nccl", True), ("cuda:gloo", False),
    ("cpu:nccl", False), ("cuda", False),
])
def test_uses_nccl(backend, nccl):
    assert _devices.uses_nccl(backend) is nccl
