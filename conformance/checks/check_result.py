"""Result: fields, best checkpoints, restoring from a path (clauses `result.*`)."""

from __future__ import annotations

import os

import pytest

from conformance import assertions
from conformance.catalogue import clause
from conformance.scenarios import basic_run, workspace


def _name(checkpoint) -> str:
    return os.path.basename(checkpoint.path.rstrip("/"))


@clause("result.fields")
def check_result_fields(impl):
    run = basic_run(impl)
    result = assertions.succeeded(run.outcome, run.setting)
    assertions.equal(_name(result.checkpoint), "ckpt-0002", "result.checkpoint", run.setting)
    assertions.equal(os.path.normpath(result.path), os.path.normpath(run.run_dir), "result.path",
                     run.setting)
    assertions.equal(result.error, None, "result.error", run.setting)
    assertions.equal(result.return_value, {"rank": 0, "attempt": 0, "world_size": 2},
                     "result.return_value", run.setting)


@clause("result.best-checkpoints", "result.metrics-dataframe")
def check_best_checkpoints_in_report_order(impl):
    run = basic_run(impl)
    result = assertions.succeeded(run.outcome, run.setting)
    seen = [(_name(c), m) for c, m in result.best_checkpoints]
    assertions.equal(seen, [("ckpt-0000", {"step": 0, "rank": 0, "attempt": 0}),
                            ("ckpt-0002", {"step": 2, "rank": 0, "attempt": 0})],
                     "result.best_checkpoints", run.setting)
    df = result.metrics_dataframe
    assertions.equal(list(df["step"]), [0, 2], "metrics_dataframe['step']", run.setting)
    assertions.equal(len(df), 2, "len(metrics_dataframe)", run.setting)


@clause("result.get-best-checkpoint")
def check_get_best_checkpoint(impl):
    run = basic_run(impl)
    result = assertions.succeeded(run.outcome, run.setting)
    assertions.equal(_name(result.get_best_checkpoint("step", "max")), "ckpt-0002",
                     "get_best_checkpoint('step', 'max')", run.setting)
    assertions.equal(_name(result.get_best_checkpoint("step", "min")), "ckpt-0000",
                     "get_best_checkpoint('step', 'min')", run.setting)
    with pytest.raises(ValueError):
        result.get_best_checkpoint("step", "maximum")
    with pytest.raises(RuntimeError):
        result.get_best_checkpoint("no-such-metric", "max")


@clause("result.from-path")
def check_result_from_path(impl):
    run = basic_run(impl)
    result = assertions.succeeded(run.outcome, run.setting)
    Result = impl.train.Result
    for path in (run.run_dir, run.run_dir + "/"):
        restored = Result.from_path(path)
        assertions.equal(_name(restored.checkpoint), "ckpt-0002", f"from_path({path!r}).checkpoint",
                         run.setting)
        assertions.equal(restored.metrics, result.metrics, f"from_path({path!r}).metrics",
                         run.setting)
        assertions.equal([_name(c) for c, _ in restored.best_checkpoints],
                         ["ckpt-0000", "ckpt-0002"], f"from_path({path!r}).best_checkpoints",
                         run.setting)
    empty = workspace()
    with pytest.raises(RuntimeError):
        Result.from_path(os.path.join(empty, "does-not-exist"))
    with pytest.raises(RuntimeError):
        Result.from_path(empty)
