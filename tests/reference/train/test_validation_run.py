"""Validation functions run as in Ray Train 2.60: a report with `validation=` registers its
checkpoint PENDING_VALIDATION, the controller runs `ValidationConfig.fn` in a process of its
own on the cluster, and the checkpoint ends VALIDATED (the returned metrics merged into its
metrics), VALIDATION_FAILED or VALIDATION_TIMEOUT. 2-worker fits on an embedded cluster
with room for the validation task next to the training workers."""

from __future__ import annotations

import json
import os
import time

import pytest

import reference
import reference.train as train
from reference.train import (
    CheckpointConsistencyMode,
    ReportedCheckpointStatus,
    ValidationConfig,
    ValidationTaskConfig,
)

pytestmark = pytest.mark.slow

VALIDATED = CheckpointConsistencyMode.VALIDATED


@pytest.fixture(autouse=True, scope="module")
def cluster():
    reference.shutdown()
    reference.init(num_cpus=4)
    try:
        yield
    finally:
        reference.shutdown()


def _checkpoint(tmp: str, step: int) -> train.Checkpoint:
    folder = os.path.join(tmp, f"r{train.get_context().get_world_rank()}-{step}")
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "step.json"), "w") as f:
        json.dump({"step": step}, f)
    return train.Checkpoint.from_directory(folder)


def _read_step(checkpoint) -> int:
    with checkpoint.as_directory() as folder, open(os.path.join(folder, "step.json")) as f:
        return json.load(f)["step"]


def _fit(tmp_path, loop, config, validation_config, name, **run):
    trainer = train.DataParallelTrainer(
        loop, train_loop_config={"tmp": str(tmp_path / "src"), **config},
        scaling_config=train.ScalingConfig(num_workers=2),
        validation_config=validation_config,
        run_config=train.RunConfig(storage_path=str(tmp_path / "store"), name=name, **run))
    return trainer.fit()


def _summary(reported):
    return [(r.status.value, r.metrics) for r in reported]


# ---------------------------------------------------------------- validated metrics

def score_fn(checkpoint, scale=1, offset=0):
    return {"val_score": _read_step(checkpoint) * scale + offset, "val_pid": os.getpid()}


def _report_and_read(config):
    for step in range(config["steps"]):
        train.report({"step": step, "pid": os.getpid()},
                     checkpoint=_checkpoint(config["tmp"], step),
                     validation=config.get("validation", True))
    return _summary(train.get_all_reported_checkpoints(
        consistency_mode=VALIDATED, timeout_s=60))


def test_validated_metrics_reach_workers_and_result(tmp_path):
    result = _fit(tmp_path, _report_and_read, {"steps": 2},
                  ValidationConfig(score_fn, task_config=ValidationTaskConfig(
                      fn_kwargs={"scale": 10})), "ok")
    seen = result.return_value
    assert [s for s, _ in seen] == ["VALIDATED", "VALIDATED"], seen
    assert [m["val_score"] for _, m in seen] == [0, 10]
    assert [m["step"] for _, m in seen] == [0, 1]
    # merged into the report's metrics; the validation ran in a process of its own
    for _, m in seen:
        assert m["val_pid"] not in (m["pid"], os.getpid()), m
    assert [m["val_score"] for _, m in result.best_checkpoints] == [0, 10]
    assert list(result.metrics_dataframe["val_score"]) == [0, 10]
    assert result.metrics["val_score"] == 10


def test_committed_mode_returns_at_once_with_pending_statuses(tmp_path):
    def slow(checkpoint):
        time.sleep(3)
        return {"v": 1}

    def loop(config):
        train.report({"step": 0}, checkpoint=_checkpoint(config["tmp"], 0), validation=True)
        start = time.monotonic()
        committed = train.get_all_reported_checkpoints(
            consistency_mode=CheckpointConsistencyMode.COMMITTED)
        waited = time.monotonic() - start
        validated = train.get_all_reported_checkpoints(consistency_mode=VALIDATED,
                                                       timeout_s=60)
        return _summary(committed), waited, _summary(validated)

    result = _fit(tmp_path, loop, {}, ValidationConfig(slow), "committed")
    committed, waited, validated = result.return_value
    assert committed == [("PENDING_VALIDATION", {"step": 0})] and waited < 2
    assert validated == [("VALIDATED", {"step": 0, "v": 1})]


# ---------------------------------------------------------------- failure, timeout

def raising_fn(checkpoint):
    raise RuntimeError("validation broke")


def not_a_dict_fn(checkpoint):
    return [1]


