"""ScalingConfig, RunConfig, FailureConfig, CheckpointConfig and LoggingConfig.

Plain dataclasses: field names, order and defaults are those of Ray Train, so positional
and keyword calls mean the same on both. ``__post_init__`` validates with the named checks of
``_validation`` in Ray's order, so when several rules are broken the same one wins.
"""

import logging
import os
import pathlib
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, Optional, Union

import pyarrow.fs

from reference.train import _validation as v
from reference.train._callback import RayTrainCallback, UserCallback

logger = logging.getLogger(__name__)

_DEPRECATED = v.DEPRECATED
_RAY_TUNE_FIX = ("It was a Ray Tune option; remove it, or run training as a single Ray Tune "
                 "trial if you rely on it.")
_MIGRATION = v.RAY_MIGRATION_GUIDE
# Ray 2.60's messages (ray/train/v2/api/config.py, v2/_internal/migration_utils.py), which
# ours start with word for word so that code matching Ray's text matches ours.
_RAY_TRAINER_RESOURCES = (
    "`ray.train.ScalingConfig(trainer_resources)` is deprecated. This parameter was an "
    "advanced configuration that specified resources for the Ray Train driver actor, which "
    "doesn't need to reserve logical resources because it doesn't perform any heavy "
    "computation. Only the `resources_per_worker` parameter should be used to specify "
    f"resources for the training workers. {_MIGRATION}")
_RAY_FAIL_FAST = (
    "`ray.train.FailureConfig(fail_fast)` is deprecated since it is only relevant in the "
    "context of multiple trials running in Ray Tune. This parameter is still available in "
    f"`ray.tune.FailureConfig` for passing into a `ray.tune.Tuner`. {_MIGRATION}")
_RAY_CHECKPOINT_OPTION = (
    "`{}` is deprecated since it does not apply to user-defined training functions. Please "
    "remove this argument from your CheckpointConfig.")
_RAY_RUN_CONFIG_OPTION = (
    "`RunConfig({})` is deprecated. This configuration was a Ray Tune API that did not "
    "support Ray Train usage well, so we are dropping support going forward. If you heavily "
    "rely on these configurations, you can run Ray Train as a single Ray Tune trial. See "
    "this issue for more context: https://github.com/ray-project/ray/issues/49454")
_RAY_CALLBACKS = (
    "All callbacks must be instances of `ray.train.UserCallback`. Passing in a Ray Tune "
    "callback is no longer supported. See this issue for more context: "
    "https://github.com/ray-project/ray/issues/49454")


