"""TorchTrainer reading a parquet dataset through the data layer: Ray Data's ingest pattern.

    python docs/examples/torch_parquet_ingest.py [--impl reference|ray] [--epochs 3]

What it shows (Ray 2.60's "data loading and preprocessing" guide):
- a parquet dataset (written locally first, so nothing is downloaded) read lazily with
  `read_parquet`, preprocessed with `map_batches` (standardising the features with
  statistics computed on the driver);
- `datasets={"train": ..., "valid": ...}` on the trainer and
  `DataConfig(datasets_to_split=["train"])`: every worker reads its own disjoint shard of
  "train", all of "valid";
- `get_dataset_shard("train").iter_torch_batches(batch_size=..., dtypes=...)` once per
  epoch: each pass is a fresh epoch over the same shard;
- a worker killed in epoch 1 (`FailureConfig(max_failures=1)`): the new worker group gets
  its shards anew and resumes from the latest checkpoint.

`--impl ray` runs the same code on Ray Train and Ray Data: only the import root changes.
"""

from __future__ import annotations

import argparse
import importlib
import os
import tempfile

import numpy as np

FEATURES = [f"x{i}" for i in range(8)]


def write_parquet(folder: str, rows: int, files: int = 4) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(0)
    weights = np.linspace(-1.0, 1.0, len(FEATURES))
    for f in range(files):
        x = rng.normal(loc=3.0, scale=2.0, size=(rows // files, len(FEATURES)))
        y = (x - 3.0) / 2.0 @ weights + rng.normal(scale=0.1, size=len(x))
        columns = {name: x[:, i].astype(np.float32) for i, name in enumerate(FEATURES)}
        pq.write_table(pa.table({**columns, "y": y.astype(np.float32)}),
                       os.path.join(folder, f"part-{f}.parquet"), row_group_size=1000)


class Standardize:
    """A callable class: built once per worker process, as in Ray's actor pools."""

    def __init__(self, mean: dict, std: dict):
        self.mean, self.std = mean, std

    def __call__(self, batch: dict) -> dict:
        for name in FEATURES:
            batch[name] = (batch[name] - self.mean[name]) / self.std[name]
        return batch


def train_func(config: dict) -> None:
    import torch

    train = importlib.import_module(config["impl"] + ".train")
    ttorch = importlib.import_module(config["impl"] + ".train.torch")
    context = train.get_context()
    model = ttorch.prepare_model(torch.nn.Linear(len(FEATURES), 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    start = 0
    checkpoint = train.get_checkpoint()
    if checkpoint is not None:
        with checkpoint.as_directory() as folder:
            state = torch.load(os.path.join(folder, "state.pt"))
        model.module.load_state_dict(state["model"]) if hasattr(model, "module") else \
            model.load_state_dict(state["model"])
        start = state["epoch"] + 1
    shard = train.get_dataset_shard("train")
    for epoch in range(start, config["epochs"]):
        rows = 0
        for batch in shard.iter_torch_batches(batch_size=256, dtypes=torch.float32):
            x = torch.stack([batch[n] for n in FEATURES], dim=1)
            loss = torch.nn.functional.mse_loss(model(x).squeeze(1), batch["y"])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            rows += len(x)
        if epoch == 1 and context.get_world_rank() == 1 and not os.path.exists(config["marker"]):
            open(config["marker"], "w").close()
            os._exit(1)  # a worker dies once, after reading its epoch-1 rows
        with torch.no_grad():
            valid = [torch.nn.functional.mse_loss(
                model(torch.stack([b[n] for n in FEATURES], dim=1)).squeeze(1), b["y"]).item()
                for b in train.get_dataset_shard("valid").iter_torch_batches(
                    batch_size=1024, dtypes=torch.float32)]
        with tempfile.TemporaryDirectory() as folder:
            inner = model.module if hasattr(model, "module") else model
            torch.save({"model": inner.state_dict(), "epoch": epoch},
                       os.path.join(folder, "state.pt"))
            train.report({"epoch": epoch, "rows_read": rows, "valid_mse": float(np.mean(valid))},
                         checkpoint=train.Checkpoint.from_directory(folder))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--impl", choices=["reference", "ray"], default="reference")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--storage", default=None)
    args = parser.parse_args()
    train = importlib.import_module(args.impl + ".train")
    data = importlib.import_module(args.impl + ".data")
    ttorch = importlib.import_module(args.impl + ".train.torch")

    with tempfile.TemporaryDirectory() as scratch:
        os.makedirs(os.path.join(scratch, "data"))
        write_parquet(os.path.join(scratch, "data"), args.rows)
        raw = data.read_parquet(os.path.join(scratch, "data"))
        stats = raw.to_pandas()
        mean, std = stats[FEATURES].mean().to_dict(), stats[FEATURES].std().to_dict()
        ds = raw.map_batches(Standardize, fn_constructor_args=(mean, std), concurrency=1)
        train_ds, valid_ds = ds.train_test_split(test_size=0.1)
        trainer = ttorch.TorchTrainer(
            train_func,
            train_loop_config={"impl": args.impl, "epochs": args.epochs,
                               "marker": os.path.join(scratch, "killed")},
            scaling_config=train.ScalingConfig(num_workers=2),
            datasets={"train": train_ds, "valid": valid_ds},
            dataset_config=train.DataConfig(datasets_to_split=["train"]),
            run_config=train.RunConfig(
                name="parquet-ingest", storage_path=args.storage or os.path.join(scratch, "runs"),
                failure_config=train.FailureConfig(max_failures=1)))
        result = trainer.fit()
        print(f"final metrics: {result.metrics}")
        print(f"rows per worker and epoch: {result.metrics['rows_read']} "
              f"(train rows {train_ds.count()}, 2 workers)")
        print(f"a worker was killed in epoch 1: {os.path.exists(os.path.join(scratch, 'killed'))}")


if __name__ == "__main__":
    main()
