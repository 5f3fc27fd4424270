"""LightGBMTrainer.fit() on a simulated cluster (2 workers) and in local mode: each rank's
network parameters, the checkpoints the callback reports, get_model, a custom file name,
and resuming after a rank was killed."""

from __future__ import annotations

import os

import lightgbm
import lightgbm_fns as fns
import numpy as np
import pytest

import reference.train as train
from reference.train.lightgbm import LightGBMTrainer, RayTrainReportCallback

pytestmark = pytest.mark.slow
DATA = {"kind": "continuous", "n": 120, "seed": 3}
PARAMS = {"num_leaves": 4, "min_data_in_leaf": 5}


def _fit(tmp_path, config: dict, *, workers: int = 2, name: str = "lgbm", **run_kwargs):
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    trainer = LightGBMTrainer(
        fns.train_loop, train_loop_config={"out": str(out), **config},
        scaling_config=train.ScalingConfig(num_workers=workers),
        run_config=train.RunConfig(name=name, storage_path=str(tmp_path / "storage"),
                                   **run_kwargs))
    return trainer.fit(), str(out)


def _files(checkpoint) -> list:
    with checkpoint.as_directory() as folder:
        return sorted(os.listdir(folder))


def test_two_workers_network_params_and_checkpoints(lightgbm_cluster, tmp_path):
    config = {"data": DATA, "params": PARAMS, "rounds": 5, "callback": {"frequency": 2}}
    result, out = _fit(tmp_path, config)
    assert result.error is None

    # every rank: the group's size, the same machine list in rank order, its own port there
    seen = fns.seen_by_ranks(out)
    assert [s["world_rank"] for s in seen] == [0, 1]
    machines = seen[0]["network"]["machines"]
    entries = machines.split(",")
    assert len(entries) == 2
    ports = [int(entry.rsplit(":", 1)[1]) for entry in entries]
    assert len(set(ports)) == 2
    for rank, s in enumerate(seen):
        assert s["network"] == {"num_machines": 2, "local_listen_port": ports[rank],
                                "machines": machines}
        assert s["rounds"] == 5

    # checkpoints on iterations 1 and 3 (frequency) and 4 (the last); no extra report after
    # training; each folder holds rank 0's model file only
    models = [RayTrainReportCallback.get_model(c) for c, _ in result.best_checkpoints]
    assert [m.current_iteration() for m in models] == [2, 4, 5]
    assert all(_files(c) == ["model.txt"] for c, _ in result.best_checkpoints)
    assert list(result.metrics) == ["train-l2"]
    assert result.best_checkpoints[-1][1] == result.metrics
    final = RayTrainReportCallback.get_model(result.checkpoint)
    assert isinstance(final, lightgbm.Booster) and final.num_trees() == 5
    with result.checkpoint.as_directory() as folder:
        assert open(os.path.join(folder, "model.txt")).readline().strip() == "tree"


def test_custom_filename_and_metrics_rename(lightgbm_cluster, tmp_path):
    config = {"data": DATA, "params": PARAMS, "rounds": 3,
              "callback": {"filename": "booster.lgb", "metrics": {"loss": "train-l2"}}}
    result, _ = _fit(tmp_path, config, name="custom")
    assert list(result.metrics) == ["loss"]
    assert len(result.best_checkpoints) == 1  # frequency=0: the last iteration's only
    assert _files(result.checkpoint) == ["booster.lgb"]
    booster = RayTrainReportCallback.get_model(result.checkpoint, filename="booster.lgb")
    assert booster.current_iteration() == 3
    with pytest.raises(lightgbm.basic.LightGBMError):
        RayTrainReportCallback.get_model(result.checkpoint)  # no model.txt in it


def test_resume_after_a_rank_is_killed(lightgbm_cluster, tmp_path):
    """Rank 1 dies (os._exit) after iteration 3 of the first attempt, every iteration
    checkpointed; the second attempt continues rank 0's checkpoint of iteration 3
    (`init_model=`) for the 3 iterations left."""
    rounds, after = 6, 2
    config = {"data": DATA, "params": PARAMS, "rounds": rounds, "resume": True,
              "callback": {"frequency": 1}, "kill": {"rank": 1, "after": after}}
    result, out = _fit(tmp_path, config, name="resume",
                       failure_config=train.FailureConfig(max_failures=1))
    assert result.error is None
    assert open(os.path.join(out, "killed")).read() == str(after)
    seen = fns.seen_by_ranks(out)
    first, second = seen[:2], seen[2:]
    assert [(s["start"], s["had_checkpoint"]) for s in first] == [(0, False), (0, False)]
    assert all("rounds" not in s for s in first)  # neither finished
    # report() returned on rank 1 for iteration 3, so its checkpoint was registered; the new
    # group has new network parameters
    assert [(s["world_rank"], s["start"], s["rounds"]) for s in second] == [
        (0, after + 1, rounds), (1, after + 1, rounds)]
    assert second[0]["network"]["machines"] != first[0]["network"]["machines"]
    final = RayTrainReportCallback.get_model(result.checkpoint)
    assert final.current_iteration() == rounds and final.num_trees() == rounds
    # one checkpoint per iteration: the resumed callback sees iterations 3..5 of 6
    assert [RayTrainReportCallback.get_model(c).current_iteration()
            for c, _ in result.best_checkpoints] == [1, 2, 3, 4, 5, 6]


def test_local_mode_has_no_network_params(tmp_path, caplog):
    config = {"data": DATA, "params": {**PARAMS, "tree_learner": "serial"}, "rounds": 2}
    result, out = _fit(tmp_path, config, workers=0, name="local")
    assert result.error is None
    (seen,) = fns.seen_by_ranks(out)
    assert (seen["world_rank"], seen["world_size"], seen["network"], seen["rounds"]) == (
        0, 1, {}, 2)
    assert any("get_network_params` was called outside" in r.getMessage()
               for r in caplog.records)
    assert list(result.metrics) == ["train-l2"]
    single = fns.single_process(config)
    X, y = fns.make_data(DATA)
    assert result.metrics["train-l2"] == pytest.approx(
        float(np.mean((single.predict(X) - y) ** 2)), rel=1e-6)  # float32 labels
