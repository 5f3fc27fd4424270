"""Result: what ``fit()`` returns, and how to rebuild it later from the run folder."""

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Union

import pyarrow.fs

from reference._lazy import LazyModule
from reference.train._checkpoint import Checkpoint
from reference.train._exceptions import TrainingFailedError

pd = LazyModule("pandas")  # a worker never builds a frame

SNAPSHOT_FILE = "checkpoint_manager_snapshot.json"
_NOT_FOUND = object()


class FrameRows(list):
    """Rows a Result turns into its ``metrics_dataframe`` when that is first read, so a
    fit() does not import pandas for a frame nobody reads."""


class _Frame:
    """The ``metrics_dataframe`` field: a DataFrame, or None; given FrameRows, the frame is
    built from them on first access."""

    def __set_name__(self, owner, name):
        self._key = "_" + name

    def __get__(self, obj, owner=None):
        if obj is None:
            return None  # the field's default
        value = obj.__dict__.get(self._key)
        if isinstance(value, FrameRows):
            value = obj.__dict__[self._key] = pd.DataFrame(list(value))
        return value

    def __set__(self, obj, value):
        obj.__dict__[self._key] = value


@dataclass
class Result:
    """The outcome of a training run.

    Attributes:
        metrics: Rank 0's metrics of the latest report that carried a checkpoint (None if
            no checkpoint was reported).
        checkpoint: The latest persisted checkpoint (not the best one).
        error: None for a finished run (fit() raises instead of returning a failure).
        path: The run folder on the storage filesystem (URI scheme stripped).
        metrics_dataframe: One row per retained checkpoint's metrics, or None.
        best_checkpoints: ``(Checkpoint, metrics)`` pairs, worst to best, as retained by
            ``CheckpointConfig``.
        return_value: What the training function returned on rank 0.
    """

    metrics: Optional[dict[str, Any]]
    checkpoint: Optional[Checkpoint]
    error: Optional[TrainingFailedError]
    path: str
    metrics_dataframe: Optional["pd.DataFrame"] = _Frame()
    best_checkpoints: Optional[list[tuple[Checkpoint, dict[str, Any]]]] = None
    _storage_filesystem: Optional[pyarrow.fs.FileSystem] = None
    return_value: Optional[Any] = None

    @property
    def filesystem(self) -> pyarrow.fs.FileSystem:
        """The filesystem that holds ``path`` (local when none was recorded)."""
        return self._storage_filesystem or pyarrow.fs.LocalFileSystem()

    @property
    def config(self):
        raise DeprecationWarning(
            "The `config` property of a `Result` is deprecated: it only had a meaning for "
            "Ray Tune trials. Keep the config you passed to the trainer instead."
        )

    def get_best_checkpoint(self, metric: str, mode: str) -> Optional[Checkpoint]:
        """The checkpoint whose ``metric`` is highest (``mode='max'``) or lowest ('min').

        ``metric`` may name a nested value with '/' ("eval/loss"). Checkpoints without
        the metric are skipped.
        """
        if not self.best_checkpoints:
            raise RuntimeError(
                "No checkpoint exists in the trial directory! get_best_checkpoint() needs a "
                "run that reported at least one checkpoint."
            )
        if mode not in ("max", "min"):
            raise ValueError(f'Unsupported mode: {mode}. Please choose from ["min", "max"]!')
        candidates = [(checkpoint, value) for checkpoint, metrics in self.best_checkpoints
                      if (value := _lookup(metrics, metric)) is not None]
        if not candidates:
            # As in Ray, this reads self.metrics, so a Result without metrics raises
            # AttributeError here rather than RuntimeError.
            raise RuntimeError(
                f"Invalid metric name {metric}! "
                f"You may choose from the following metrics: {self.metrics.keys()}."
            )
        pick = max if mode == "max" else min
        return pick(candidates, key=lambda pair: pair[1])[0]

    @classmethod
    def from_path(cls, path: Union[str, os.PathLike],
                  storage_filesystem: Optional[pyarrow.fs.FileSystem] = None) -> "Result":
        """Rebuild the Result of a finished run from its folder ``<storage_path>/<name>``.

        ``path`` may be a URI; with ``storage_filesystem`` it is a path on that filesystem.
        The error and the return value are not stored, so they come back as None.
        """
        if storage_filesystem:
            fs, fs_path = storage_filesystem, str(path)
        else:
            fs, fs_path = pyarrow.fs.FileSystem.from_uri(str(path))
        if fs.get_file_info(fs_path).type == pyarrow.fs.FileType.NotFound:
            raise RuntimeError(
                f"Experiment folder {fs_path} doesn't exist. Pass the run folder "
                "<storage_path>/<name> of a finished run."
            )
        run_path = Path(fs_path.rstrip("/") or "/").as_posix()
        snapshot = Path(run_path, SNAPSHOT_FILE).as_posix()
        if fs.get_file_info(snapshot).type == pyarrow.fs.FileType.NotFound:
            raise RuntimeError(
                f"Failed to restore the Result object: {SNAPSHOT_FILE} doesn't exist in the "
                f"experiment folder {run_path}. Make sure this is the output folder of a "
                "training run that reported at least one checkpoint."
            )
        # Imported here: the storage package imports this module's neighbours.
        from reference.train._internal.storage.snapshot import read_result_state

        state = read_result_state(fs, run_path)
        best = [(Checkpoint(ckpt_path, fs), metrics) for ckpt_path, metrics in state.best]
        latest_path, latest_metrics = state.latest if state.latest else (None, None)
        return cls(
            metrics=latest_metrics,
            checkpoint=Checkpoint(latest_path, fs) if latest_path is not None else None,
            error=None,
            path=run_path,
            metrics_dataframe=FrameRows(m for _, m in best) if best else None,
            best_checkpoints=best,
            _storage_filesystem=fs,
        )


def _lookup(metrics: Any, key: str) -> Any:
    """``metrics[key]``, else the nested value named by 'a/b/0', else None.

    Only a missing key counts as absent: a bad list index or a non-numeric index into a
    sequence raises, as it does in Ray.
    """
    if key in metrics:
        return metrics[key]
    node = metrics
    for part in key.split("/"):
        if isinstance(node, Mapping):
            node = node.get(part, _NOT_FOUND)
        elif isinstance(node, Sequence):
            node = node[int(part)]
        else:
            node = _NOT_FOUND
        if node is _NOT_FOUND:
            return None
    return node
