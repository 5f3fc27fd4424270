"""Hugging Face Accelerate on the Train API: an Accelerate training loop inside TorchTrainer.

    python docs/examples/accelerate_classifier.py [--impl reference|ray] [--epochs 3]

What it shows (the "AccelerateTrainer" workflow of older guides, in its current form):
- an unchanged Accelerate loop (`Accelerator`, `accelerator.prepare`, `accelerator.backward`)
  as the training function; TorchTrainer starts the workers, sets the torchrun-style
  variables (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, ...) and the process group, and
  `Accelerator` picks them up: `num_processes` is the worker count, `process_index` the rank.
  On GPU-less workers pass `cpu=True`, else Accelerate runs each worker as a single process;
- the prepared loader gives each worker its shard; a checkpoint each epoch written on the
  main process with `accelerator.unwrap_model`, reported by every worker.

The data are synthetic (two Gaussian blobs), so nothing is downloaded. `--impl ray` runs the
same code on Ray Train: only the import root changes.
"""

from __future__ import annotations

import argparse
import importlib
import os
import tempfile

import torch
from torch.utils.data import DataLoader, TensorDataset


def blobs(n: int, seed: int) -> TensorDataset:
    g = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, 2, (n,), generator=g)
    points = torch.randn(n, 2, generator=g) + (labels.unsqueeze(1) * 2.0 - 1.0) * 1.5
    return TensorDataset(points, labels)


def train_func(config: dict) -> None:
    from accelerate import Accelerator

    train = importlib.import_module(config["impl"] + ".train")
    accelerator = Accelerator(cpu=not torch.cuda.is_available())
    context = train.get_context()
    assert accelerator.num_processes == context.get_world_size()
    assert accelerator.process_index == context.get_world_rank()

    model = torch.nn.Sequential(torch.nn.Linear(2, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    loader = DataLoader(blobs(config["samples"], seed=1), batch_size=32, shuffle=True)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)

    for epoch in range(config["epochs"]):
        correct = total = 0
        for points, labels in loader:
            logits = model(points)
            loss = torch.nn.functional.cross_entropy(logits, labels)
            optimizer.zero_grad()
            accelerator.backward(loss)
            optimizer.step()
            correct += (logits.argmax(1) == labels).sum().item()
            total += len(labels)
        with tempfile.TemporaryDirectory() as directory:
            if accelerator.is_main_process:
                torch.save(accelerator.unwrap_model(model).state_dict(),
                           os.path.join(directory, "model.pt"))
            train.report({"epoch": epoch, "accuracy": correct / total,
                          "processes": accelerator.num_processes},
                         checkpoint=train.Checkpoint.from_directory(directory))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--impl", choices=["reference", "ray"], default="reference")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--samples", type=int, default=1024)
    parser.add_argument("--storage", default=None)
    args = parser.parse_args()
    train = importlib.import_module(args.impl + ".train")
    train_torch = importlib.import_module(args.impl + ".train.torch")

    with tempfile.TemporaryDirectory() as scratch:
        trainer = train_torch.TorchTrainer(
            train_func,
            train_loop_config={"impl": args.impl, "epochs": args.epochs,
                               "samples": args.samples},
            scaling_config=train.ScalingConfig(num_workers=2),
            run_config=train.RunConfig(
                name="accelerate-classifier",
                storage_path=args.storage or os.path.join(scratch, "runs")))
        result = trainer.fit()
        print(f"final metrics: {result.metrics}")
        with result.checkpoint.as_directory() as directory:
            state = torch.load(os.path.join(directory, "model.pt"))
        print(f"checkpoint holds {sorted(state)}")


if __name__ == "__main__":
    main()
