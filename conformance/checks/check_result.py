"""Result: fields, best checkpoints, restoring from a path (clauses `result.*`)."""

from __future__ import annotations

import dataclasses
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


@dataclasses.dataclass
class StoredPoint:
    """A dataclass reported as a metric (module level, so a worker can unpickle it)."""

    a: int
    b: list


def _stored_metrics_cases():
    """(what a report passes, what storage gives back) for clause result.stored-metrics."""
    import datetime
    import enum

    import numpy as np

    class Colour(enum.Enum):
        RED = "red"

    nan, inf = float("nan"), float("inf")
    passed = {
        "pair": (1, 2), "tags": {7}, "loss": nan, "top": inf, "np_nan": np.float64("nan"),
        "np_ok": np.float64(2.5), "curve": [nan, 1.5, -inf, 2],
        "nested": {"a": {"b": (3.5, -inf), "c": [(1, nan), {"d": {4}}]}, "e": [], "f": {}},
        "keys": {True: "t", None: "n", 3: "i", "s": "s"}, "colour": Colour.RED,
        "when": datetime.datetime(2026, 1, 2, 3, 4, 5), "raw": b"bytes", "name": "café ✓",
        "flag": False, "count": 12, "rate": 0.125,
        "mixed": ["a", 1.5, nan, True, None], "mixed_pair": ("b", -inf),
        "point": StoredPoint(1, [2.0, inf]),
        "every_kind": [1, 2.5, True, "s", None, Colour.RED],
    }
    stored = {
        "pair": [1, 2], "tags": [7], "loss": None, "top": None, "np_nan": None,
        "np_ok": 2.5, "curve": [None, 1.5, None, 2],
        "nested": {"a": {"b": [3.5, None], "c": [[1, None], {"d": [4]}]}, "e": [], "f": {}},
        "keys": {"true": "t", "None": "n", "3": "i", "s": "s"}, "colour": "red",
        "when": "2026-01-02T03:04:05", "raw": "bytes", "name": "café ✓",
        "flag": False, "count": 12, "rate": 0.125,
        "mixed": ["a", 1.5, None, True, None], "mixed_pair": ["b", None],
        "point": {"a": 1, "b": [2.0, None]},
        "every_kind": [1, 2.5, True, "s", None, "red"],
    }
    return passed, stored


@clause("result.stored-metrics")
def check_stored_metrics_are_their_json_form(impl):
    from conformance.scenarios import new_script, run

    passed, stored = _stored_metrics_cases()
    folder, name = workspace(), "stored-metrics"
    # step 1's and step 2's metrics each take one way through an encoder that can skip
    # work: only str keys but a NaN, and JSON-native values but keys that are not strings
    late = {1: ({"late": float("nan")}, {"late": None}),
            2: ({"keyed": {None: 1, 2: [3]}}, {"keyed": {"None": 1, "2": [3]}})}
    first = new_script(impl, folder, journal="first", steps=3,
                       metrics={0: passed, **{k: v[0] for k, v in late.items()}})
    r1 = run(impl, first, num_workers=1, folder=folder, name=name)
    setting = f"{r1.setting}, step 0 reports metrics {passed!r}"
    assertions.succeeded(r1.outcome, setting)
    base = {"step": 0, "rank": 0, "attempt": 0}
    restored = impl.train.Result.from_path(r1.run_dir)
    got = {_name(c): m for c, m in restored.best_checkpoints}
    assertions.equal(got.get("ckpt-0000"), {**base, **stored},
                     "metrics of ckpt-0000 in Result.from_path(run folder).best_checkpoints",
                     setting)
    for step, (reported, kept) in late.items():
        assertions.equal(got.get(f"ckpt-{step:04d}"),
                         {"step": step, "rank": 0, "attempt": 0, **kept},
                         f"metrics of ckpt-{step:04d} (reported {reported!r}) in "
                         "Result.from_path(run folder).best_checkpoints", setting)

    second = new_script(impl, folder, journal="second", steps=4)
    r2 = run(impl, second, num_workers=1, folder=folder, name=name)
    setting2 = f"{setting}; a second fit() of name={name!r} resumes it"
    result2 = assertions.succeeded(r2.outcome, setting2)
    got2 = {_name(c): m for c, m in result2.best_checkpoints}
    assertions.equal(sorted(got2), ["ckpt-0000", "ckpt-0001", "ckpt-0002", "ckpt-0003"],
                     "checkpoints in the resumed fit()'s result.best_checkpoints", setting2)
    assertions.equal(got2["ckpt-0000"], {**base, **stored},
                     "metrics of the first fit()'s ckpt-0000 in the resumed fit()'s "
                     "result.best_checkpoints", setting2)
