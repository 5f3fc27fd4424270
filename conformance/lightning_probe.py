"""The training function of the Lightning checks (`conformance/checks/check_lightning.py`).

`lightning_probe` runs a Lightning `Trainer` in its Ray Train form (`RayDDPStrategy`,
`RayLightningEnvironment`, `RayTrainReportCallback`, `prepare_trainer`) fitting a one-layer
regressor on a fixed dataset. It journals what Lightning saw on each rank and every `report()`
call the callback made (by wrapping the implementation's `report` for the duration of the
function). A module of its own, apart from the checks, so a worker that unpickles it imports
neither pytest nor the suite's check modules.
"""

from __future__ import annotations

import importlib
import os
import shutil
import tempfile
import time

from conformance.probe import Journal

DATA = {"n": 24, "batch": 3, "lr": 0.1, "epochs": 2, "features": 3}
_MODULE_CLASS: list = []


def lightning_pytorch():
    """`lightning.pytorch`, else `pytorch_lightning` (what the integration subclasses)."""
    try:
        import lightning.pytorch as pl
    except ModuleNotFoundError:
        import pytorch_lightning as pl
    return pl


def tiny_module_class():
    """The LightningModule of the probe (built on first use: the module must import
    without Lightning)."""
    if not _MODULE_CLASS:
        import torch

        class TinyRegressor(lightning_pytorch().LightningModule):
            def __init__(self, lr: float = 0.1):
                super().__init__()
                self.save_hyperparameters()
                torch.manual_seed(0)
                self.layer = torch.nn.Linear(DATA["features"], 1)

            def forward(self, x):
                return self.layer(x)

            def training_step(self, batch, batch_idx):
                x, y = batch
                loss = torch.nn.functional.mse_loss(self(x), y)
                self.log("loss", loss)
                return loss

            def validation_step(self, batch, batch_idx):
                x, y = batch
                self.log("val_loss", torch.nn.functional.mse_loss(self(x), y))

            def configure_optimizers(self):
                return torch.optim.SGD(self.parameters(), lr=self.hparams.lr)

        _MODULE_CLASS.append(TinyRegressor)
    return _MODULE_CLASS[0]


def dataset():
    import torch
    from torch.utils.data import TensorDataset

    g = torch.Generator().manual_seed(0)
    x = torch.randn(DATA["n"], DATA["features"], generator=g)
    y = x @ torch.randn(DATA["features"], 1, generator=g) + 0.1 * torch.randn(DATA["n"], 1,
                                                                             generator=g)
    return TensorDataset(x, y)


def weights(module) -> list:
    return [p.detach().flatten().tolist() for p in module.parameters()]


def _listing(checkpoint) -> list | None:
    if checkpoint is None:
        return None
    return sorted(os.listdir(checkpoint.path)) if os.path.isdir(checkpoint.path) else ["<gone>"]


def lightning_probe(config: dict):
    """The training function of every check here (see the module docstring)."""
    import torch

    pl = lightning_pytorch()
    train = importlib.import_module(config["train_module"])
    tl = importlib.import_module(config["train_module"] + ".lightning")
    journal = Journal(config["journal"])
    ctx = train.get_context()
    rank = ctx.get_world_rank()
    attempt = journal.next_attempt(rank)
    restored = train.get_checkpoint()
    ckpt_path, restored_epoch = None, None
    if restored is not None:
        with restored.as_directory() as d:
            ckpt_path = os.path.join(tempfile.mkdtemp(), tl.RayTrainReportCallback.CHECKPOINT_NAME)
            shutil.copy(os.path.join(d, tl.RayTrainReportCallback.CHECKPOINT_NAME), ckpt_path)
        restored_epoch = torch.load(ckpt_path, weights_only=False)["epoch"]
    journal.record(ev="lightning_start", rank=rank, attempt=attempt, restored=restored_epoch)

    original_report = train.report

    def journaled_report(*args, **kwargs):
        metrics = kwargs.get("metrics", args[0] if args else None)
        checkpoint = kwargs.get("checkpoint", args[1] if len(args) > 1 else None)
        journal.record(ev="lightning_report", rank=rank, attempt=attempt, metrics=metrics,
                       files=_listing(checkpoint),
                       options={k: str(v) for k, v in kwargs.items()
                                if k not in ("metrics", "checkpoint")})
        return original_report(*args, **kwargs)

    class Fault(pl.Callback):
        def on_train_epoch_start(self, trainer, module):
            kill = config.get("kill")
            if kill and (rank, attempt, trainer.current_epoch) == tuple(kill):
                journal.record(ev="lightning_kill", rank=rank, attempt=attempt)
                # Leave any implementation time to register the previous epoch's report
                # before the fault (the clause fault.restore-latest pauses likewise).
                time.sleep(0.5)
                os._exit(1)

    from torch.utils.data import DataLoader

    strategy, environment = tl.RayDDPStrategy(), tl.RayLightningEnvironment()
    train.report = journaled_report
    try:
        trainer = pl.Trainer(
            max_epochs=DATA["epochs"], devices="auto", accelerator="auto", strategy=strategy,
            plugins=[environment], callbacks=[Fault(), tl.RayTrainReportCallback()],
            enable_progress_bar=False, enable_model_summary=False, logger=False,
            enable_checkpointing=False)
        same = tl.prepare_trainer(trainer) is trainer
        model = tiny_module_class()(lr=DATA["lr"])
        trainer.fit(model, train_dataloaders=DataLoader(dataset(), batch_size=DATA["batch"]),
                    val_dataloaders=DataLoader(dataset(), batch_size=DATA["batch"]),
                    ckpt_path=ckpt_path)
    finally:
        train.report = original_report
    journal.record(
        ev="lightning", rank=rank, attempt=attempt, prepare_same=same,
        context=[ctx.get_world_size(), rank, ctx.get_local_rank(), ctx.get_node_rank()],
        trainer=[trainer.world_size, trainer.global_rank, trainer.local_rank, trainer.node_rank],
        environment=[environment.world_size(), environment.global_rank(),
                     environment.local_rank(), environment.node_rank()],
        root_device=str(strategy.root_device), device=str(importlib.import_module(
            config["train_module"] + ".torch").get_device()),
        sampler_kwargs=strategy.distributed_sampler_kwargs,
        sampler=type(trainer.train_dataloader.sampler).__name__,
        weights=weights(model))
