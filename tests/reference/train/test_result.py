"""Result: fields, get_best_checkpoint, from_path."""

from __future__ import annotations

import importlib.util
import json
import pickle

import pandas as pd
import pyarrow.fs
import pytest

from reference.train import Checkpoint, ControllerError, Result


def _result(best, metrics=None):
    pairs = None if best is None else [(Checkpoint(f"/ckpt/{i}"), m) for i, m in enumerate(best)]
    return Result(metrics=metrics, checkpoint=None, error=None, path="/run",
                  best_checkpoints=pairs)


def test_fields_and_defaults():
    result = Result({"a": 1}, Checkpoint("/c"), None, "/run")
    assert (result.metrics_dataframe, result.best_checkpoints, result.return_value) == (
        None, None, None)
    assert isinstance(result.filesystem, pyarrow.fs.LocalFileSystem)
    fs = pyarrow.fs.SubTreeFileSystem("/tmp", pyarrow.fs.LocalFileSystem())
    assert Result(None, None, None, "p", _storage_filesystem=fs).filesystem is fs


def test_repr_shows_every_field():
    result = Result({"a": 1}, Checkpoint("/c"), ControllerError(ValueError("boom")), "/run")
    assert repr(result) == (
        "Result(metrics={'a': 1}, checkpoint=Checkpoint(filesystem=local, path=/c), "
        "error=ControllerError('Training failed due to controller error:\\nboom'), "
        "path='/run', metrics_dataframe=None, best_checkpoints=None, "
        "_storage_filesystem=None, return_value=None)"
    )


def test_config_property_is_deprecated():
    with pytest.raises(DeprecationWarning, match="config"):
        _ = _result(None).config


def test_pickles():
    result = _result([{"x": 1}], metrics={"x": 1})
    copy = pickle.loads(pickle.dumps(result))
    assert copy.metrics == {"x": 1} and copy.best_checkpoints[0][0].path == "/ckpt/0"


@pytest.mark.parametrize("metric, mode, index", [
    ("loss", "min", 1), ("loss", "max", 2), ("eval/acc", "max", 0), ("eval/acc", "min", 2),
    ("hist/1", "max", 0),
])
def test_get_best_checkpoint(metric, mode, index):
    result = _result([
        {"loss": 2.0, "eval": {"acc": 0.9}, "hist": [0, 5]},
        {"loss": 1.0, "eval": {"acc": 0.5}},
        {"loss": 3.0, "eval": {"acc": 0.1}, "hist": [0, 1]},
    ], metrics={"loss": 3.0})
    assert result.get_best_checkpoint(metric, mode).path == f"/ckpt/{index}"


def test_get_best_checkpoint_prefers_a_flat_key_and_skips_missing_values():
    result = _result([{"a/b": 1}, {"a": {"b": 5}}, {"a": None}], metrics={})
    assert result.get_best_checkpoint("a/b", "max").path == "/ckpt/1"


@pytest.mark.parametrize("best, metric, mode, exc_type, match", [
    (None, "x", "max", RuntimeError, "No checkpoint exists"),
    ([], "x", "max", RuntimeError, "No checkpoint exists"),
    ([{"x": 1}], "x", "maximum", ValueError, "Unsupported mode"),
    ([{"x": 1}], "y", "max", RuntimeError, "Invalid metric name y"),
    ([{"x": {"y": 1}}], "x/z", "min", RuntimeError, "Invalid metric name"),
])
def test_get_best_checkpoint_errors(best, metric, mode, exc_type, match):
    with pytest.raises(exc_type, match=match):
        _result(best, metrics={"x": 1}).get_best_checkpoint(metric, mode)


def test_get_best_checkpoint_without_metrics_fails_like_ray():
    # Ray lists self.metrics.keys() in the message, so metrics=None gives AttributeError.
    with pytest.raises(AttributeError):
        _result([{"x": 1}], metrics=None).get_best_checkpoint("y", "max")


