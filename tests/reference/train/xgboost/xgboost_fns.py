"""Data and training functions of the XGBoost fit tests (the workers import this module).

Every rank builds the same data from a seed and trains on its row shard X[rank::size];
the driver rebuilds the whole data set to train the single-process model it compares with.
A rank writes what it saw to `<out>/rank<r>-<pid>.json`.
"""

from __future__ import annotations

import json
import os

import numpy as np
import xgboost
from xgboost.callback import TrainingCallback

import reference.train as train
from reference.train.xgboost import RayTrainReportCallback

#: what every fit here adds to its params: one thread per 1-CPU worker, a fixed seed
BASE_PARAMS = {"tree_method": "hist", "nthread": 1, "seed": 0}


def make_data(spec: dict) -> tuple[np.ndarray, np.ndarray]:
    """Three features and a target. `spec["kind"]`: "integer" {"n", "distinct", "seed"}
    (features 0..distinct-1) or "continuous" {"n", "seed"} (standard normal), both with a
    noisy non-linear target; "disjoint" {"n", "seed"}: see `_disjoint`."""
    rng = np.random.default_rng(spec["seed"])
    if spec["kind"] == "disjoint":
        return _disjoint(spec["n"], rng)
    n = spec["n"]
    if spec["kind"] == "integer":
        X = rng.integers(0, spec["distinct"], size=(n, 3)).astype(np.float64)
    else:
        X = rng.normal(size=(n, 3))
    y = 2.0 * X[:, 0] - X[:, 1] + 0.5 * X[:, 2] ** 2 + rng.normal(size=n)
    return X, y


def _disjoint(n: int, rng) -> tuple[np.ndarray, np.ndarray]:
    """Two shards with no feature value in common: X[0::2] takes the values 0 and 1,
    X[1::2] the values 2 and 3; y is 10 where feature 0 >= 2 (plus feature 1 and noise),
    so the whole data set's best first split is feature 0 at 1.5, between the shards."""
    X = np.empty((n, 3))
    X[0::2] = rng.integers(0, 2, size=X[0::2].shape)
    X[1::2] = rng.integers(2, 4, size=X[1::2].shape)
    y = 10.0 * (X[:, 0] >= 2) + X[:, 1] + rng.normal(scale=0.1, size=n)
    return X, y


def shard(X: np.ndarray, y: np.ndarray, rank: int, size: int):
    return X[rank::size], y[rank::size]


class KillRank(TrainingCallback):
    """Rank `rank` exits abruptly (os._exit(1)) after boosting round `after` (0-based) of
    the first attempt; the marker file it writes first tells the next attempt."""

    def __init__(self, rank: int, after: int, marker: str):
        self.rank, self.after, self.marker = rank, after, marker

    def after_iteration(self, model, epoch, evals_log) -> bool:
        if (train.get_context().get_world_rank() == self.rank and epoch == self.after
                and not os.path.exists(self.marker)):
            with open(self.marker, "w") as f:
                f.write(str(model.num_boosted_rounds()))
            os._exit(1)
        return False


def train_loop(config: dict) -> None:
    """xgboost.train on this rank's shard with RayTrainReportCallback(**config["callback"]);
    with config["resume"], continues the checkpoint `get_checkpoint()` returns
    (`xgb_model=`) for the rounds still missing; config["kill"] = {"rank", "after"} makes
    that rank die once (see KillRank)."""
    from xgboost import collective

    ctx = train.get_context()
    rank, size = ctx.get_world_rank(), ctx.get_world_size()
    X, y = shard(*make_data(config["data"]), rank, size)
    dtrain = xgboost.DMatrix(X, label=y)
    callback_kwargs = config.get("callback", {})
    checkpoint = train.get_checkpoint()
    start_model = None
    if config.get("resume") and checkpoint is not None:
        filename = callback_kwargs.get("filename", RayTrainReportCallback.CHECKPOINT_NAME)
        start_model = RayTrainReportCallback.get_model(checkpoint, filename=filename)
    start = start_model.num_boosted_rounds() if start_model is not None else 0
    callbacks = [RayTrainReportCallback(**callback_kwargs)]
    if config.get("kill"):
        callbacks.append(KillRank(config["kill"]["rank"], config["kill"]["after"],
                                  os.path.join(config["out"], "killed")))
    seen = {"world_rank": rank, "world_size": size, "collective_rank": collective.get_rank(),
            "collective_world_size": collective.get_world_size(),
            "distributed": collective.is_distributed(), "start": start,
            "had_checkpoint": checkpoint is not None}
    record = os.path.join(config["out"], f"rank{rank}-{os.getpid()}.json")
    _write(record, seen)  # an attempt that dies leaves this much
    booster = xgboost.train({**BASE_PARAMS, **config["params"]}, dtrain,
                            num_boost_round=config["rounds"] - start, xgb_model=start_model,
                            evals=[(dtrain, "train")], verbose_eval=False, callbacks=callbacks)
    _write(record, {**seen, "rounds": booster.num_boosted_rounds()})


def _write(path: str, seen: dict) -> None:
    with open(path + ".tmp", "w") as f:
        json.dump(seen, f)
    os.replace(path + ".tmp", path)


def seen_by_ranks(out: str) -> list[dict]:
    """What every rank process of every attempt wrote, by (start round, rank)."""
    seen = [json.loads(open(os.path.join(out, name)).read())
            for name in os.listdir(out) if name.startswith("rank") and name.endswith(".json")]
    return sorted(seen, key=lambda s: (s["start"], s["world_rank"]))


def single_process(config: dict) -> xgboost.Booster:
    """The same training on the whole data set in this process."""
    X, y = make_data(config["data"])
    return xgboost.train({**BASE_PARAMS, **config["params"]}, xgboost.DMatrix(X, label=y),
                         num_boost_round=config["rounds"])
