"""`tune.Result`: one trial's outcome (Ray's `ray.tune.Result`, i.e. `ray.air.Result`)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any, Optional

import pyarrow.fs

from reference._lazy import LazyModule
from reference.train import Checkpoint
from reference.train import Result as _TrainResult

pd = LazyModule("pandas")  # a trial's worker never builds a frame


@dataclass
class Result(_TrainResult):
    """Attributes: `metrics` (the trial's last result, Tune's auto keys included),
    `checkpoint` (its latest checkpoint), `error` (what ended it in ERROR, else None),
    `path` (the trial folder), `metrics_dataframe` (one row per result), `best_checkpoints`
    (`(Checkpoint, metrics)` pairs on storage, oldest first) and `config`."""

    config: Optional[dict] = None

    @classmethod
    def from_path(cls, path, storage_filesystem=None) -> Result:
        """Rebuild a trial's Result from its folder (`params.json`, `result.json`, and its
        `checkpoint_*` folders)."""
        path = os.fspath(path)
        if not os.path.isdir(path):
            raise RuntimeError(f"Trial folder {path} doesn't exist.")
        results = []
        if os.path.exists(os.path.join(path, "result.json")):
            with open(os.path.join(path, "result.json")) as f:
                results = [json.loads(line) for line in f if line.strip()]
        config = None
        if os.path.exists(os.path.join(path, "params.json")):
            with open(os.path.join(path, "params.json")) as f:
                config = json.load(f)
        best = [(Checkpoint(os.path.join(path, r["checkpoint_dir_name"])), r)
                for r in results if r.get("checkpoint_dir_name")
                and os.path.isdir(os.path.join(path, r["checkpoint_dir_name"]))]
        error = None
        if os.path.exists(os.path.join(path, "error.txt")):
            with open(os.path.join(path, "error.txt")) as f:
                from reference.tune.error import TuneError

                error = TuneError(f.read())
        return cls(metrics=results[-1] if results else {},
                   checkpoint=best[-1][0] if best else None, error=error, path=path,
                   metrics_dataframe=folder_frame(path, bool(results)), best_checkpoints=best,
                   _storage_filesystem=storage_filesystem or pyarrow.fs.LocalFileSystem(),
                   config=config)

    def __repr__(self) -> str:
        shown = {k: v for k, v in (self.metrics or {}).items() if k not in _AUTO_KEYS}
        return (f"Result(metrics={shown!r}, path={self.path!r}, "
                f"checkpoint={self.checkpoint!r}" + (f", error={self.error!r}" if self.error
                                                     else "") + ")")


_AUTO_KEYS = {"timestamp", "checkpoint_dir_name", "done", "training_iteration", "trial_id",
              "date", "time_this_iter_s", "time_total_s", "pid", "hostname", "node_ip",
              "config", "time_since_restore", "iterations_since_restore", "experiment_tag",
              "should_checkpoint"}


def folder_frame(path: str, reported: bool) -> pd.DataFrame:
    """A trial's results as Ray's ResultGrid reads them, from what its loggers wrote:
    `result.json` if there is one (nested keys joined by "/"), else `progress.csv`, else
    (the loggers were off) an empty frame and a warning; empty too when nothing was
    `reported`."""
    import logging

    if not reported:
        return pd.DataFrame()
    json_path, csv_path = os.path.join(path, "result.json"), os.path.join(path, "progress.csv")
    if os.path.exists(json_path):
        with open(json_path) as f:
            rows = [json.loads(line) for line in f.read().rstrip("\n").split("\n") if line]
        return pd.json_normalize(rows, sep="/") if rows else pd.DataFrame()
    if os.path.exists(csv_path):
        return pd.read_csv(csv_path, dtype={"trial_id": str})
    logging.getLogger(__name__).warning(
        "Could not fetch metrics for %s: both result.json and progress.csv were not found "
        "there (TUNE_DISABLE_AUTO_CALLBACK_LOGGERS=1 turns off the loggers that write them)",
        path)
    return pd.DataFrame()


def trial_result(trial) -> Result:
    """The Result of a trial the controller ran."""
    metrics: dict[str, Any] = dict(trial.last_result)
    if metrics:
        metrics["experiment_tag"] = trial.experiment_tag
    return Result(metrics=metrics, checkpoint=trial.checkpoint, error=trial.error,
                  path=trial.path,
                  metrics_dataframe=folder_frame(trial.path, bool(trial.last_result)),
                  best_checkpoints=list(trial.checkpoints),
                  _storage_filesystem=pyarrow.fs.LocalFileSystem(), config=trial.config)
