"""XGBoost on the Train API: the getting-started guide's workflow with data sharded by rank.

    python docs/examples/xgboost_quickstart.py [--impl reference|ray] [--rounds 20]

What it shows (Ray 2.60's XGBoost guide, the first sharding method):
- parameters through `train_loop_config`, the data built inside the training function;
- each worker takes the rows of its world rank (`X[rank::world_size]`) and calls
  `xgboost.train` as a single process would; XGBoostTrainer connects the workers through
  `xgboost.collective` (a tracker in the driver), so they train one model together;
- `RayTrainReportCallback(metrics=["eval-logloss"], frequency=1)` reports every round and
  checkpoints every round (plus none at the end, as the last round was just checkpointed);
- a worker that dies is restarted (`FailureConfig(max_failures=1)`) and resumes from the
  latest checkpoint with `xgb_model=`, so the model still has `--rounds` rounds;
- `RayTrainReportCallback.get_model(result.checkpoint)` loads the final Booster.

The data are synthetic, so nothing is downloaded. `--impl ray` runs the same code on Ray
Train: only the import root changes. Add `"device": "cuda"` to the params on GPU workers
(`ScalingConfig(use_gpu=True)`).
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
    y = (x[:, 0] + 0.5 * x[:, 1] * x[:, 2] + rng.normal(scale=0.5, size=n) > 0).astype(int)
    return x, y


def train_func(config: dict) -> None:
    import xgboost

    train = importlib.import_module(config["impl"] + ".train")
    callbacks = importlib.import_module(config["impl"] + ".train.xgboost")
    context = train.get_context()
    rank, world = context.get_world_rank(), context.get_world_size()
    x, y = make_data(config["rows"], seed=0)
    x_eval, y_eval = make_data(config["rows"] // 4, seed=1)
    dtrain = xgboost.DMatrix(x[rank::world], label=y[rank::world])
    deval = xgboost.DMatrix(x_eval[rank::world], label=y_eval[rank::world])

    start, booster = train.get_checkpoint(), None
    if start is not None:
        booster = callbacks.RayTrainReportCallback.get_model(start)
    done = 0 if booster is None else booster.num_boosted_rounds()
    if config["kill_at"] and done < config["kill_at"] <= config["rounds"] and rank == 1 \
            and not os.path.exists(config["marker"]):
        open(config["marker"], "w").close()  # die once, after round kill_at

        class Die(xgboost.callback.TrainingCallback):
            def after_iteration(self, model, epoch, evals_log):
                if epoch + 1 == config["kill_at"]:
                    os._exit(1)
                return False

        extra = [Die()]
    else:
        extra = []
    xgboost.train(
        {"objective": "binary:logistic", "eval_metric": "logloss", "tree_method": "hist",
         "max_depth": 4, "eta": 0.3},
        dtrain, num_boost_round=config["rounds"] - done, evals=[(deval, "eval")],
        xgb_model=booster, verbose_eval=False,
        callbacks=[callbacks.RayTrainReportCallback(metrics=["eval-logloss"], frequency=1),
                   *extra])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--impl", choices=["reference", "ray"], default="reference")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--rows", type=int, default=4000)
    parser.add_argument("--kill-at", type=int, default=8, help="0: no worker is killed")
    parser.add_argument("--storage", default=None)
    args = parser.parse_args()
    train = importlib.import_module(args.impl + ".train")
    xgb = importlib.import_module(args.impl + ".train.xgboost")

    with tempfile.TemporaryDirectory() as scratch:
        trainer = xgb.XGBoostTrainer(
            train_func,
            train_loop_config={"impl": args.impl, "rounds": args.rounds, "rows": args.rows,
                               "kill_at": args.kill_at,
                               "marker": os.path.join(scratch, "killed")},
            scaling_config=train.ScalingConfig(num_workers=2),
            run_config=train.RunConfig(
                name="xgboost-quickstart", storage_path=args.storage or os.path.join(scratch, "runs"),
                failure_config=train.FailureConfig(max_failures=1)))
        result = trainer.fit()
        booster = xgb.RayTrainReportCallback.get_model(result.checkpoint)
        print(f"final metrics: {result.metrics}")
        print(f"booster rounds: {booster.num_boosted_rounds()} (asked for {args.rounds}); "
              f"a worker was killed after round {args.kill_at}: "
              f"{os.path.exists(os.path.join(scratch, 'killed'))}")


if __name__ == "__main__":
    main()
