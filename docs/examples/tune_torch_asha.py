"""Hyperparameter search over TorchTrainer runs with ASHA: the seeds' workflow 3 in the form
Ray 2.60 supports (Ray Train V2 with Ray Tune).

    python docs/examples/tune_torch_asha.py [--impl reference|ray] [--cpus 4]
    python docs/examples/tune_torch_asha.py --kill-once      # a worker of one trial dies

What it shows:
- a Tune function trainable per trial (`train_driver_fn`) that builds a 2-worker
  `TorchTrainer` from the trial's config and fits it: `Tuner(TorchTrainer(...))` is not
  supported in Train V2;
- `train.RunConfig(name=f"train-trial_id={tune.get_context().get_trial_id()}")`, so a
  restarted trial resumes its own Train run, and `TuneReportCallback()`, which turns every
  Train report (rank 0's metrics) into one Tune result;
- `ASHAScheduler(metric="loss", mode="min")` stopping weak trials early, two trials at a
  time (`max_concurrent_trials=2`), each trial's driver taking 1 CPU: on 4 CPUs only one
  Train run at a time gets its two workers, the other waits for them;
- `--kill-once`: in the trial with the largest learning rate, the worker of rank 1 exits
  in epoch 3 of its first attempt. The Train run's `FailureConfig(max_failures=1)` restarts
  it from its latest checkpoint, the trial goes on, and the best config is still found with
  every trial in the ResultGrid.

The data are a synthetic linear regression (y = X w + noise), so nothing is downloaded.
`--impl ray` runs the same code on Ray (only the import root changes); Ray 2.60 needs
more than 4 CPUs for it (see docs/tune.md).
"""

from __future__ import annotations

import argparse
import importlib
import os
import tempfile

import torch
from torch import nn

FEATURES, ROWS, EPOCHS = 8, 256, 8
LEARNING_RATES = [0.05, 0.2, 0.01, 0.001]  # the strong ones first: ASHA then stops the rest


def train_loop(config: dict) -> None:
    """Each Train worker: SGD on its half of the rows, a checkpoint and a report per epoch."""
    train = importlib.import_module(config["impl"] + ".train")
    ttorch = importlib.import_module(config["impl"] + ".train.torch")
    ctx = train.get_context()
    g = torch.Generator().manual_seed(ctx.get_world_rank())
    w_true = torch.arange(1, FEATURES + 1, dtype=torch.float32) / FEATURES
    x = torch.randn(ROWS, FEATURES, generator=g)
    y = x @ w_true + 0.01 * torch.randn(ROWS, generator=g)
    model = ttorch.prepare_model(nn.Linear(FEATURES, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=config["lr"])
    start = 0
    checkpoint = train.get_checkpoint()
    if checkpoint:
        with checkpoint.as_directory() as d:
            state = torch.load(os.path.join(d, "state.pt"))
        model.module.load_state_dict(state["model"]) if hasattr(model, "module") \
            else model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        start = state["epoch"] + 1
    for epoch in range(start, EPOCHS):
        if config.get("kill") and epoch == 3 and ctx.get_world_rank() == 1 \
                and not os.path.exists(config["kill"]):
            open(config["kill"], "w").close()
            os._exit(1)  # this worker dies once; the Train run restarts from its checkpoint
        for i in range(0, ROWS, config["batch_size"]):
            optimizer.zero_grad()
            loss = ((model(x[i:i + config["batch_size"]]).squeeze(-1)
                     - y[i:i + config["batch_size"]]) ** 2).mean()
            loss.backward()
            optimizer.step()
        with torch.no_grad():
            loss = float(((model(x).squeeze(-1) - y) ** 2).mean())
        with tempfile.TemporaryDirectory() as d:
            if ctx.get_world_rank() == 0:
                inner = model.module if hasattr(model, "module") else model
                torch.save({"model": inner.state_dict(), "optimizer": optimizer.state_dict(),
                            "epoch": epoch}, os.path.join(d, "state.pt"))
            train.report({"loss": loss, "epoch": epoch + 1},
                         checkpoint=train.Checkpoint.from_directory(d))


def train_driver_fn(config: dict) -> None:
    """One Tune trial: a TorchTrainer run named after the trial, reporting to Tune."""
    tune = importlib.import_module(config["impl"] + ".tune")
    train = importlib.import_module(config["impl"] + ".train")
    ttorch = importlib.import_module(config["impl"] + ".train.torch")
    ray_train = importlib.import_module(config["impl"] + ".tune.integration.ray_train")
    trainer = ttorch.TorchTrainer(
        train_loop,
        train_loop_config=config,
        scaling_config=train.ScalingConfig(num_workers=2),
        run_config=train.RunConfig(
            name=f"train-trial_id={tune.get_context().get_trial_id()}",
            storage_path=config["storage"],
            failure_config=train.FailureConfig(max_failures=1),
            callbacks=[ray_train.TuneReportCallback()]))
    trainer.fit()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--impl", choices=["reference", "ray"], default="reference")
    parser.add_argument("--cpus", type=int, default=4)
    parser.add_argument("--kill-once", action="store_true")
    parser.add_argument("--storage", default=None)
    args = parser.parse_args()
    root = importlib.import_module(args.impl)
    importlib.import_module(args.impl + ".train.torch")  # a script's `from ... import TorchTrainer`
    tune = importlib.import_module(args.impl + ".tune")
    schedulers = importlib.import_module(args.impl + ".tune.schedulers")
    storage = args.storage or tempfile.mkdtemp(prefix="tune-asha-")
    root.init(num_cpus=args.cpus)
    kill = os.path.join(storage, "killed-once") if args.kill_once else None
    param_space = {
        "impl": args.impl, "storage": storage,
        "lr": tune.grid_search(LEARNING_RATES),
        "batch_size": tune.choice([16, 32]),
        "kill": tune.sample_from(lambda spec: kill if spec.config.lr == max(LEARNING_RATES)
                                 else None),
    }
    tuner = tune.Tuner(
        train_driver_fn,
        param_space=param_space,
        tune_config=tune.TuneConfig(
            num_samples=1, max_concurrent_trials=2,
            scheduler=schedulers.ASHAScheduler(metric="loss", mode="min", time_attr="epoch",
                                               max_t=EPOCHS, grace_period=2,
                                               reduction_factor=2)),
        run_config=tune.RunConfig(name="asha", storage_path=storage,
                                  failure_config=tune.FailureConfig(max_failures=1)))
    results = tuner.fit()
    best = results.get_best_result(metric="loss", mode="min")
    print("trials:", len(results), "errors:", results.num_errors,
          "terminated:", results.num_terminated)
    for r in results:
        print(f"  lr={r.config['lr']:<6} epochs={r.metrics['epoch']} "
              f"loss={r.metrics['loss']!r}")
    print("best config:", {"lr": best.config["lr"], "batch_size": best.config["batch_size"]},
          "loss:", round(best.metrics["loss"], 5))
    if kill:
        print("worker killed once:", os.path.exists(kill))


if __name__ == "__main__":
    main()
