"""XGBoostTrainer.fit() on a simulated cluster (2 workers) and in local mode: xgboost's
collective ranks, the checkpoints the callback reports, get_model, a custom file name, and
resuming after a rank was killed."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
import xgboost
import xgboost_fns as fns

import reference.train as train
from reference.train.xgboost import RayTrainReportCallback, XGBoostTrainer

pytestmark = pytest.mark.slow
DATA = {"kind": "continuous", "n": 120, "seed": 3}
PARAMS = {"max_depth": 2, "eta": 0.3}


def _fit(tmp_path, config: dict, *, workers: int = 2, name: str = "xgb", **run_kwargs):
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    trainer = XGBoostTrainer(
        fns.train_loop, train_loop_config={"out": str(out), **config},
        scaling_config=train.ScalingConfig(num_workers=workers),
        run_config=train.RunConfig(name=name, storage_path=str(tmp_path / "storage"),
                                   **run_kwargs))
    return trainer.fit(), str(out)


def _files(checkpoint) -> list:
    with checkpoint.as_directory() as folder:
        return sorted(os.listdir(folder))


def _rmse(booster: xgboost.Booster, data: dict) -> float:
    X, y = fns.make_data(data)
    return float(np.sqrt(np.mean((booster.predict(xgboost.DMatrix(X)) - y) ** 2)))


def test_two_workers_collective_ranks_and_checkpoints(xgboost_cluster, tmp_path):
    config = {"data": DATA, "params": PARAMS, "rounds": 5, "callback": {"frequency": 2}}
    result, out = _fit(tmp_path, config)
    assert result.error is None

    # xgboost's collective rank is the Train world rank on every worker
    seen = fns.seen_by_ranks(out)
    assert [(s["world_rank"], s["collective_rank"], s["collective_world_size"],
             s["distributed"]) for s in seen] == [(0, 0, 2, True), (1, 1, 2, True)]
    assert [s["rounds"] for s in seen] == [5, 5]

    # checkpoints after rounds 2 and 4, and after_training's for round 5; each folder holds
    # rank 0's model file only (rank 1 reported none)
    models = [RayTrainReportCallback.get_model(c) for c, _ in result.best_checkpoints]
    assert [m.num_boosted_rounds() for m in models] == [2, 4, 5]
    assert all(_files(c) == ["model.ubj"] for c, _ in result.best_checkpoints)
    assert list(result.metrics) == ["train-rmse"]
    assert result.best_checkpoints[-1][1] == result.metrics
    # the reported metric is the evaluation over both shards: the whole data set's RMSE
    final = RayTrainReportCallback.get_model(result.checkpoint)
    assert result.metrics["train-rmse"] == pytest.approx(_rmse(final, DATA), rel=1e-5)
    # the checkpoint is a UBJSON model (an object, "{", of binary values: not JSON text)
    with result.checkpoint.as_directory() as folder:
        raw = open(os.path.join(folder, "model.ubj"), "rb").read()
    assert raw[:1] == b"{"
    with pytest.raises(ValueError):
        json.loads(raw)


def test_custom_filename_and_metrics_rename(xgboost_cluster, tmp_path):
    config = {"data": DATA, "params": PARAMS, "rounds": 3,
              "callback": {"filename": "booster.json", "metrics": {"loss": "train-rmse"}}}
    result, _ = _fit(tmp_path, config, name="custom")
    assert list(result.metrics) == ["loss"]
    # frequency=0: the only checkpoint is the one after training
    assert len(result.best_checkpoints) == 1
    assert _files(result.checkpoint) == ["booster.json"]
    with result.checkpoint.as_directory() as folder:
        saved = json.loads(open(os.path.join(folder, "booster.json")).read())
    assert "learner" in saved  # a JSON model, chosen by the suffix
    booster = RayTrainReportCallback.get_model(result.checkpoint, filename="booster.json")
    assert booster.num_boosted_rounds() == 3
    with pytest.raises(xgboost.core.XGBoostError):
        RayTrainReportCallback.get_model(result.checkpoint)  # no model.ubj in it


def test_resume_after_a_rank_is_killed(xgboost_cluster, tmp_path):
    """Rank 1 dies (os._exit) after round 3 of the first attempt, every round checkpointed;
    the second attempt continues rank 0's checkpoint of round 3 for the 3 rounds left."""
    rounds, after = 6, 2
    config = {"data": DATA, "params": PARAMS, "rounds": rounds, "resume": True,
              "callback": {"frequency": 1}, "kill": {"rank": 1, "after": after}}
    result, out = _fit(tmp_path, config, name="resume",
                       failure_config=train.FailureConfig(max_failures=1))
    assert result.error is None
    assert open(os.path.join(out, "killed")).read() == str(after + 1)
    seen = fns.seen_by_ranks(out)
    first, second = seen[:2], seen[2:]
    assert [(s["start"], s["had_checkpoint"]) for s in first] == [(0, False), (0, False)]
    assert all("rounds" not in s for s in first)  # neither finished
    # report() returned on rank 1 for round 3, so that round's checkpoint was registered
    assert [(s["world_rank"], s["start"], s["rounds"]) for s in second] == [
        (0, after + 1, rounds), (1, after + 1, rounds)]
    final = RayTrainReportCallback.get_model(result.checkpoint)
    assert final.num_boosted_rounds() == rounds
    assert result.metrics["train-rmse"] == pytest.approx(_rmse(final, DATA), rel=1e-5)
    # every round has its checkpoint: 3 from the first attempt, 3 from the second, and
    # after_training's (the resumed callback counts its own epochs, so the last one is not
    # "already checkpointed" there, as in Ray)
    assert [RayTrainReportCallback.get_model(c).num_boosted_rounds()
            for c, _ in result.best_checkpoints] == [1, 2, 3, 4, 5, 6, 6]


