"""Training functions and the tiny model of the Lightning tests (importable, so they pickle
by reference), and the single-process computation the DDP run is compared with."""

from __future__ import annotations

import json
import os

import lightning.pytorch as pl
import torch
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

FEATURES = 3


def make_data(n: int, seed: int = 0) -> TensorDataset:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, FEATURES, generator=g)
    y = x @ torch.randn(FEATURES, 1, generator=g) + 0.1 * torch.randn(n, 1, generator=g)
    return TensorDataset(x, y)


class TinyRegressor(pl.LightningModule):
    """One linear layer, MSE, plain SGD: a few parameters, deterministic on the CPU."""

    def __init__(self, lr: float = 0.1):
        super().__init__()
        self.save_hyperparameters()
        torch.manual_seed(0)
        self.layer = torch.nn.Linear(FEATURES, 1)

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


def quiet_trainer_kwargs() -> dict:
    return dict(enable_progress_bar=False, enable_model_summary=False, logger=False,
                enable_checkpointing=False)


def lightning_loop(config: dict):
    """A Lightning fit in its Ray Train form; writes what each rank saw to config['out']."""
    from reference.train import CheckpointUploadMode, get_context
    from reference.train.lightning import (
        RayDDPStrategy,
        RayLightningEnvironment,
        RayTrainReportCallback,
        prepare_trainer,
    )

    data = make_data(config["n"])
    train_loader = DataLoader(data, batch_size=config["batch"], shuffle=False)
    val_loader = DataLoader(data, batch_size=config["batch"])
    strategy = RayDDPStrategy()
    mode = config.get("upload_mode") and CheckpointUploadMode[config["upload_mode"]]
    environment = RayLightningEnvironment()
    trainer = pl.Trainer(max_epochs=config["epochs"], devices="auto", accelerator="auto",
                         strategy=strategy, plugins=[environment],
                         callbacks=[RayTrainReportCallback(mode)], **quiet_trainer_kwargs())
    assert prepare_trainer(trainer) is trainer
    model = TinyRegressor(lr=config["lr"])
    trainer.fit(model, train_dataloaders=train_loader, val_dataloaders=val_loader)
    ctx = get_context()
    seen = {
        "rank": ctx.get_world_rank(),
        "trainer": [trainer.world_size, trainer.global_rank, trainer.local_rank,
                    trainer.node_rank],
        "environment": [environment.world_size(), environment.global_rank(),
                        environment.local_rank(), environment.node_rank()],
        "root_device": str(strategy.root_device),
        "sampler_kwargs": strategy.distributed_sampler_kwargs,
        "sampler": type(trainer.train_dataloader.sampler).__name__,
        "pg": torch.distributed.is_initialized() and torch.distributed.get_world_size(),
        "weights": [p.detach().flatten().tolist() for p in model.parameters()],
    }
    with open(os.path.join(config["out"], f"rank{seen['rank']}.json"), "w") as f:
        json.dump(seen, f)
    return seen["weights"]


def single_process(n: int, batch: int, lr: float, epochs: int) -> list:
    """Plain torch on the whole global batch: what DDP over W ranks of batch/W must match.

    Lightning always shuffles a training loader it gives a DistributedSampler (seed 0, the
    epoch set each epoch); over W ranks, step k's per-rank batches together are positions
    k*batch .. (k+1)*batch-1 of that epoch's permutation, which one replica walks in order.
    """
    torch.manual_seed(0)
    layer = torch.nn.Linear(FEATURES, 1)
    optimizer = torch.optim.SGD(layer.parameters(), lr=lr)
    data = make_data(n)
    sampler = DistributedSampler(data, num_replicas=1, rank=0, shuffle=True, seed=0)
    loader = DataLoader(data, batch_size=batch, sampler=sampler)
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        for x, y in loader:
            optimizer.zero_grad()
            torch.nn.functional.mse_loss(layer(x), y).backward()
            optimizer.step()
    return [p.detach().flatten().tolist() for p in layer.parameters()]
