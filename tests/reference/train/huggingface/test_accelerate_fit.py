"""Hugging Face Accelerate inside a TorchTrainer training function."""

from __future__ import annotations

import json

import pytest
import transformers_fns as fns

import reference.train as train
from reference.train.torch import TorchTrainer

pytestmark = pytest.mark.slow


def test_accelerator_sees_the_train_world(hf_cluster, tmp_path):
    TorchTrainer(fns.accelerate_loop, train_loop_config={"out": str(tmp_path)},
                 scaling_config=train.ScalingConfig(num_workers=2),
                 run_config=train.RunConfig(storage_path=str(tmp_path / "s"))).fit()
    seen = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    for r, s in enumerate(seen):
        # Accelerate counts a GPU-less process as distributed only with cpu=True.
        assert s["plain"] == [1, 0, "DistributedType.NO"]
        assert s["cpu"] == [2, r, r, "cpu", "DistributedType.MULTI_CPU"]
    # The prepared loader shards the data; gradients are averaged over both ranks.
    assert sorted(seen[0]["items"] + seen[1]["items"]) == list(range(8))
    assert set(seen[0]["items"]).isdisjoint(seen[1]["items"])
    assert seen[0]["weights"] == seen[1]["weights"]


def test_local_mode(tmp_path):
    result = TorchTrainer(fns.accelerate_loop, train_loop_config={"out": str(tmp_path)},
                          scaling_config=train.ScalingConfig(num_workers=0)).fit()
    assert result.metrics == {"rank": 0}
    seen = json.loads((tmp_path / "rank0.json").read_text())
    assert seen["cpu"] == [1, 0, 0, "cpu", "DistributedType.NO"]
    assert sorted(seen["items"]) == list(range(8))
