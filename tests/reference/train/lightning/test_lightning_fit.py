"""Lightning inside TorchTrainer.fit() on a simulated cluster and in local mode."""

from __future__ import annotations

import json
import os

import lightning_fns as fns
import pytest

import reference.train as train
from reference.train.lightning import RayTrainReportCallback
from reference.train.torch import TorchTrainer

pytestmark = pytest.mark.slow
CONFIG = {"n": 24, "batch": 3, "lr": 0.1, "epochs": 2}


def _max_abs_error(a, b) -> float:
    return max(abs(x - y) for pa, pb in zip(a, b, strict=True)
               for x, y in zip(pa, pb, strict=True))


def test_two_workers_report_each_epoch_and_match_one_process(lightning_cluster, tmp_path):
    out = tmp_path / "seen"
    out.mkdir()
    trainer = TorchTrainer(
        fns.lightning_loop, train_loop_config={**CONFIG, "out": str(out)},
        scaling_config=train.ScalingConfig(num_workers=2),
        run_config=train.RunConfig(name="lightning", storage_path=str(tmp_path / "s")))
    result = trainer.fit()

    # One report per epoch; the last one's metrics, epoch and step overwritten last.
    steps_per_epoch = CONFIG["n"] // 2 // CONFIG["batch"]
    assert set(result.metrics) == {"loss", "val_loss", "epoch", "step"}
    assert (result.metrics["epoch"], result.metrics["step"]) == (1, 2 * steps_per_epoch)
    assert [m["epoch"] for _, m in result.best_checkpoints] == [0, 1]

    # The checkpoint holds one Lightning file (rank 1 reported an empty folder).
    with result.checkpoint.as_directory() as d:
        assert os.listdir(d) == [RayTrainReportCallback.CHECKPOINT_NAME]
        model = fns.TinyRegressor.load_from_checkpoint(
            os.path.join(d, RayTrainReportCallback.CHECKPOINT_NAME))
    assert model.hparams.lr == CONFIG["lr"]

    seen = [json.loads((out / f"rank{r}.json").read_text()) for r in (0, 1)]
    for r, s in enumerate(seen):
        assert s["trainer"] == [2, r, r, 0]
        assert s["environment"] == [2, r, r, 0]
        assert s["root_device"] == "cpu"
        assert s["sampler_kwargs"] == {"num_replicas": 2, "rank": r}
        assert s["sampler"] == "DistributedSampler"
        assert s["pg"] == 2
    assert seen[0]["weights"] == seen[1]["weights"]
    # Each rank's 3 samples per step, averaged by DDP, are one step on 6 samples.
    expected = fns.single_process(CONFIG["n"], 2 * CONFIG["batch"], CONFIG["lr"],
                                  CONFIG["epochs"])
    assert _max_abs_error(seen[0]["weights"], expected) < 1e-5
    loaded = [p.detach().flatten().tolist() for p in model.parameters()]
    assert _max_abs_error(loaded, expected) < 1e-5


def test_local_mode(tmp_path):
    out = tmp_path / "seen"
    out.mkdir()
    config = {**CONFIG, "out": str(out)}
    result = TorchTrainer(fns.lightning_loop, train_loop_config=config,
                          scaling_config=train.ScalingConfig(num_workers=0)).fit()
    assert set(result.metrics) == {"loss", "val_loss", "epoch", "step"}
    assert result.metrics["step"] == CONFIG["epochs"] * CONFIG["n"] // CONFIG["batch"]
    seen = json.loads((out / "rank0.json").read_text())
    assert seen["environment"] == [1, 0, 0, 0]
    # The callback deletes its folder after reporting: local mode's Result.checkpoint is
    # the object passed to report(), so it names a folder that is gone.
    assert result.checkpoint is not None
    assert not os.path.exists(result.checkpoint.path)
    expected = fns.single_process(CONFIG["n"], CONFIG["batch"], CONFIG["lr"],
                                  CONFIG["epochs"])
    assert _max_abs_error(seen["weights"], expected) < 1e-5


@pytest.mark.parametrize("mode,kept", [("SYNC", False), ("NO_UPLOAD", False), ("ASYNC", True)])
def test_local_folder_is_left_only_to_an_async_upload(tmp_path, mode, kept):
    out = tmp_path / "seen"
    out.mkdir()
    config = {**CONFIG, "epochs": 1, "out": str(out), "upload_mode": mode}
    result = TorchTrainer(fns.lightning_loop, train_loop_config=config,
                          scaling_config=train.ScalingConfig(num_workers=0)).fit()
    assert os.path.exists(result.checkpoint.path) is kept
    if kept:
        assert os.listdir(result.checkpoint.path) == [RayTrainReportCallback.CHECKPOINT_NAME]
