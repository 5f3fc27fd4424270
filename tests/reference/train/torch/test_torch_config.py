"""TorchConfig, the backend TorchTrainer picks, and the environment each rank gets."""

from __future__ import annotations

from datetime import timedelta

import pytest
from torch_rank_pool import make_slots

import reference.train as train
from reference.train._internal.accelerators import (
    ACCELERATOR_IDS_VAR,
    ACCELERATOR_VAR,
    launch_env,
)
from reference.train.backend import Backend
from reference.train.torch import TorchConfig, TorchTrainer
from reference.train.torch._config import TorchBackend


def _noop():
    return None


def test_defaults_and_dict():
    config = TorchConfig()
    assert repr(config) == "TorchConfig(backend=None, init_method='env', timeout_s=1800)"
    assert config.to_dict() == {"backend": None, "init_method": "env", "timeout_s": 1800}
    assert config.backend_cls is TorchBackend
    assert isinstance(config, train.BackendConfig)


def test_fields_are_not_checked_at_construction():
    # As in Ray: bad values fail fit(), not the constructor.
    TorchConfig(backend="bogus", init_method="bad", timeout_s="x")


@pytest.mark.parametrize("scaling, expected", [
    (None, "gloo"),
    (dict(num_workers=2), "gloo"),
    (dict(num_workers=2, use_gpu=True), "nccl"),
    (dict(num_workers=1, use_tpu=True), "tpu_dist"),
    (dict(num_workers=0, use_gpu=True), "nccl"),
])
def test_trainer_writes_the_chosen_backend_into_the_config(scaling, expected):
    config = TorchConfig()
    scaling_config = None if scaling is None else train.ScalingConfig(**scaling)
    trainer = TorchTrainer(_noop, torch_config=config, scaling_config=scaling_config)
    assert config.backend == expected
    assert trainer.backend_config is config


def test_trainer_keeps_an_explicit_backend_and_makes_a_default_config():
    config = TorchConfig(backend="gloo")
    TorchTrainer(_noop, torch_config=config,
                 scaling_config=train.ScalingConfig(num_workers=1, use_gpu=True))
    assert config.backend == "gloo"
    assert TorchTrainer(_noop).backend_config == TorchConfig(backend="gloo")


@pytest.mark.parametrize("scaling", [dict(num_workers=2), dict(num_workers=2, use_gpu=True),
                                     dict(num_workers=1, use_tpu=True)])
@pytest.mark.parametrize("backend", [None, "", "gloo", "nccl"])
def test_backend_choice_same_as_ray(scaling, backend):
    ray_torch = pytest.importorskip("ray.train.torch")
    ray_train = pytest.importorskip("ray.train")
    theirs = ray_torch.TorchConfig(backend=backend)
    ray_torch.TorchTrainer(_noop, torch_config=theirs,
                           scaling_config=ray_train.ScalingConfig(**scaling))
    ours = TorchConfig(backend=backend)
    TorchTrainer(_noop, torch_config=ours, scaling_config=train.ScalingConfig(**scaling))
    assert repr(ours) == repr(theirs)


# ------------------------------------------------------------ the environment workers start with
def test_cpu_workers_start_with_no_devices_and_no_sharing():
    envs = launch_env(make_slots(4, nodes=2), TorchBackend.share_cuda_visible_devices)
    for env in envs:
        assert "CUDA_VISIBLE_DEVICES" not in env
        assert (env[ACCELERATOR_VAR], env[ACCELERATOR_IDS_VAR]) == ("", "")


def test_gpu_workers_of_a_node_share_cuda_visible_devices():
    slots = make_slots(4, nodes=2, accelerator="CUDA", ids_per_worker=2)
    envs = launch_env(slots, TorchBackend.share_cuda_visible_devices)
    assert [e["CUDA_VISIBLE_DEVICES"] for e in envs] == ["0,1,2,3"] * 4
    assert [e[ACCELERATOR_IDS_VAR] for e in envs] == ["0,1", "2,3", "0,1", "2,3"]
    assert {e[ACCELERATOR_VAR] for e in envs} == {"CUDA"}


