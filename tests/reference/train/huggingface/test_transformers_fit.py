"""transformers.Trainer inside TorchTrainer.fit() on a simulated cluster and in local mode."""

from __future__ import annotations

import json
import os

import pytest
import transformers_fns as fns

import reference.train as train
from reference.train.huggingface.transformers import RayTrainReportCallback
from reference.train.torch import TorchTrainer

pytestmark = pytest.mark.slow
CONFIG = {"n": 16, "batch": 4, "epochs": 2}


def test_two_workers_report_each_save(hf_cluster, tmp_path):
    from transformers import GPT2LMHeadModel

    out = tmp_path / "seen"
    out.mkdir()
    result = TorchTrainer(
        fns.transformers_loop, train_loop_config={**CONFIG, "out": str(out)},
        scaling_config=train.ScalingConfig(num_workers=2),
        run_config=train.RunConfig(name="hf", storage_path=str(tmp_path / "s"))).fit()

    steps = CONFIG["n"] // 2 // CONFIG["batch"] * CONFIG["epochs"]
    assert result.metrics["step"] == steps
    assert result.metrics["epoch"] == CONFIG["epochs"]
    assert {"loss", "learning_rate", "grad_norm", "eval_loss"} <= set(result.metrics)
    assert [m["epoch"] for _, m in result.best_checkpoints] == [1, 2]
    with result.checkpoint.as_directory() as d:
        assert os.listdir(d) == [RayTrainReportCallback.CHECKPOINT_NAME]
        hf = os.path.join(d, RayTrainReportCallback.CHECKPOINT_NAME)
        assert {"config.json", "model.safetensors", "trainer_state.json"} <= set(os.listdir(hf))
        model = GPT2LMHeadModel.from_pretrained(hf)
    assert model.config.n_layer == 1

    for r in (0, 1):
        seen = json.loads((out / f"rank{r}.json").read_text())
        assert seen["args"] == [2, r, r, "cpu", "ParallelMode.DISTRIBUTED"]
        assert seen["accelerator"] == [2, r, "cpu"]
        assert seen["class"] == "RayTransformersTrainer"
        assert seen["global_step"] == steps


def test_local_mode(tmp_path):
    out = tmp_path / "seen"
    out.mkdir()
    result = TorchTrainer(fns.transformers_loop, train_loop_config={**CONFIG, "out": str(out)},
                          scaling_config=train.ScalingConfig(num_workers=0)).fit()
    steps = CONFIG["n"] // CONFIG["batch"] * CONFIG["epochs"]
    assert result.metrics["step"] == steps
    assert result.metrics["epoch"] == CONFIG["epochs"]
    assert "eval_loss" in result.metrics
    seen = json.loads((out / "rank0.json").read_text())
    assert seen["args"][:4] == [1, 0, 0, "cpu"]
    # on_save's temporary folder is gone once it returned: local mode's Result.checkpoint
    # (the object passed to report()) names a folder that no longer exists.
    assert result.checkpoint is not None and not os.path.exists(result.checkpoint.path)
