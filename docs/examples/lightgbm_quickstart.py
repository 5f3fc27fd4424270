"""LightGBM on the Train API: a quick start on synthetic data, sharded by rank.

    python docs/examples/lightgbm_quickstart.py [--impl reference|ray] [--rounds 20]

What it shows:
- each worker takes the rows of its world rank and calls `lightgbm.train` with its params
  merged with `get_network_params()` (`num_machines`, `local_listen_port`, `machines`):
  LightGBM then connects the workers over its own sockets and they train one model with the
  data-parallel tree learner;
- `RayTrainReportCallback(frequency=5)` reports every iteration, with a checkpoint every 5
  and on the last one;
- `RayTrainReportCallback.get_model(result.checkpoint)` loads the final Booster, which
  predicts on held-out rows.

The data are synthetic, so nothing is downloaded. `--impl ray` runs the same code on Ray
Train: only the import root changes.
"""

from __future__ import annotations

import argparse
import importlib
import os
import tempfile

import numpy as np


def make_data(n: int, seed: int):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 8))
    y = x[:, 0] * 2.0 - x[:, 1] + np.sin(x[:, 2]) + rng.normal(scale=0.3, size=n)
    return x, y


def train_func(config: dict) -> None:
    import lightgbm

    train = importlib.import_module(config["impl"] + ".train")
    lgb = importlib.import_module(config["impl"] + ".train.lightgbm")
    context = train.get_context()
    rank, world = context.get_world_rank(), context.get_world_size()
    x, y = make_data(config["rows"], seed=0)
    x_valid, y_valid = make_data(config["rows"] // 4, seed=1)
    params = {"objective": "regression", "metric": "l2", "num_leaves": 15,
              "learning_rate": 0.2, "tree_learner": "data", "verbose": -1,
              **lgb.get_network_params()}
    dtrain = lightgbm.Dataset(x[rank::world], label=y[rank::world])
    dvalid = lightgbm.Dataset(x_valid[rank::world], label=y_valid[rank::world],
                              reference=dtrain)
    lightgbm.train(params, dtrain, num_boost_round=config["rounds"],
                   valid_sets=[dvalid], valid_names=["valid"],
                   callbacks=[lgb.RayTrainReportCallback(frequency=5)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--impl", choices=["reference", "ray"], default="reference")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--rows", type=int, default=4000)
    parser.add_argument("--storage", default=None)
    args = parser.parse_args()
    train = importlib.import_module(args.impl + ".train")
    lgb = importlib.import_module(args.impl + ".train.lightgbm")

    with tempfile.TemporaryDirectory() as scratch:
        trainer = lgb.LightGBMTrainer(
            train_func,
            train_loop_config={"impl": args.impl, "rounds": args.rounds, "rows": args.rows},
            scaling_config=train.ScalingConfig(num_workers=2),
            run_config=train.RunConfig(name="lightgbm-quickstart",
                                       storage_path=args.storage or os.path.join(scratch, "runs")))
        result = trainer.fit()
        booster = lgb.RayTrainReportCallback.get_model(result.checkpoint)
        x_test, y_test = make_data(1000, seed=2)
        mse = float(np.mean((booster.predict(x_test) - y_test) ** 2))
        print(f"final metrics: {result.metrics}")
        print(f"checkpoints: {len(result.best_checkpoints)}, trees: {booster.num_trees()}, "
              f"test mse: {mse:.3f} (target variance {float(np.var(y_test)):.3f})")


if __name__ == "__main__":
    main()
