"""PyTorch on the Train API: a small ResNet on FashionMNIST-shaped data, two workers.

    python docs/examples/torch_fashion_mnist.py [--impl reference|ray] [--epochs 4]

What it shows:
- `TorchTrainer` with two workers; `prepare_model` wraps the model in DDP and
  `prepare_data_loader` gives each worker half of every epoch (`sampler.set_epoch`
  reshuffles per epoch);
- a checkpoint each epoch (rank 0 writes the model and optimizer, every rank reports);
- a worker killed mid-run (rank 1 SIGKILLs itself in epoch 1 of the first attempt): with
  `FailureConfig(max_failures=1)` the run restarts, every worker gets the latest checkpoint
  from `get_checkpoint()`, and training resumes at the epoch after it;
- the final model loaded from `result.checkpoint` and evaluated in the driver.

The data are synthetic tensors shaped like FashionMNIST (1x28x28 images, 10 classes: a
fixed random pattern per class plus noise), so nothing is downloaded. `--impl ray` runs
the same code on Ray Train: only the import root changes.
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import tempfile

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

CLASSES = 10


def fashion_like(n: int, seed: int) -> TensorDataset:
    """n images of 1x28x28 in 10 classes: each class is a fixed pattern plus noise."""
    patterns = torch.randn(CLASSES, 1, 28, 28, generator=torch.Generator().manual_seed(0))
    g = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, CLASSES, (n,), generator=g)
    images = patterns[labels] + torch.randn(n, 1, 28, 28, generator=g)
    return TensorDataset(images, labels)


class Block(nn.Module):
    """A residual block: two 3x3 convolutions and a skip connection."""

    def __init__(self, channels: int):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(channels, channels, 3, padding=1, bias=False), nn.BatchNorm2d(channels),
            nn.ReLU(), nn.Conv2d(channels, channels, 3, padding=1, bias=False),
            nn.BatchNorm2d(channels))

    def forward(self, x):
        return torch.relu(x + self.body(x))


def small_resnet() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
        Block(16), nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.ReLU(), Block(32),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, CLASSES))


def train_func(config: dict) -> None:
    train = importlib.import_module(config["impl"] + ".train")
    train_torch = importlib.import_module(config["impl"] + ".train.torch")
    context = train.get_context()
    rank = context.get_world_rank()

    model = small_resnet()
    optimizer = torch.optim.SGD(model.parameters(), lr=config["lr"], momentum=0.9)
    start_epoch = 0
    checkpoint = train.get_checkpoint()
    if checkpoint is not None:  # a restart after the failure: resume where it ended
        with checkpoint.as_directory() as directory:
            state = torch.load(os.path.join(directory, "state.pt"))
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        start_epoch = state["epoch"] + 1
    model = train_torch.prepare_model(model)
    loader = train_torch.prepare_data_loader(
        DataLoader(fashion_like(config["samples"], seed=1), batch_size=config["batch_size"],
                   shuffle=True))
    loss_fn = nn.CrossEntropyLoss()

    for epoch in range(start_epoch, config["epochs"]):
        if context.get_world_size() > 1:
            loader.sampler.set_epoch(epoch)
        model.train()
        total, correct, loss_sum = 0, 0, 0.0
        for step, (images, labels) in enumerate(loader):
            if (rank == 1 and epoch == 1 and step == 2
                    and not os.path.exists(config["crash_marker"])):
                open(config["crash_marker"], "w").close()
                os.kill(os.getpid(), signal.SIGKILL)  # a worker dies mid-epoch
            logits = model(images)
            loss = loss_fn(logits, labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            loss_sum += loss.item() * len(labels)
            correct += (logits.argmax(1) == labels).sum().item()
            total += len(labels)
        metrics = {"epoch": epoch, "loss": loss_sum / total, "accuracy": correct / total}
        with tempfile.TemporaryDirectory() as directory:
            if rank == 0:
                torch.save({"model": model.module.state_dict(),
                            "optimizer": optimizer.state_dict(), "epoch": epoch},
                           os.path.join(directory, "state.pt"))
            train.report(metrics, checkpoint=train.Checkpoint.from_directory(directory)
                         if rank == 0 else None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--impl", choices=["reference", "ray"], default="reference")
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--samples", type=int, default=2048)
    parser.add_argument("--storage", default=None)
    args = parser.parse_args()
    train = importlib.import_module(args.impl + ".train")
    train_torch = importlib.import_module(args.impl + ".train.torch")

    with tempfile.TemporaryDirectory() as scratch:
        config = {"impl": args.impl, "epochs": args.epochs, "samples": args.samples,
                  "batch_size": 64, "lr": 0.05,
                  "crash_marker": os.path.join(scratch, "crashed-once")}
        trainer = train_torch.TorchTrainer(
            train_func, train_loop_config=config,
            scaling_config=train.ScalingConfig(num_workers=2),
            run_config=train.RunConfig(
                name="fashion-mnist", storage_path=args.storage or os.path.join(scratch, "runs"),
                failure_config=train.FailureConfig(max_failures=1),
                checkpoint_config=train.CheckpointConfig(num_to_keep=2)))
        result = trainer.fit()
        print(f"worker killed once: {os.path.exists(config['crash_marker'])}")
        print(f"final metrics: {result.metrics}")

        model = small_resnet()
        with result.checkpoint.as_directory() as directory:
            state = torch.load(os.path.join(directory, "state.pt"))
        model.load_state_dict(state["model"])
        model.eval()
        test = fashion_like(1000, seed=2)
        with torch.no_grad():
            accuracy = (model(test.tensors[0]).argmax(1) == test.tensors[1]).float().mean()
        print(f"checkpoint of epoch {state['epoch']}: held-out accuracy {accuracy:.3f}")


if __name__ == "__main__":
    main()