def test_the_base_backend_does_not_share():
    slots = make_slots(2, accelerator="CUDA", ids_per_worker=1)
    assert TorchBackend.share_cuda_visible_devices and not Backend.share_cuda_visible_devices
    assert not any("CUDA_VISIBLE_DEVICES" in e
                   for e in launch_env(slots, Backend.share_cuda_visible_devices))


def test_rocm_workers_share_cuda_visible_devices_too():
    envs = launch_env(make_slots(2, accelerator="ROCm", ids_per_worker=1), True)
    assert [e["CUDA_VISIBLE_DEVICES"] for e in envs] == ["0,1", "0,1"]
    assert not any("HIP_VISIBLE_DEVICES" in e for e in envs)


@pytest.mark.parametrize("value, shared", [("0", False), ("false", False), ("1", True),
                                           ("TRUE", True), ("no", False)])
@pytest.mark.parametrize("backend_flag", [True, False])
def test_sharing_follows_the_environment_switch(monkeypatch, value, shared, backend_flag):
    monkeypatch.setenv("TRAIN_ENABLE_SHARE_CUDA_VISIBLE_DEVICES", value)
    envs = launch_env(make_slots(2, accelerator="CUDA", ids_per_worker=1), backend_flag)
    assert ("CUDA_VISIBLE_DEVICES" in envs[0]) is shared


def test_tpu_workers_get_their_chips_and_no_cuda_variable():
    envs = launch_env(make_slots(2, accelerator="TPU", ids_per_worker=4), True)
    assert [e[ACCELERATOR_IDS_VAR] for e in envs] == ["0,1,2,3", "4,5,6,7"]
    assert not any("CUDA_VISIBLE_DEVICES" in e for e in envs)


def test_no_slots_no_env():
    assert launch_env([], True) == []


# ------------------------------------------------------------ on_start errors, in the driver
class _Recorder:
    """A worker group that records what on_start asks of it (nothing reaches a worker)."""

    def __init__(self, size=2, resources=None):
        self.size, self.resources, self.calls = size, resources or {"CPU": 1}, []

    def get_resources_per_worker(self):
        return dict(self.resources)

    def __len__(self):
        return self.size

    def execute_single(self, rank, fn, *args, **kwargs):
        self.calls.append(fn.__name__)
        return "10.0.0.1", 29500

    def execute(self, fn, *args, **kwargs):
        self.calls.append(fn.__name__)
        return [None] * self.size

    def execute_single_async(self, rank, fn, *args, **kwargs):
        raise AssertionError("on_start got as far as the process group")


def test_bad_init_method_is_rejected_with_rays_message_before_any_worker_changes():
    group = _Recorder()
    with pytest.raises(ValueError) as info:
        TorchBackend().on_start(group, TorchConfig(init_method="bad"))
    assert str(info.value) == ("The provided init_method (bad) is not supported. Must be "
                               "either 'env' or 'tcp'.")
    assert group.calls == ["reserve_master"]


def test_bad_timeout_is_rejected_as_the_worker_would_reject_it():
    with pytest.raises(TypeError) as ours:
        TorchBackend().on_start(_Recorder(), TorchConfig(timeout_s="x"))
    with pytest.raises(TypeError) as torch_s:
        timedelta(seconds="x")
    assert str(ours.value) == str(torch_s.value)


def test_tpu_workers_with_several_chips_get_a_warning(caplog):
    group = _Recorder(resources={"TPU": 4})
    with pytest.raises(AssertionError, match="as far as the process group"):
        TorchBackend().on_start(group, TorchConfig(backend="tpu_dist"))
    assert "exactly 1 TPU device. Got resources_per_worker={'TPU': 4}" in caplog.text


def test_the_backend_is_a_singleton_as_in_ray():
    assert TorchBackend() is TorchBackend() and Backend() is not TorchBackend()