@pytest.mark.parametrize("fn", [raising_fn, not_a_dict_fn])
def test_a_failing_validation_is_validation_failed(tmp_path, fn, caplog):
    result = _fit(tmp_path, _report_and_read, {"steps": 1}, ValidationConfig(fn), "fail")
    assert _summary_statuses(result) == ["VALIDATION_FAILED"]
    assert result.return_value[0][1] == {"step": 0, "pid": result.return_value[0][1]["pid"]}
    expected = ("validation broke" if fn is raising_fn else
                "The validation function must return a dictionary of metrics. Got "
                "<class 'list'> instead.")
    assert any(expected in r.getMessage() for r in caplog.records), caplog.text


def _summary_statuses(result):
    return [s for s, _ in result.return_value]


def sleepy_fn(checkpoint, pid_file):
    with open(pid_file, "w") as f:
        f.write(str(os.getpid()))
    time.sleep(120)
    return {"never": True}


def test_a_slow_validation_times_out_and_its_process_is_killed(tmp_path, caplog):
    pid_file = str(tmp_path / "pid")
    start = time.monotonic()
    result = _fit(tmp_path, _report_and_read, {"steps": 1}, ValidationConfig(
        sleepy_fn, task_config=ValidationTaskConfig(fn_kwargs={"pid_file": pid_file},
                                                    timeout_s=2)), "timeout")
    assert time.monotonic() - start < 60
    assert _summary_statuses(result) == ["VALIDATION_TIMEOUT"]
    assert "never" not in result.metrics
    pid = int(open(pid_file).read())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert any("exceeded timeout_s=2s. Cancelling." in r.getMessage()
               for r in caplog.records), caplog.text


# ---------------------------------------------------------------- kwargs, retention, end

def test_report_fn_kwargs_override_the_defaults(tmp_path):
    result = _fit(tmp_path, _report_and_read,
                  {"steps": 1, "validation": ValidationTaskConfig(fn_kwargs={"offset": 5})},
                  ValidationConfig(score_fn, task_config=ValidationTaskConfig(
                      fn_kwargs={"scale": 3, "offset": 1})), "kwargs")
    # step 0 * scale 3 (default kept) + offset 5 (the report's wins)
    assert result.return_value[0][1]["val_score"] == 5


def inverse_fn(checkpoint):
    return {"val_loss": 10 - _read_step(checkpoint)}


def test_retention_ranks_by_the_validation_metric(tmp_path):
    result = _fit(tmp_path, _report_and_read, {"steps": 3}, ValidationConfig(inverse_fn),
                  "retain", checkpoint_config=train.CheckpointConfig(
                      num_to_keep=1, checkpoint_score_attribute="val_loss",
                      checkpoint_score_order="min"))
    # the lowest val_loss (step 2) is the one kept; the folders of the others are gone
    assert [m["step"] for _, m in result.best_checkpoints] == [2]
    assert [m["val_loss"] for _, m in result.best_checkpoints] == [8]
    kept = sorted(p for p in os.listdir(result.path)
                  if p.startswith("checkpoint_") and not p.endswith(".json"))
    assert len(kept) == 1, kept


def test_the_run_waits_for_validations_before_it_finishes(tmp_path):
    def loop(config):
        train.report({"step": 0}, checkpoint=_checkpoint(config["tmp"], 0), validation=True)

    def slow(checkpoint):
        time.sleep(2)
        return {"late": 1}

    result = _fit(tmp_path, loop, {}, ValidationConfig(slow), "end")
    assert result.metrics == {"step": 0, "late": 1}
    assert [m for _, m in result.best_checkpoints] == [{"step": 0, "late": 1}]


# ---------------------------------------------------------------- resume

class _Abort(BaseException):
    pass


class _AbortAfterReport(train.UserCallback):
    def after_report(self, run_context, metrics, checkpoint):
        raise _Abort("abort the driver after the first registration")


def test_a_resumed_run_validates_what_the_aborted_one_left_pending(tmp_path):
    def loop(config):
        if train.get_checkpoint() is None:
            train.report({"step": 0}, checkpoint=_checkpoint(config["tmp"], 0),
                         validation=True)
        return _summary(train.get_all_reported_checkpoints(consistency_mode=VALIDATED,
                                                           timeout_s=60))

    with pytest.raises(_Abort):
        _fit(tmp_path, loop, {}, ValidationConfig(score_fn), "resume",
             callbacks=[_AbortAfterReport()])
    snapshot = json.loads(open(os.path.join(
        tmp_path, "store", "resume", "checkpoint_manager_snapshot.json")).read())
    assert [e["metrics"] for e in snapshot["pending_training_results"]] == [{"step": 0}]
    assert snapshot["pending_validation_specs"] == [True]

    result = _fit(tmp_path, loop, {}, ValidationConfig(score_fn, task_config=(
        ValidationTaskConfig(fn_kwargs={"offset": 7}))), "resume")
    assert [(s, m["val_score"]) for s, m in result.return_value] == [("VALIDATED", 7)]
    assert ReportedCheckpointStatus.VALIDATED.value == result.return_value[0][0]
