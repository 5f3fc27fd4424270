"""Data and training functions of the LightGBM fit tests (the workers import this module).

Every rank builds the same data from a seed and trains on its row shard X[rank::size]
with LightGBM's data-parallel learner; the driver rebuilds the whole data set to train the
single-process model it compares with. A rank writes what it saw to
`<out>/rank<r>-<pid>.json`.
"""

from __future__ import annotations

import json
import os

import lightgbm
import numpy as np

import reference.train as train
from reference.train.lightgbm import RayTrainReportCallback, get_network_params

#: what every fit here adds to its params: one thread per 1-CPU worker, quiet, repeatable
BASE_PARAMS = {"objective": "regression", "verbose": -1, "num_threads": 1,
               "deterministic": True, "force_row_wise": True, "seed": 0}


def make_data(spec: dict) -> tuple[np.ndarray, np.ndarray]:
    """Three features and a noisy non-linear target. `spec["kind"]`:

    - "covering" {"workers", "distinct", "copies", "seed"}: integer features 0..distinct-1
      laid out so that every row shard X[r::workers] holds each value exactly `copies`
      times (n = workers * distinct * copies);
    - "continuous" {"n", "seed"}: standard normal features;
    - "disjoint" {"n", "seed"}: two shards without a value in common, see `_disjoint`.
    """
    rng = np.random.default_rng(spec["seed"])
    if spec["kind"] == "disjoint":
        return _disjoint(spec["n"], rng)
    if spec["kind"] == "covering":
        workers, distinct, copies = spec["workers"], spec["distinct"], spec["copies"]
        n = workers * distinct * copies
        X = np.empty((n, 3))
        for j in range(3):
            for r in range(workers):
                X[r::workers, j] = rng.permutation(np.repeat(np.arange(distinct), copies))
    else:
        n = spec["n"]
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


def kill_rank(rank: int, after: int, marker: str):
    """A callback: rank `rank` exits abruptly (os._exit(1)) after iteration `after` of the
    first attempt (its report came first); the marker file it writes tells the next one."""

    def callback(env) -> None:
        if (train.get_context().get_world_rank() == rank and env.iteration == after
                and not os.path.exists(marker)):
            with open(marker, "w") as f:
                f.write(str(env.iteration))
            os._exit(1)

    callback.order = 100  # after RayTrainReportCallback (LightGBM sorts by `order`)
    return callback


def train_loop(config: dict) -> None:
    """lightgbm.train on this rank's shard, `get_network_params()` merged into the params
    (tree_learner="data" unless config["params"] says otherwise), with
    RayTrainReportCallback(**config["callback"]); with config["resume"], continues the
    checkpoint `get_checkpoint()` returns (`init_model=`) for the iterations still missing;
    config["kill"] = {"rank", "after"} makes that rank die once."""
    ctx = train.get_context()
    rank, size = ctx.get_world_rank(), ctx.get_world_size()
    X, y = shard(*make_data(config["data"]), rank, size)
    callback_kwargs = config.get("callback", {})
    checkpoint = train.get_checkpoint()
    start_model = None
    if config.get("resume") and checkpoint is not None:
        filename = callback_kwargs.get("filename", RayTrainReportCallback.CHECKPOINT_NAME)
        start_model = RayTrainReportCallback.get_model(checkpoint, filename=filename)
    start = start_model.current_iteration() if start_model is not None else 0
    network = get_network_params()
    params = {**BASE_PARAMS, "tree_learner": "data", **config["params"], **network}
    callbacks = [RayTrainReportCallback(**callback_kwargs)]
    if config.get("kill"):
        callbacks.append(kill_rank(config["kill"]["rank"], config["kill"]["after"],
                                   os.path.join(config["out"], "killed")))
    seen = {"world_rank": rank, "world_size": size, "network": network, "start": start,
            "had_checkpoint": checkpoint is not None}
    record = os.path.join(config["out"], f"rank{rank}-{os.getpid()}.json")
    _write(record, seen)  # an attempt that dies leaves this much
    dtrain = lightgbm.Dataset(X, label=y)
    booster = lightgbm.train(params, dtrain, num_boost_round=config["rounds"] - start,
                             init_model=start_model, valid_sets=[dtrain], valid_names=["train"],
                             callbacks=callbacks)
    _write(record, {**seen, "rounds": booster.current_iteration()})


def _write(path: str, seen: dict) -> None:
    with open(path + ".tmp", "w") as f:
        json.dump(seen, f)
    os.replace(path + ".tmp", path)


def seen_by_ranks(out: str) -> list[dict]:
    """What every rank process of every attempt wrote, by (start iteration, rank)."""
    seen = [json.loads(open(os.path.join(out, name)).read())
            for name in os.listdir(out) if name.startswith("rank") and name.endswith(".json")]
    return sorted(seen, key=lambda s: (s["start"], s["world_rank"]))


def single_process(config: dict) -> lightgbm.Booster:
    """The same training on the whole data set in this process (the serial learner)."""
    X, y = make_data(config["data"])
    params = {**BASE_PARAMS, **config["params"]}
    params.pop("tree_learner", None)
    return lightgbm.train(params, lightgbm.Dataset(X, label=y),
                          num_boost_round=config["rounds"])