def test_local_mode_runs_in_this_process_without_a_collective(tmp_path):
    config = {"data": DATA, "params": PARAMS, "rounds": 2}
    result, out = _fit(tmp_path, config, workers=0, name="local")
    assert result.error is None
    (seen,) = fns.seen_by_ranks(out)
    assert (seen["world_rank"], seen["world_size"], seen["collective_world_size"],
            seen["distributed"], seen["rounds"]) == (0, 1, 1, False, 2)
    assert list(result.metrics) == ["train-rmse"]
    single = fns.single_process(config)
    assert result.metrics["train-rmse"] == pytest.approx(_rmse(single, DATA), rel=1e-5)


def _from_dataset_shard(config):
    # the XGBoost guide's second sharding method: Ray Data shards, as pandas
    frame = train.get_dataset_shard("train").materialize().to_pandas()
    X, y = frame.drop(columns=["y"]).to_numpy(), frame["y"].to_numpy()
    with open(os.path.join(config["out"], f"rows{train.get_context().get_world_rank()}"),
              "w") as f:
        json.dump(sorted(frame["i"].tolist()), f)
    xgboost.train(PARAMS, xgboost.DMatrix(X, label=y), num_boost_round=3,
                  evals=[(xgboost.DMatrix(X, label=y), "train")],
                  callbacks=[RayTrainReportCallback()])


def test_datasets_are_sharded_by_rank_and_read_as_pandas(xgboost_cluster, tmp_path):
    import pandas as pd

    import reference.data as rd

    X, y = fns.make_data(DATA)
    frame = pd.DataFrame(X, columns=[f"f{i}" for i in range(X.shape[1])]).assign(
        y=y, i=np.arange(len(y)))
    out = tmp_path / "out"
    out.mkdir()
    result = XGBoostTrainer(
        _from_dataset_shard, train_loop_config={"out": str(out)},
        datasets={"train": rd.from_pandas(frame)},
        scaling_config=train.ScalingConfig(num_workers=2),
        run_config=train.RunConfig(storage_path=str(tmp_path / "storage"))).fit()
    rows = [json.loads((out / f"rows{r}").read_text()) for r in range(2)]
    assert [len(r) for r in rows] == [len(y) // 2] * 2
    assert not set(rows[0]) & set(rows[1])
    assert RayTrainReportCallback.get_model(result.checkpoint).num_boosted_rounds() == 3