@dataclass
class ScalingConfig:
    """How many workers a run uses and what each one reserves.

    ``num_workers`` is an int, 0 for local mode (the training function runs in the driver),
    or a ``(min_workers, max_workers)`` tuple for elastic training. Each worker reserves one
    CPU, or one GPU under ``use_gpu``, or one TPU host's chips under ``use_tpu``, unless
    ``resources_per_worker`` says otherwise. ``placement_strategy`` is only checked when the
    workers are placed.
    """

    trainer_resources: Optional[dict] = None
    num_workers: Union[int, tuple[int, int]] = 1
    use_gpu: bool = False
    resources_per_worker: Optional[dict] = None
    placement_strategy: str = "PACK"
    accelerator_type: Optional[str] = None
    label_selector: Optional[Union[dict[str, str], list[dict[str, str]]]] = None
    use_tpu: bool = False
    topology: Optional[str] = None
    elastic_resize_monitor_interval_s: float = 60.0

    def __post_init__(self):
        v.check_not_deprecated(
            "ScalingConfig", "trainer_resources", self.trainer_resources, None,
            "The controller reserves no resources; remove trainer_resources and size the "
            "workers with resources_per_worker.", ray_text=_RAY_TRAINER_RESOURCES)
        v.check_num_workers(self.num_workers)
        v.check_non_negative("ScalingConfig", "elastic_resize_monitor_interval_s",
                             self.elastic_resize_monitor_interval_s)
        v.check_worker_bounds(self.num_workers, self.min_workers, self.max_workers)
        self._validate_tpu_config()
        v.check_label_selector_length(self.label_selector, self.max_workers)
        if self.num_workers == 0:
            logger.info("Running in local mode: the training function runs in this process.")
        if self.resources_per_worker:
            v.check_gpu_request(self.use_gpu, self.num_gpus_per_worker)
        # Not a rule of Ray's ScalingConfig, which takes {'CPU': '1'} and only fails to place
        # the workers in fit(); checked last so that whatever Ray rejects is rejected the same.
        v.check_resource_amounts(self.resources_per_worker)

    def _validate_tpu_config(self) -> None:
        v.check_accelerator_choice(self.use_gpu, self.use_tpu)
        v.check_tpu_request(self.use_tpu, self.num_tpus_per_worker)
        if not self.use_tpu:
            return
        v.check_tpu_slice_settings(self.max_workers, self.topology, self.accelerator_type,
                                   self.label_selector)
        if not (self.topology and self.accelerator_type):
            return
        try:
            per_slice, resources = v.tpu_slice_workers(
                self.topology, self.accelerator_type, self.resources_per_worker)
        except Exception as exc:
            raise ValueError(
                f"Could not parse TPU topology details for type={self.accelerator_type}, "
                f"topology={self.topology}. Error: {exc}\nPass a topology such as '4x4' or "
                "'2x2x2' and an accelerator_type such as 'TPU-V6E'."
            ) from exc
        v.check_slice_multiple("num_workers", self.max_workers, per_slice, self.topology)
        v.check_slice_multiple("min_workers", self.min_workers, per_slice, self.topology)
        if self.resources_per_worker is None:
            self.resources_per_worker = resources

    @property
    def elasticity_enabled(self) -> bool:
        return isinstance(self.num_workers, tuple)

    @property
    def min_workers(self) -> int:
        return self.num_workers if isinstance(self.num_workers, int) else self.num_workers[0]

    @property
    def max_workers(self) -> int:
        return self.num_workers if isinstance(self.num_workers, int) else self.num_workers[1]

    @property
    def _resources_per_worker_not_none(self) -> dict:
        """What one worker reserves; zero entries are dropped (so GPU: 0 means the default)."""
        if self.resources_per_worker is None:
            if self.use_tpu:
                return {"TPU": 1}
            resources = {"GPU": 1} if self.use_gpu else {"CPU": 1}
        else:
            resources = {k: n for k, n in self.resources_per_worker.items() if n != 0}
        if self.use_gpu:
            resources.setdefault("GPU", 1)
        if self.accelerator_type:
            # A tiny amount of the node's accelerator-type resource pins workers to such nodes.
            resources.setdefault(f"accelerator_type:{self.accelerator_type}", 0.001)
        return resources

    @property
    def _trainer_resources_not_none(self) -> dict:
        return {}

    def _label_selector_per_worker(self, num_workers: int) -> Optional[list[dict[str, str]]]:
        if isinstance(self.label_selector, list):
            return [dict(s) for s in self.label_selector[:num_workers]]
        if isinstance(self.label_selector, dict):
            return [dict(self.label_selector) for _ in range(num_workers)]
        return None

    @property
    def num_cpus_per_worker(self):
        return self._resources_per_worker_not_none.get("CPU", 0)

    @property
    def num_gpus_per_worker(self):
        return self._resources_per_worker_not_none.get("GPU", 0)

    @property
    def num_tpus_per_worker(self):
        return self._resources_per_worker_not_none.get("TPU", 0)

    @property
    def additional_resources_per_worker(self) -> dict:
        return {k: n for k, n in self._resources_per_worker_not_none.items()
                if k not in ("CPU", "GPU")}

    @property
    def total_resources(self) -> dict:
        """Resources of all workers at max_workers, as floats (the controller takes none)."""
        total: dict = {}
        for key, amount in self._resources_per_worker_not_none.items():
            total[key] = total.get(key, 0.0) + amount * self.max_workers
        return total


