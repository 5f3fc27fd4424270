"""The names that complete `ray.train` 2.60's surface: SyncConfig, TRAIN_DATASET_KEY, the
validation configs, PreemptionInfo, get_preemption_info, the collectives (local mode and
outside a run), DataParallelTrainer.restore / can_restore, the V1 framework checkpoints."""

from __future__ import annotations

import logging
import pickle
import re

import pytest

import reference.train as train
from reference.train import collective
from reference.train._internal.session import Session, set_session
from reference.train._legacy import RayDeprecationWarning
from reference.train._preemption import merge_notices

# -- SyncConfig, TRAIN_DATASET_KEY ----------------------------------------------------------------

def test_sync_config_builds_with_rays_defaults_and_runconfig_rejects_it():
    config = train.SyncConfig()
    assert (config.sync_period, config.sync_timeout, config.sync_artifacts,
            config.sync_artifacts_on_checkpoint) == (300, 1800, False, True)
    with pytest.raises(DeprecationWarning, match=r"^`RunConfig\(sync_config\)` is deprecated"):
        train.RunConfig(sync_config=config)


def test_train_dataset_key():
    assert train.TRAIN_DATASET_KEY == "train"


# -- validation configs ---------------------------------------------------------------------------

def test_validation_task_config_defaults_and_timeout_rule():
    assert train.ValidationTaskConfig().fn_kwargs == {}
    assert train.ValidationTaskConfig(fn_kwargs={"a": 1}, timeout_s=2.5).timeout_s == 2.5
    for bad in (0, -1):
        with pytest.raises(AssertionError, match="^The `timeout_s` should be None or greater "
                           f"than zero, actual value: {bad}"):
            train.ValidationTaskConfig(timeout_s=bad)


def test_validation_config_fills_defaults():
    def fn(checkpoint, **kwargs):
        return {"score": 1}

    config = train.ValidationConfig(fn)
    assert config.fn is fn and config.ray_remote_kwargs == {}
    assert config.task_config == train.ValidationTaskConfig()
    task = train.ValidationTaskConfig(fn_kwargs={"k": 2})
    config = train.ValidationConfig(fn, task_config=task, ray_remote_kwargs={"num_cpus": 1})
    assert config.task_config is task and config.ray_remote_kwargs == {"num_cpus": 1}
    assert "__call__" in vars(train.ValidationFn)  # the protocol: fn(checkpoint, **kwargs)


def test_report_validation_needs_a_checkpoint():
    def fn():
        train.report({"a": 1}, validation=True)

    trainer = train.DataParallelTrainer(fn, scaling_config=train.ScalingConfig(num_workers=0))
    with pytest.raises(ValueError, match="^Validation requires a checkpoint to be provided."):
        trainer.fit()


# -- PreemptionInfo -------------------------------------------------------------------------------

def test_preemption_info_is_frozen_and_sorts():
    info = train.PreemptionInfo(deadline_ms=5, preempted_node_to_ranks={"b": [3, 1], "a": [1]})
    assert info.preempted_node_ids == ["a", "b"] and info.preempted_ranks == [1, 3]
    with pytest.raises(AttributeError):
        info.deadline_ms = 6
    assert pickle.loads(pickle.dumps(info)) == info


def test_merge_notices_takes_the_earliest_deadline_and_the_ranks_of_preempted_nodes():
    assert merge_notices({0: ("n1", None), 1: ("n2", None)}) is None
    info = merge_notices({0: ("n1", None), 1: ("n2", 12.5), 2: ("n2", 12.5), 3: ("n3", 11.0)})
    assert info == train.PreemptionInfo(deadline_ms=11000,
                                        preempted_node_to_ranks={"n2": [1, 2], "n3": [3]})


# -- local mode and outside a run -----------------------------------------------------------------

def test_collectives_and_preemption_info_in_local_mode():
    def fn():
        collective.barrier()
        return (collective.broadcast_from_rank_zero({"x": 1}), train.get_preemption_info())

    result = train.DataParallelTrainer(
        fn, scaling_config=train.ScalingConfig(num_workers=0)).fit()
    assert result.return_value == ({"x": 1}, None)


@pytest.mark.parametrize("call, name", [
    (collective.barrier, "barrier"),
    (lambda: collective.broadcast_from_rank_zero(1), "broadcast_from_rank_zero"),
    (train.get_preemption_info, "get_preemption_info")])
def test_outside_a_training_function_they_raise_rays_error(call, name):
    with pytest.raises(RuntimeError, match=f"^`{name}` cannot be used outside of a Ray Train "
                       "training function"):
        call()


class _OneRankWorker(Session):
    """A worker session of one rank (what a worker of a 1-worker run has)."""

    distributed = True
    context = None

    def report(self, *args): ...
    def get_checkpoint(self): ...
    def get_all_reported_checkpoints(self, *args): ...


