"""`tune.RunConfig`, `tune.FailureConfig`, `tune.CheckpointConfig`: how an experiment runs,
where it stores its trials and how failed trials are retried (Ray 2.60's fields)."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping
from typing import Any, Optional, Union

DEFAULT_STORAGE_PATH = os.path.join(os.path.expanduser("~"), "ray_results")


def _count(owner: str, name: str, value, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{owner}({name}={value!r}): expected an int >= {minimum}.")


@dataclasses.dataclass
class FailureConfig:
    """`max_failures`: how often a trial is restarted after its process failed (-1: always),
    from its latest checkpoint when it reported one. `fail_fast`: stop the whole experiment at
    the first trial error (needs max_failures=0)."""

    max_failures: int = 0
    fail_fast: Union[bool, str] = False

    def __post_init__(self):
        _count("FailureConfig", "max_failures", self.max_failures, -1)
        if self.fail_fast not in (True, False, "raise"):
            raise ValueError(f"FailureConfig(fail_fast={self.fail_fast!r}): expected True, "
                             "False or 'raise'.")
        if self.fail_fast and self.max_failures != 0:
            raise ValueError("max_failures must be 0 if fail_fast=True.")


@dataclasses.dataclass
class CheckpointConfig:
    """Which of a trial's reported checkpoints stay on storage: all, or the `num_to_keep`
    best by `checkpoint_score_attribute` (the latest ones when no attribute is given)."""

    num_to_keep: Optional[int] = None
    checkpoint_score_attribute: Optional[str] = None
    checkpoint_score_order: Optional[str] = "max"
    checkpoint_frequency: Optional[int] = 0
    checkpoint_at_end: Optional[bool] = None

    def __post_init__(self):
        if self.num_to_keep is not None:
            _count("CheckpointConfig", "num_to_keep", self.num_to_keep, 1)
        if self.checkpoint_score_order not in ("max", "min"):
            raise ValueError(f"CheckpointConfig(checkpoint_score_order="
                             f"{self.checkpoint_score_order!r}): expected 'max' or 'min'.")
        _count("CheckpointConfig", "checkpoint_frequency", self.checkpoint_frequency, 0)
        if self.checkpoint_frequency or self.checkpoint_at_end:
            raise ValueError("CheckpointConfig(checkpoint_frequency=..., checkpoint_at_end=...)"
                             " apply to class trainables only; a function trainable saves a "
                             "checkpoint by passing it to `tune.report(checkpoint=...)`.")


@dataclasses.dataclass
class RunConfig:
    """The experiment's name and storage, trial failure handling, checkpoint retention,
    stopping criteria (`stop`: a dict of result thresholds, a `Stopper`, or a function
    `(trial_id, result) -> bool`), callbacks and how much progress is printed (`verbose`:
    0 silent, 1 trial events, 2 (default) events and results)."""

    name: Optional[str] = None
    storage_path: Optional[str] = None
    storage_filesystem: Any = None
    failure_config: Optional[FailureConfig] = None
    checkpoint_config: Optional[CheckpointConfig] = None
    sync_config: Any = None
    verbose: Optional[int] = None
    stop: Union[Mapping, Callable, Any, None] = None
    callbacks: Optional[list] = None
    progress_reporter: Any = None
    log_to_file: Any = False

    def __post_init__(self):
        if self.failure_config is None:
            self.failure_config = FailureConfig()
        if self.checkpoint_config is None:
            self.checkpoint_config = CheckpointConfig()
        if self.name is not None and (not isinstance(self.name, str) or not self.name
                                      or "/" in self.name):
            raise ValueError(f"RunConfig(name={self.name!r}): expected a non-empty folder "
                             "name without '/'.")
        if self.storage_path is not None:
            self.storage_path = os.fspath(self.storage_path)
            if "://" in self.storage_path and not self.storage_path.startswith("file://"):
                raise ValueError(f"RunConfig(storage_path={self.storage_path!r}): the "
                                 "reference's Tune stores experiments on a local path.")
            self.storage_path = self.storage_path.removeprefix("file://")
        if self.storage_filesystem is not None:
            raise ValueError("RunConfig(storage_filesystem=...): the reference's Tune stores "
                             "experiments on the local filesystem only.")
        if self.verbose is not None and (isinstance(self.verbose, bool)
                                         or self.verbose not in (0, 1, 2, 3)):
            raise ValueError(f"RunConfig(verbose={self.verbose!r}): expected 0, 1, 2 or 3.")
        if self.callbacks is not None:
            from reference.tune.callback import Callback

            for cb in self.callbacks:
                if not isinstance(cb, Callback):
                    raise TypeError(f"RunConfig(callbacks=[... {cb!r} ...]): expected "
                                    "reference.tune.Callback instances.")

    @property
    def resolved_storage_path(self) -> str:
        return os.path.abspath(os.path.expanduser(self.storage_path or DEFAULT_STORAGE_PATH))