def test_from_path_of_a_missing_folder(tmp_path):
    with pytest.raises(RuntimeError, match="doesn't exist"):
        Result.from_path(tmp_path / "nope")


def test_from_path_of_a_folder_without_snapshot(tmp_path):
    with pytest.raises(RuntimeError, match="checkpoint_manager_snapshot.json doesn't exist"):
        Result.from_path(str(tmp_path))


def _has_snapshot_reader() -> bool:
    try:
        return importlib.util.find_spec("reference.train._internal.storage.snapshot") is not None
    except ModuleNotFoundError:
        return False


def _entry(name: str, metrics: dict) -> dict:
    return {"version": 0, "checkpoint_dir_name": name, "metrics": metrics}


@pytest.mark.skipif(not _has_snapshot_reader(),
                    reason="reference.train._internal.storage.snapshot is not written yet")
@pytest.mark.parametrize("trailing_slash", [False, True])
def test_from_path_reads_a_ray_snapshot(tmp_path, trailing_slash):
    """A snapshot in the format Ray 2.60 writes (worst -> best, then the latest)."""
    run = tmp_path / "run"
    names = ["checkpoint_3", "checkpoint_2", "checkpoint_1"]
    metrics = [{"step": 3, "nested": {"score": 1}}, {"step": 2, "nested": {"score": 2}},
               {"step": 1, "nested": {"score": 3}}]
    for name in names:
        (run / name).mkdir(parents=True)
    (run / ".validate_storage_marker").touch()
    (run / "checkpoint_manager_snapshot.json").write_text(json.dumps({
        "ray_version": "2.60.0",
        "checkpoint_results": [_entry(n, m) for n, m in zip(names, metrics, strict=True)],
        "checkpoint_report_indices": [3, 2, 1],
        "latest_checkpoint_result": _entry(names[0], metrics[0]),
        "pending_training_results": [], "pending_validation_specs": [],
        "current_report_index": 4, "validated_checkpoint_dir_names": [],
        "timed_out_validation_checkpoint_dir_names": [],
        "failed_validation_checkpoint_dir_names": [],
    }))
    result = Result.from_path(str(run) + ("/" if trailing_slash else ""))
    assert result.path == str(run)
    assert result.checkpoint.path == str(run / "checkpoint_3")
    assert result.metrics == metrics[0]
    assert [c.path for c, _ in result.best_checkpoints] == [str(run / n) for n in names]
    assert [m for _, m in result.best_checkpoints] == metrics
    pd.testing.assert_frame_equal(result.metrics_dataframe, pd.DataFrame(metrics))
    assert (result.error, result.return_value) == (None, None)
    assert isinstance(result.filesystem, pyarrow.fs.LocalFileSystem)
    assert result.get_best_checkpoint("nested/score", "max").path == str(run / "checkpoint_1")


@pytest.mark.slow
def test_a_fit_imports_pandas_only_when_its_frame_is_read(tmp_path):
    """fit() hands the Result its rows; pandas (about a second to import on a busy machine)
    loads when metrics_dataframe is first read, and the frame is the same."""
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent(f"""
        import sys
        import reference.train as train
        from reference.train.v2.api.data_parallel_trainer import DataParallelTrainer

        def loop():
            import os, tempfile
            d = tempfile.mkdtemp()
            open(os.path.join(d, "f"), "w").close()
            for step in range(2):
                train.report({{"step": step}}, checkpoint=train.Checkpoint.from_directory(d))

        result = DataParallelTrainer(loop, scaling_config=train.ScalingConfig(num_workers=1),
            run_config=train.RunConfig(name="r", storage_path={str(tmp_path)!r})).fit()
        print("before", "pandas" in sys.modules)
        print("rows", list(result.metrics_dataframe["step"]))
        print("after", "pandas" in sys.modules)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:3] == ["before False", "rows [0, 1]", "after True"], \
        done.stdout
