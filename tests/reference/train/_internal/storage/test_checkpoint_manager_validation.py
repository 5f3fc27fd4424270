"""CheckpointManager's validation bookkeeping (Ray 2.60's update_checkpoints_with_validation
_result): pending checkpoints are protected from retention and listed in the snapshot; a
VALIDATED result merges metrics and re-places the checkpoint, then retention runs again;
a resumed manager lists the pending ones again."""

import json
import os

import pytest

from reference.train import ValidationTaskConfig
from reference.train._internal.storage import CheckpointManager, StorageContext
from reference.train._internal.worker_group.validation_task import task_bundle


class Config:
    def __init__(self, num_to_keep=None, attr=None, order="max"):
        self.num_to_keep, self.checkpoint_score_attribute = num_to_keep, attr
        self.checkpoint_score_order = order


def register(manager, storage, name, metrics, validation=False):
    path = storage.build_checkpoint_path_from_name(name)
    os.makedirs(path, exist_ok=True)
    return manager.register_checkpoint(path, metrics, validation=validation)


def doc(storage):
    with open(storage.checkpoint_manager_snapshot_path) as f:
        return json.load(f)


def test_validated_metrics_reorder_and_retention_runs_again(tmp_path):
    storage = StorageContext(str(tmp_path), "run")
    manager = CheckpointManager(storage, Config(num_to_keep=1, attr="acc"))
    register(manager, storage, "a", {"step": 0}, validation=True)
    register(manager, storage, "b", {"step": 1},
             validation=ValidationTaskConfig(fn_kwargs={"k": 1}, timeout_s=5))
    # both pending: neither is evicted, both are in the snapshot with their specs
    assert [r.dir_name for r in manager.checkpoint_results] == ["a", "b"]
    assert [e["checkpoint_dir_name"] for e in doc(storage)["pending_training_results"]] == [
        "a", "b"]
    assert doc(storage)["pending_validation_specs"] == [
        True, {"fn_kwargs": {"k": 1}, "timeout_s": 5}]

    manager.record_validation("a", "VALIDATED", {"acc": 0.9})
    manager.record_validation("b", "VALIDATED", {"acc": 0.1})
    # b (the latest) stays; a, better, is the one best checkpoint; nothing else is evicted
    assert [(r.dir_name, r.metrics) for r in manager.checkpoint_results] == [
        ("b", {"step": 1, "acc": 0.1}), ("a", {"step": 0, "acc": 0.9})]
    assert [r.dir_name for r in manager.best_checkpoint_results] == ["a"]
    state = doc(storage)
    assert state["pending_training_results"] == [] and state["pending_validation_specs"] == []
    assert sorted(state["validated_checkpoint_dir_names"]) == ["a", "b"]


def test_failed_and_timed_out_keep_their_metrics_and_are_evicted_later(tmp_path):
    storage = StorageContext(str(tmp_path), "run")
    manager = CheckpointManager(storage, Config(num_to_keep=1))
    register(manager, storage, "a", {"step": 0}, validation=True)
    register(manager, storage, "b", {"step": 1}, validation=True)
    manager.record_validation("a", "VALIDATION_FAILED")
    assert not os.path.exists(storage.build_checkpoint_path_from_name("a"))
    manager.record_validation("b", "VALIDATION_TIMEOUT")
    assert [(r.dir_name, r.metrics) for r in manager.checkpoint_results] == [
        ("b", {"step": 1})]
    assert doc(storage)["timed_out_validation_checkpoint_dir_names"] == ["b"]
    assert doc(storage)["failed_validation_checkpoint_dir_names"] == []  # a is gone
    with pytest.raises(ValueError, match="status='DONE'"):
        manager.record_validation("b", "DONE")


def test_a_resumed_manager_lists_the_pending_validations(tmp_path):
    storage = StorageContext(str(tmp_path), "run")
    register(CheckpointManager(storage), storage, "a", {"step": 0},
             validation=ValidationTaskConfig(fn_kwargs={"k": 2}))
    again = CheckpointManager(storage)
    assert [(r.dir_name, spec) for r, spec in again.pending_validations] == [
        ("a", {"fn_kwargs": {"k": 2}, "timeout_s": None})]


def test_unstorable_validated_metrics_change_nothing(tmp_path):
    storage = StorageContext(str(tmp_path), "run")
    manager = CheckpointManager(storage)
    register(manager, storage, "a", {"step": 0}, validation=True)
    before = doc(storage)
    with pytest.raises(TypeError):
        manager.record_validation("a", "VALIDATED", {"bad": object()})
    assert doc(storage) == before
    assert manager.checkpoint_results[0].metrics == {"step": 0}
    assert [r.dir_name for r, _ in manager.pending_validations] == ["a"]


def test_task_bundle_defaults_and_errors_name_the_argument():
    assert task_bundle({}) == {"CPU": 1.0}
    assert task_bundle({"num_cpus": 0, "num_gpus": 1, "resources": {"x": 2}}) == {
        "GPU": 1.0, "x": 2.0}
    with pytest.raises(ValueError, match="not \\['max_retries'\\]"):
        task_bundle({"max_retries": 3})
    with pytest.raises(ValueError, match="num_cpus=-1"):
        task_bundle({"num_cpus": -1})