@dataclass
class CheckpointConfig:
    """Which reported checkpoints are kept: all by default, else the best ``num_to_keep``
    by ``checkpoint_score_attribute`` (most recent without one) plus always the latest."""

    num_to_keep: Optional[int] = None
    checkpoint_score_attribute: Optional[str] = None
    checkpoint_score_order: Literal["max", "min"] = "max"
    checkpoint_frequency: Union[Optional[int], Literal["DEPRECATED"]] = _DEPRECATED
    checkpoint_at_end: Union[Optional[bool], Literal["DEPRECATED"]] = _DEPRECATED

    def __post_init__(self):
        fix = ("It does not apply to training functions, which checkpoint by passing "
               "checkpoint= to report(); remove it.")
        for name in ("checkpoint_frequency", "checkpoint_at_end"):
            v.check_not_deprecated("CheckpointConfig", name, getattr(self, name), _DEPRECATED,
                                   fix, ray_text=_RAY_CHECKPOINT_OPTION.format(name))
        v.check_positive_or_none("CheckpointConfig", "num_to_keep", self.num_to_keep)
        v.check_one_of("CheckpointConfig", "checkpoint_score_order",
                       self.checkpoint_score_order, ("max", "min"))


@dataclass
class FailureConfig:
    """Retry budgets: worker-group failures, controller failures and preemptions are
    counted separately; -1 means unlimited, 0 means no retry."""

    max_failures: int = 0
    fail_fast: Union[bool, str] = _DEPRECATED
    controller_failure_limit: int = -1
    max_preemption_failures: int = -1
    relax_collectives_on_preemption: bool = False
    preemption_grace_s: float = 0.0

    def __post_init__(self):
        v.check_not_deprecated("FailureConfig", "fail_fast", self.fail_fast, _DEPRECATED,
                               "Use max_failures=0 to fail on the first error.",
                               ray_text=_RAY_FAIL_FAST)


@dataclass
class LoggingConfig:
    """Log level of the library's own loggers; any standard name, case-insensitive."""

    log_level: str = "INFO"

    def __post_init__(self):
        self.log_level = v.check_log_level(self.log_level)


@dataclass
class RunConfig:
    """Where a run stores its results and how it handles checkpoints and failures.

    ``name`` defaults to ``ray_train_run-<date>_<time>``; ``storage_path`` to
    ``~/ray_results`` (a local path or a URI such as ``s3://bucket/dir``; with
    ``storage_filesystem`` it is a path on that filesystem).
    """

    name: Optional[str] = None
    storage_path: Optional[str] = None
    storage_filesystem: Optional[pyarrow.fs.FileSystem] = None
    failure_config: Optional[FailureConfig] = None
    checkpoint_config: Optional[CheckpointConfig] = None
    callbacks: Optional[list[UserCallback]] = None
    worker_runtime_env: Optional[dict] = None
    logging_config: Optional[LoggingConfig] = None

    sync_config: str = _DEPRECATED
    verbose: str = _DEPRECATED
    stop: str = _DEPRECATED
    progress_reporter: str = _DEPRECATED
    log_to_file: str = _DEPRECATED

    def __post_init__(self):
        if self.storage_path is None:
            self.storage_path = default_storage_path()
        # Falsy values (not only None) are replaced, so RunConfig(failure_config=0) is valid.
        self.failure_config = self.failure_config or FailureConfig()
        self.checkpoint_config = self.checkpoint_config or CheckpointConfig()
        self.logging_config = self.logging_config or LoggingConfig()
        if isinstance(self.storage_path, pathlib.Path):
            self.storage_path = self.storage_path.as_posix()
        for name in ("sync_config", "verbose", "stop", "progress_reporter", "log_to_file"):
            v.check_not_deprecated("RunConfig", name, getattr(self, name), _DEPRECATED,
                                   _RAY_TUNE_FIX, ray_text=_RAY_RUN_CONFIG_OPTION.format(name))
        if not self.name:
            self.name = f"ray_train_run-{datetime.today().strftime('%Y-%m-%d_%H-%M-%S')}"
        self.callbacks = self.callbacks or []
        self.worker_runtime_env = self.worker_runtime_env or {}
        v.check_all_instances("RunConfig", "callbacks", self.callbacks, RayTrainCallback,
                              "UserCallback", "Subclass reference.train.UserCallback.",
                              ray_text=_RAY_CALLBACKS)
        v.check_instance("RunConfig", "checkpoint_config", self.checkpoint_config,
                         CheckpointConfig, "Use `ray.train.CheckpointConfig` instead.")
        v.check_instance("RunConfig", "failure_config", self.failure_config,
                         FailureConfig, "Use `ray.train.FailureConfig` instead.")


def default_storage_path() -> str:
    """``~/ray_results`` expanded, read at call time (so a changed HOME is honoured)."""
    return os.path.expanduser("~/ray_results")

