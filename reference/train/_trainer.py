"""DataParallelTrainer: runs one training function on a group of workers (or in the driver).

`fit()` returns a Result or raises the run's TrainingFailedError; with
`ScalingConfig(num_workers=0)` it runs the function in the driver (local mode).
"""

from __future__ import annotations

import contextlib
import inspect
from typing import Any, Callable

from reference.train._config import RunConfig, ScalingConfig
from reference.train._context import TrainContext
from reference.train.backend import BackendConfig

#: Ray's message, then the fix
_RESTORE_DEPRECATED = (
    "The `restore` and `can_restore` APIs are deprecated and will be removed in a future "
    "release. See this issue for more context and migration options: "
    "https://github.com/ray-project/ray/issues/49454. To resume a run, fit() a new trainer "
    "with the same `RunConfig(storage_path, name)`: it starts from the run's latest "
    "checkpoint (`get_checkpoint()` in the training function).")


def _required_params(fn: Callable) -> int:
    params = inspect.signature(fn).parameters.values()
    return sum(1 for p in params
               if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))


def construct_train_fn(fn: Callable, config: dict | None, arg_name: str,
                       context: Callable = contextlib.nullcontext) -> Callable[[], Any]:
    """A zero-argument callable that runs fn, with the config dict if it takes one, inside
    `context()` (the backend config's `train_func_context`)."""
    required = _required_params(fn)
    if required > 1:
        raise ValueError(
            f"{arg_name}={getattr(fn, '__name__', fn)!r} takes {required} required arguments; "
            "it must take none or one (the `train_loop_config` dict)."
        )
    takes_config = required == 1
    config = {} if config is None else config

    def train_fn():
        with context():
            return fn(config) if takes_config else fn()

    return train_fn


class DataParallelTrainer:
    def __init__(
        self,
        train_loop_per_worker: Callable[[], Any] | Callable[[dict], Any],
        *,
        train_loop_config: dict | None = None,
        backend_config: BackendConfig | None = None,
        scaling_config: ScalingConfig | None = None,
        run_config: RunConfig | None = None,
        datasets: dict | None = None,
        dataset_config=None,
        resume_from_checkpoint=None,
        metadata: dict | None = None,
        validation_config=None,
    ):
        self.train_loop_per_worker = train_loop_per_worker
        self.train_loop_config = train_loop_config
        self.backend_config = backend_config or BackendConfig()
        self.scaling_config = scaling_config or ScalingConfig()
        self.run_config = run_config or RunConfig()
        self.datasets = datasets or {}
        self.dataset_config = dataset_config
        self.validation_config = validation_config
        if resume_from_checkpoint is not None:
            raise DeprecationWarning(
                "`resume_from_checkpoint` is deprecated: a run resumes from the latest "
                "checkpoint of the run with the same `RunConfig(storage_path, name)`; read it "
                "with `get_checkpoint()` inside the training function.")
        if metadata is not None:
            raise DeprecationWarning(
                "`metadata` is deprecated: pass it through `train_loop_config` or save it "
                "inside the checkpoint.")
        if not isinstance(self.run_config, RunConfig):
            raise ValueError(f"run_config={self.run_config!r}: expected a "
                             "reference.train.RunConfig.")
        if not isinstance(self.scaling_config, ScalingConfig):
            raise ValueError(f"scaling_config={self.scaling_config!r}: expected a "
                             "reference.train.ScalingConfig.")

    @classmethod
    def restore(cls, *args, **kwargs):
        """Deprecated, as in Ray 2.60: raises DeprecationWarning. A run resumes by itself:
        fit() a trainer with the same `RunConfig(storage_path, name)`."""
        raise DeprecationWarning(_RESTORE_DEPRECATED)

    @classmethod
    def can_restore(cls, *args, **kwargs):
        """Deprecated, as in Ray 2.60: raises DeprecationWarning (see `restore`)."""
        raise DeprecationWarning(_RESTORE_DEPRECATED)

    def _train_fn(self) -> Callable[[], Any]:
        return construct_train_fn(self.train_loop_per_worker, self.train_loop_config,
                                  "train_loop_per_worker",
                                  self.backend_config.train_func_context)

    def _local_context(self) -> TrainContext:
        return TrainContext(experiment_name=self.run_config.name)

    def fit(self):
        train_fn = self._train_fn()
        if self.scaling_config.num_workers == 0:
            from reference.train._internal.local_mode import run_local

            return run_local(train_fn, self._local_context(), self.datasets)
        from reference.train._internal.controller.run import run_distributed

        return run_distributed(self, train_fn)
