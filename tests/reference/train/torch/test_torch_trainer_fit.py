"""TorchTrainer.fit() on a simulated cluster: DDP training with checkpoints, simulated GPU
nodes. These start a cluster of their own and point the reference runtime at it."""

from __future__ import annotations

import json

import pytest
import torch
import torch_rank_fns as fns

import reference
import reference.train as train
from reference import PRELOAD
from reference.train.torch import TorchConfig, TorchTrainer

simcluster = pytest.importorskip("simcluster")
pytestmark = pytest.mark.slow
# Imported once per node supervisor, so workers fork with them loaded; DDP's first use
# imports torch._dynamo (torch 2.13: DistributedDataParallel.__init__ asks it for the
# optimize_ddp mode), which takes seconds.
TORCH_PRELOAD = (*PRELOAD, "torch", "torch.distributed",
                 "torch.distributed._functional_collectives", "torch._dynamo",
                 "reference.train.torch", "torch_rank_fns")


@pytest.fixture
def cluster_of(request):
    """cluster_of(*node_specs) starts a cluster and makes it the one fit() runs on."""
    clusters = []

    def start(*nodes):
        reference.shutdown()
        cluster = simcluster.Cluster(nodes=list(nodes), preload=TORCH_PRELOAD)
        cluster.__enter__()
        clusters.append(cluster)
        reference.init(address=cluster.address)
        return cluster

    yield start
    reference.shutdown()
    for cluster in clusters:
        cluster.__exit__(None, None, None)


def test_two_workers_train_like_one_process(cluster_of, tmp_path):
    cluster_of(simcluster.NodeSpec(cpus=2))
    config = {"width": 6, "n": 24, "per_rank_batch": 3, "lr": 0.1, "epochs": 2}
    run_config = train.RunConfig(storage_path=str(tmp_path), name="ddp")
    result = TorchTrainer(fns.fit_loop, train_loop_config=config,
                          scaling_config=train.ScalingConfig(num_workers=2),
                          run_config=run_config).fit()
    assert result.return_value == "DistributedDataParallel"
    assert result.metrics["epoch"] == 1
    assert len(result.best_checkpoints) == 2  # one checkpoint per epoch
    with result.checkpoint.as_directory() as d:
        rank0, rank1 = (torch.load(f"{d}/rank{r}.pt") for r in (0, 1))
        model = torch.load(f"{d}/model.pt")["model"]
    expected = fns.single_process(6, 6, 0.1, 2, 24, 0, shuffle=False)
    assert fns.max_abs_error(rank0, rank1) == 0.0  # DDP keeps replicas identical
    assert fns.max_abs_error(model, expected) < 1e-5

    # The same run name resumes from the last checkpoint: nothing left to train.
    config["epochs"] = 3
    resumed = TorchTrainer(fns.fit_loop, train_loop_config=config,
                           scaling_config=train.ScalingConfig(num_workers=2),
                           run_config=run_config).fit()
    assert resumed.metrics["epoch"] == 2


def test_simulated_gpu_nodes(cluster_of, tmp_path):
    gpu_node = simcluster.NodeSpec(cpus=4, gpus=2)
    cluster_of(gpu_node, gpu_node)
    config = TorchConfig(timeout_s=60)
    TorchTrainer(fns.describe_worker, train_loop_config=str(tmp_path), torch_config=config,
                 scaling_config=train.ScalingConfig(num_workers=4, use_gpu=True)).fit()
    assert config.backend == "nccl"
    seen = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(4)]
    assert [s["node_rank"] for s in seen] == [0, 0, 1, 1]
    # Each worker holds one GPU and sees both GPUs of its node; it computes on the CPU
    # with gloo because torch sees no CUDA device here.
    assert [s["env"]["CUDA_VISIBLE_DEVICES"] for s in seen] == ["0,1"] * 4
    assert [s["ids"] for s in seen] == ["0", "1", "0", "1"]
    if not torch.cuda.is_available():
        assert {s["backend"] for s in seen} == {"gloo"}
        assert {tuple(s["devices"]) for s in seen} == {("cpu",)}
