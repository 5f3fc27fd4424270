"""PyTorch Lightning on the Train API: a Lightning Trainer inside TorchTrainer, two workers.

    python docs/examples/lightning_regression.py [--impl reference|ray] [--epochs 4]

What it shows:
- a plain LightningModule and a Lightning `Trainer` built inside the training function with
  `RayDDPStrategy`, `RayLightningEnvironment` and `RayTrainReportCallback`, checked by
  `prepare_trainer` (the TorchTrainer has set up the process group; Lightning reuses it);
- one report per epoch from the callback: Lightning's logged metrics plus `epoch` and `step`,
  and a checkpoint holding `checkpoint.ckpt`;
- a worker killed mid-run (rank 1 exits at the start of epoch 2 on the first attempt): with
  `FailureConfig(max_failures=1)` the run restarts and every worker resumes from the latest
  epoch's checkpoint through `trainer.fit(ckpt_path=...)`;
- the final model loaded in the driver with `LightningModule.load_from_checkpoint`.

The data are synthetic (a noisy linear function), so nothing is downloaded. `--impl ray`
runs the same code on Ray Train: only the import root changes.
"""

from __future__ import annotations

import argparse
import importlib
import os
import tempfile

import lightning.pytorch as pl
import torch
from torch.utils.data import DataLoader, TensorDataset

FEATURES = 8


def noisy_linear(n: int, seed: int) -> TensorDataset:
    weights = torch.randn(FEATURES, 1, generator=torch.Generator().manual_seed(0))
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, FEATURES, generator=g)
    return TensorDataset(x, x @ weights + 0.1 * torch.randn(n, 1, generator=g))


class Regressor(pl.LightningModule):
    def __init__(self, lr: float = 0.05):
        super().__init__()
        self.save_hyperparameters()
        self.net = torch.nn.Sequential(torch.nn.Linear(FEATURES, 16), torch.nn.ReLU(),
                                       torch.nn.Linear(16, 1))

    def forward(self, x):
        return self.net(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = torch.nn.functional.mse_loss(self(x), y)
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        self.log("val_loss", torch.nn.functional.mse_loss(self(x), y), sync_dist=True)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.hparams.lr, momentum=0.9)


class CrashOnce(pl.Callback):
    """Rank 1 dies at the start of epoch 2, once (a marker file remembers it)."""

    def __init__(self, marker: str):
        self.marker = marker

    def on_train_epoch_start(self, trainer, module):
        if trainer.global_rank == 1 and trainer.current_epoch == 2 and not os.path.exists(
                self.marker):
            open(self.marker, "w").close()
            os._exit(1)


def train_func(config: dict) -> None:
    train = importlib.import_module(config["impl"] + ".train")
    lightning = importlib.import_module(config["impl"] + ".train.lightning")

    ckpt_path = None
    checkpoint = train.get_checkpoint()
    if checkpoint is not None:  # a restart after the failure: resume where it ended
        with checkpoint.as_directory() as directory:
            ckpt_path = os.path.join(tempfile.mkdtemp(), "resume.ckpt")
            with open(os.path.join(directory, lightning.RayTrainReportCallback.CHECKPOINT_NAME),
                      "rb") as src, open(ckpt_path, "wb") as dst:
                dst.write(src.read())

    trainer = pl.Trainer(
        max_epochs=config["epochs"], devices="auto", accelerator="auto",
        strategy=lightning.RayDDPStrategy(),
        plugins=[lightning.RayLightningEnvironment()],
        callbacks=[lightning.RayTrainReportCallback(), CrashOnce(config["crash_marker"])],
        enable_checkpointing=False, enable_progress_bar=False, logger=False)
    trainer = lightning.prepare_trainer(trainer)
    trainer.fit(Regressor(lr=config["lr"]),
                train_dataloaders=DataLoader(noisy_linear(config["samples"], seed=1),
                                             batch_size=32, shuffle=True),
                val_dataloaders=DataLoader(noisy_linear(256, seed=2), batch_size=64),
                ckpt_path=ckpt_path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--impl", choices=["reference", "ray"], default="reference")
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--samples", type=int, default=1024)
    parser.add_argument("--storage", default=None)
    args = parser.parse_args()
    train = importlib.import_module(args.impl + ".train")
    train_torch = importlib.import_module(args.impl + ".train.torch")

    with tempfile.TemporaryDirectory() as scratch:
        config = {"impl": args.impl, "epochs": args.epochs, "samples": args.samples,
                  "lr": 0.05, "crash_marker": os.path.join(scratch, "crashed-once")}
        trainer = train_torch.TorchTrainer(
            train_func, train_loop_config=config,
            scaling_config=train.ScalingConfig(num_workers=2),
            run_config=train.RunConfig(
                name="lightning-regression",
                storage_path=args.storage or os.path.join(scratch, "runs"),
                failure_config=train.FailureConfig(max_failures=1)))
        result = trainer.fit()
        print(f"worker killed once: {os.path.exists(config['crash_marker'])}")
        print(f"final metrics: {result.metrics}")

        with result.checkpoint.as_directory() as directory:
            model = Regressor.load_from_checkpoint(os.path.join(directory, "checkpoint.ckpt"))
        model.eval()
        test = noisy_linear(1000, seed=3)
        with torch.no_grad():
            mse = torch.nn.functional.mse_loss(model(test.tensors[0]), test.tensors[1]).item()
        print(f"checkpoint of epoch {result.metrics['epoch']}: held-out mse {mse:.4f}")


if __name__ == "__main__":
    main()
