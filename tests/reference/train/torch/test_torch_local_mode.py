"""Local mode (num_workers=0): a single process, or joining torchrun's process group."""

from __future__ import annotations

import socket

import pytest
import torch
import torch_rank_fns as fns

import reference.train as train
from reference.train.torch import TorchConfig, TorchTrainer, get_device


def _torchrun_env(world_size: int) -> list[dict]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return [{"RANK": str(r), "LOCAL_RANK": str(r), "WORLD_SIZE": str(world_size),
             "LOCAL_WORLD_SIZE": str(world_size), "MASTER_ADDR": "127.0.0.1",
             "MASTER_PORT": str(port)} for r in range(world_size)]


def _run_under_torchrun(rank_pool, world_size: int, fn, args: tuple) -> list:
    """Run fn(*args) in world_size pool processes with torchrun's variables. The port is
    picked free and bound later by rank 0's store, so another process may take it first:
    that case (EADDRINUSE) is retried with a new port."""
    from torch_rank_pool import RankError

    for attempt in range(3):
        tasks = [(env, None, fn, args) for env in _torchrun_env(world_size)]
        try:
            return rank_pool.run_tasks(tasks, timeout=60)
        except RankError as exc:
            if "EADDRINUSE" not in str(exc) or attempt == 2:
                raise
    raise AssertionError("unreachable")


def test_single_process_without_torchrun(monkeypatch):
    for var in ("RANK", "LOCAL_RANK", "WORLD_SIZE"):
        monkeypatch.delenv(var, raising=False)

    def train_fn(config):
        ctx = train.get_context()
        train.report({"loss": config["x"]})
        return ctx.get_world_size(), ctx.get_world_rank(), str(get_device())

    result = TorchTrainer(train_fn, train_loop_config={"x": 1.5},
                          torch_config=TorchConfig(),
                          scaling_config=train.ScalingConfig(num_workers=0)).fit()
    assert result.return_value == (1, 0, "cuda:0" if torch.cuda.is_available() else "cpu")
    assert result.metrics == {"loss": 1.5} and result.path is None


@pytest.mark.slow
def test_under_torchrun_joins_the_group_and_destroys_it(rank_pool):
    seen = _run_under_torchrun(rank_pool, 2, fns.local_mode_fit, (False, "torchrun-run"))
    for rank, s in enumerate(seen):
        assert s == {"world_size": 2, "rank": rank, "local_rank": rank, "local_world_size": 2,
                     "node_rank": 0, "sum": 2.0, "device": "cpu", "backend": "gloo",
                     "name": "torchrun-run", "metrics": {"rank": rank},
                     "initialized_after": False}


@pytest.mark.slow
def test_under_torchrun_datasets_are_refused(rank_pool):
    for s in _run_under_torchrun(rank_pool, 2, fns.local_mode_fit, (True, "x")):
        assert s == {"error": "Ray Data is not supported in local mode with multiple "
                              "workers.", "initialized_after": False}


@pytest.mark.slow
def test_under_torchrun_an_existing_group_is_refused_and_kept(rank_pool):
    assert _run_under_torchrun(rank_pool, 1, fns.local_mode_with_existing_group, ()) == [
        "torch.distributed is already initialized / still initialized: True"]