def test_a_large_broadcast_on_a_worker_only_warns(caplog):
    set_session(_OneRankWorker())
    try:
        with caplog.at_level(logging.WARNING, logger="reference.train.collective._collectives"):
            assert collective.broadcast_from_rank_zero("x" * 2000) == "x" * 2000
            assert collective.broadcast_from_rank_zero("x" * 10) == "x" * 10
    finally:
        set_session(None)
    warned = [r.getMessage() for r in caplog.records]
    assert len(warned) == 1 and re.match(
        r"Data size \d+ bytes exceeds the maximum broadcast size of 1000 bytes", warned[0])


def test_local_mode_broadcasts_anything_without_a_warning(caplog):
    def fn():
        return collective.broadcast_from_rank_zero("x" * 2000)

    with caplog.at_level(logging.WARNING, logger="reference.train.collective._collectives"):
        result = train.DataParallelTrainer(
            fn, scaling_config=train.ScalingConfig(num_workers=0)).fit()
    assert result.return_value == "x" * 2000 and not caplog.records


# -- restore / can_restore ------------------------------------------------------------------------

@pytest.mark.parametrize("method", ["restore", "can_restore"])
@pytest.mark.parametrize("trainer", ["DataParallelTrainer", "TorchTrainer", "XGBoostTrainer",
                                     "LightGBMTrainer", "JaxTrainer"])
def test_restore_is_deprecated(method, trainer):
    module = {"DataParallelTrainer": "reference.train", "TorchTrainer": "reference.train.torch",
              "XGBoostTrainer": "reference.train.xgboost",
              "LightGBMTrainer": "reference.train.lightgbm",
              "JaxTrainer": "reference.train.v2.jax"}[trainer]
    cls = getattr(pytest.importorskip(module), trainer)
    with pytest.raises(DeprecationWarning, match="^The `restore` and `can_restore` APIs are "
                       "deprecated and will be removed in a future release."):
        getattr(cls, method)("/some/path")


# -- V1 framework checkpoints ---------------------------------------------------------------------

def test_torch_checkpoint_warns_and_round_trips_a_state_dict(tmp_path):
    torch = pytest.importorskip("torch")
    from reference.train.torch import TorchCheckpoint

    with pytest.warns(RayDeprecationWarning, match="`TorchCheckpoint` is deprecated"):
        TorchCheckpoint(str(tmp_path))
    model = torch.nn.Linear(2, 1)
    with pytest.warns(RayDeprecationWarning):
        checkpoint = TorchCheckpoint.from_state_dict(
            {f"module.{k}": v for k, v in model.state_dict().items()}, preprocessor={"p": 1})
    assert checkpoint.get_preprocessor() == {"p": 1}
    loaded = checkpoint.get_model(torch.nn.Linear(2, 1))
    assert all(torch.equal(a, b) for a, b in zip(loaded.state_dict().values(),
                                                  model.state_dict().values(), strict=True))
    with pytest.warns(RayDeprecationWarning) as record:
        whole = TorchCheckpoint.from_model(model)
    # the method's own warning, then the constructor's
    assert ["`TorchCheckpoint.from_model()` is" in str(w.message) for w in record] == [
        True, False]
    assert isinstance(whole.get_model(), torch.nn.Linear)
    with pytest.warns(RayDeprecationWarning):
        empty = TorchCheckpoint(str(tmp_path))
    with pytest.raises(RuntimeError, match="^`model.pt` not found within this checkpoint"):
        empty.get_model()


def test_gbdt_checkpoints_warn_and_round_trip(tmp_path):
    np = pytest.importorskip("numpy")
    xgboost = pytest.importorskip("xgboost")
    lightgbm = pytest.importorskip("lightgbm")
    from reference.train.lightgbm import LightGBMCheckpoint
    from reference.train.xgboost import XGBoostCheckpoint

    x, y = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 8.0]]), np.array([0, 1, 0, 1])
    booster = xgboost.train({}, xgboost.DMatrix(x, label=y), num_boost_round=2)
    with pytest.warns(RayDeprecationWarning, match="`XGBoostCheckpoint` is deprecated"):
        checkpoint = XGBoostCheckpoint.from_model(booster)
    assert checkpoint.get_model().num_boosted_rounds() == 2
    lgb = lightgbm.train({"verbose": -1, "min_data_in_leaf": 1},
                         lightgbm.Dataset(x, label=y), num_boost_round=2)
    with pytest.warns(RayDeprecationWarning, match="`LightGBMCheckpoint` is deprecated"):
        checkpoint = LightGBMCheckpoint.from_model(lgb, path=str(tmp_path))
    assert checkpoint.get_model().num_trees() == lgb.num_trees()
    with pytest.raises(ValueError, match="^`path` must be a directory, but got"):
        LightGBMCheckpoint.from_model(lgb, path=str(tmp_path / "missing"))
