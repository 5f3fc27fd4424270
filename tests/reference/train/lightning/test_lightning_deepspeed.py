"""RayDeepSpeedStrategy on CPUs: the Trainer builds and passes prepare_trainer, but
Lightning's DeepSpeedStrategy refuses any accelerator but CUDA when the fit starts, so a
Lightning DeepSpeed fit can only be checked on a GPU (ci/gpu_check.py,
`lightning_deepspeed`). Plain DeepSpeed does train on CPUs:
tests/reference/train/torch/test_deepspeed.py."""

from __future__ import annotations

import importlib.util

import lightning_fns as fns
import pytest

if importlib.util.find_spec("deepspeed") is None:
    pytest.skip("deepspeed is not installed (the deepspeed extra)", allow_module_level=True)

import lightning.pytorch as pl  # noqa: E402
import torch  # noqa: E402
from torch.utils.data import DataLoader  # noqa: E402

import reference.train as train  # noqa: E402
from reference.train.lightning import (  # noqa: E402
    RayDeepSpeedStrategy,
    RayLightningEnvironment,
    prepare_trainer,
)
from reference.train.torch import TorchTrainer  # noqa: E402

pytestmark = pytest.mark.skipif(torch.cuda.is_available(), reason="the refusal is CPU-only")


def _deepspeed_fit(config: dict):
    strategy = RayDeepSpeedStrategy(stage=2)
    trainer = pl.Trainer(max_epochs=1, accelerator="auto", devices="auto", strategy=strategy,
                         plugins=[RayLightningEnvironment()], **fns.quiet_trainer_kwargs())
    assert prepare_trainer(trainer) is trainer
    assert type(trainer.accelerator).__name__ == "CPUAccelerator"
    assert str(strategy.root_device) == "cpu"
    trainer.fit(fns.TinyRegressor(), train_dataloaders=DataLoader(fns.make_data(8), batch_size=4))


def test_lightning_deepspeed_refuses_the_cpu_accelerator():
    trainer = TorchTrainer(_deepspeed_fit, train_loop_config={},
                           scaling_config=train.ScalingConfig(num_workers=0))
    with pytest.raises(RuntimeError, match=r"^The DeepSpeed strategy is only supported on CUDA "
                                           r"GPUs but `CPUAccelerator` is used\.$"):
        trainer.fit()
