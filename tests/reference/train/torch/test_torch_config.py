"""TorchConfig, the backend TorchTrainer picks, and the environment each rank gets."""

from __future__ import annotations

import socket
from datetime import timedelta

import pytest
from torch_rank_pool import make_slots

import reference.train as train
from reference.train._internal.accelerators import ACCELERATOR_IDS_VAR, ACCELERATOR_VAR
from reference.train.torch import TorchConfig, TorchTrainer
from reference.train.torch._config import INIT_URL_VAR, TorchBackend


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


# ---------------------------------------------------------------------------- worker_env
def test_ranks_and_rendezvous_per_rank():
    slots = make_slots(4, nodes=2)
    envs = TorchBackend().worker_env(TorchConfig(backend="gloo"), slots)
    ports = {env["MASTER_PORT"] for env in envs}
    assert len(ports) == 1 and int(ports.pop()) > 0
    for slot, env in zip(slots, envs, strict=True):
        assert {k: env[k] for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
                                    "NODE_RANK", "MASTER_ADDR", INIT_URL_VAR)} == {
            "RANK": str(slot.rank), "WORLD_SIZE": "4", "LOCAL_RANK": str(slot.local_rank),
            "LOCAL_WORLD_SIZE": "2", "NODE_RANK": str(slot.node_rank),
            "MASTER_ADDR": slots[0].node_address, INIT_URL_VAR: "env://"}
        assert "CUDA_VISIBLE_DEVICES" not in env
        assert (env[ACCELERATOR_VAR], env[ACCELERATOR_IDS_VAR]) == ("", "")


def test_the_port_is_free_on_every_address():
    env = TorchBackend().worker_env(TorchConfig(), make_slots(1))[0]
    with socket.socket() as sock:
        sock.bind(("", int(env["MASTER_PORT"])))


def test_tcp_init_method_passes_a_url_and_no_master_variables():
    envs = TorchBackend().worker_env(TorchConfig(init_method="tcp"), make_slots(2))
    url = envs[0][INIT_URL_VAR]
    assert url.startswith("tcp://127.0.0.1:") and all(e[INIT_URL_VAR] == url for e in envs)
    assert not any("MASTER_ADDR" in e or "MASTER_PORT" in e for e in envs)


def test_bad_init_method_is_rejected_with_rays_message():
    with pytest.raises(ValueError) as info:
        TorchBackend().worker_env(TorchConfig(init_method="bad"), make_slots(2))
    assert str(info.value) == ("The provided init_method (bad) is not supported. Must be "
                               "either 'env' or 'tcp'.")


def test_bad_timeout_is_rejected_as_the_worker_would_reject_it():
    with pytest.raises(TypeError) as ours:
        TorchBackend().worker_env(TorchConfig(timeout_s="x"), make_slots(1))
    with pytest.raises(TypeError) as torch_s:
        timedelta(seconds="x")
    assert str(ours.value) == str(torch_s.value)


def test_gpu_workers_of_a_node_share_cuda_visible_devices():
    slots = make_slots(4, nodes=2, accelerator="CUDA", ids_per_worker=2)
    envs = TorchBackend().worker_env(TorchConfig(), slots)
    assert [e["CUDA_VISIBLE_DEVICES"] for e in envs] == ["0,1,2,3"] * 4
    assert [e[ACCELERATOR_IDS_VAR] for e in envs] == ["0,1", "2,3", "0,1", "2,3"]
    assert {e[ACCELERATOR_VAR] for e in envs} == {"CUDA"}


def test_rocm_workers_share_cuda_visible_devices_too():
    envs = TorchBackend().worker_env(TorchConfig(), make_slots(2, accelerator="ROCm",
                                                               ids_per_worker=1))
    assert [e["CUDA_VISIBLE_DEVICES"] for e in envs] == ["0,1", "0,1"]
    assert not any("HIP_VISIBLE_DEVICES" in e for e in envs)


@pytest.mark.parametrize("value, shared", [("0", False), ("false", False), ("1", True),
                                           ("TRUE", True), ("no", False)])
def test_sharing_follows_the_environment_switch(monkeypatch, value, shared):
    monkeypatch.setenv("TRAIN_ENABLE_SHARE_CUDA_VISIBLE_DEVICES", value)
    envs = TorchBackend().worker_env(TorchConfig(), make_slots(2, accelerator="CUDA",
                                                               ids_per_worker=1))
    assert ("CUDA_VISIBLE_DEVICES" in envs[0]) is shared


def test_tpu_workers_get_their_chips_and_a_warning_for_several(caplog):
    slots = make_slots(2, accelerator="TPU", ids_per_worker=4)
    envs = TorchBackend().worker_env(TorchConfig(), slots)
    assert [e[ACCELERATOR_IDS_VAR] for e in envs] == ["0,1,2,3", "4,5,6,7"]
    assert "exactly 1 TPU device" in caplog.text
    assert not any("CUDA_VISIBLE_DEVICES" in e for e in envs)


def test_no_slots_no_env():
    assert TorchBackend().worker_env(TorchConfig(), []) == []
