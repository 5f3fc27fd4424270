"""tune.RunConfig / FailureConfig / CheckpointConfig validation, stoppers and the progress
table, without running trials."""

import io

import pytest

import reference.tune as tune
from reference.tune._progress import ProgressReporter
from reference.tune.experiment import Trial
from reference.tune.stopper import as_stopper, flatten


def test_configs_name_their_bad_arguments():
    with pytest.raises(ValueError, match=r"FailureConfig\(max_failures=-2\)"):
        tune.FailureConfig(max_failures=-2)
    with pytest.raises(ValueError, match=r"fail_fast='maybe'"):
        tune.FailureConfig(fail_fast="maybe")
    with pytest.raises(ValueError, match=r"num_to_keep=0"):
        tune.CheckpointConfig(num_to_keep=0)
    with pytest.raises(ValueError, match=r"checkpoint_score_order='up'"):
        tune.CheckpointConfig(checkpoint_score_order="up")
    with pytest.raises(ValueError, match="class trainables only"):
        tune.CheckpointConfig(checkpoint_frequency=2)
    with pytest.raises(ValueError, match=r"RunConfig\(name='a/b'\)"):
        tune.RunConfig(name="a/b")
    with pytest.raises(ValueError, match="local path"):
        tune.RunConfig(storage_path="s3://bucket/x")
    with pytest.raises(ValueError, match=r"verbose=7"):
        tune.RunConfig(verbose=7)
    with pytest.raises(TypeError, match="reference.tune.Callback"):
        tune.RunConfig(callbacks=[object()])
    with pytest.raises(ValueError, match="RunConfig\\(stop=3\\)"):
        as_stopper(3)
    assert tune.RunConfig(storage_path="file:///tmp/x").storage_path == "/tmp/x"
    assert tune.RunConfig().failure_config == tune.FailureConfig()


def test_threshold_stopper_compares_flattened_keys_and_warns_once(caplog):
    stop = as_stopper({"training_iteration": 3, "eval/loss": 0.5})
    assert not stop("t", {"training_iteration": 1, "eval": {"loss": 0.1}})
    assert stop("t", {"training_iteration": 3, "eval": {"loss": 0.1}})
    assert stop("t", {"training_iteration": 1, "eval": {"loss": 0.7}})
    assert not stop("t", {"other": 1}) and not stop("t", {"other": 2})
    assert sum("not found in result dict" in r.message for r in caplog.records) == 1
    with pytest.raises(ValueError, match="flattened by default"):
        as_stopper({"eval": {"loss": 1}})
    assert flatten({"a": {"b": {"c": 1}}, "d": {}}) == {"a/b/c": 1, "d": {}}


def _trial(i, status, loss=None):
    t = Trial("fn", f"abcde_{i:05d}", {"lr": 0.1 * (i + 1), "fixed": 1})
    t.status = status
    if loss is not None:
        t.last_result, t.iteration = {"loss": loss, "training_iteration": 2}, 2
    return t


class _Tty(io.StringIO):
    def isatty(self):
        return True


def test_terminal_table_redraws_in_place():
    stream = _Tty()
    rep = ProgressReporter(metric="loss", mode="min", searched=["lr"], stream=stream,
                           experiment_name="exp")
    trials = [_trial(0, "RUNNING", 0.5), _trial(1, "PENDING")]
    rep.refresh(trials, force=True)
    first = stream.getvalue()
    assert "Trial status: 1 PENDING, 1 RUNNING | exp" in first
    assert "fn_abcde_00000  RUNNING  0.1" in first and "0.5" in first
    rep.on_status(trials[0])  # no event lines on a terminal
    trials[1].status = "TERMINATED"
    rep.refresh(trials, force=True)
    second = stream.getvalue()[len(first):]
    assert second.startswith("\x1b[4F\x1b[J")  # back over the 4 lines drawn, cleared
    assert "1 RUNNING, 1 TERMINATED" in second


def test_plain_lines_off_a_terminal_and_verbose_zero():
    stream = io.StringIO()
    rep = ProgressReporter(metric="loss", mode="min", searched=["lr"], stream=stream)
    trial = _trial(0, "RUNNING")
    rep.on_status(trial)
    rep.on_result(trial, {"loss": 0.25, "training_iteration": 1})
    trial.status, trial.last_result, trial.iteration = "TERMINATED", {"loss": 0.2}, 3
    rep.on_status(trial)
    lines = stream.getvalue().splitlines()
    assert lines == ["[tune] Trial fn_abcde_00000 started with config {'lr': 0.1}",
                     "[tune] Trial fn_abcde_00000 iteration 1, loss=0.25",
                     "[tune] Trial fn_abcde_00000 completed after 3 iterations, loss=0.2"]
    quiet = io.StringIO()
    rep = ProgressReporter(metric="loss", mode="min", searched=[], stream=quiet, verbose=0)
    rep.on_status(trial)
    rep.final([trial])
    assert quiet.getvalue() == ""
