"""`ValidationConfig`, `ValidationTaskConfig` and the `ValidationFn` protocol (Ray 2.60,
alpha): how a trainer validates reported checkpoints.

A trainer takes ``validation_config=ValidationConfig(fn, task_config, ray_remote_kwargs)``;
``report(..., checkpoint=..., validation=True)`` asks for ``fn(checkpoint,
**task_config.fn_kwargs)``, and ``validation=ValidationTaskConfig(fn_kwargs=...)`` overrides
the defaults for that one report (its keys win on conflicts).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Protocol


class ValidationFn(Protocol):
    """A function that validates a checkpoint: ``fn(checkpoint, **kwargs) -> dict`` of
    metrics. The checkpoint is always the first argument."""

    def __call__(self, checkpoint: Any, **kwargs: Any) -> dict: ...


@dataclass
class ValidationTaskConfig:
    """One validation task: keyword arguments for the validation function (JSON values;
    ``None`` means ``{}``) and a timeout in seconds (``None``: no timeout)."""

    fn_kwargs: Optional[dict[str, Any]] = None
    timeout_s: Optional[float] = None

    def __post_init__(self):
        if self.fn_kwargs is None:
            self.fn_kwargs = {}
        # Ray asserts this; raised explicitly so that `python -O` keeps the check.
        if not (self.timeout_s is None or self.timeout_s > 0):
            raise AssertionError(
                "The `timeout_s` should be None or greater than zero, actual value: "
                f"{self.timeout_s}. Got ValidationTaskConfig(timeout_s={self.timeout_s!r}); "
                "pass a positive number of seconds, or None for no timeout.")


class ValidationConfig:
    """What a trainer validates checkpoints with: ``fn``, the default task (``None`` means
    ``ValidationTaskConfig()``) and the options of the task that runs it (Ray's
    ``ray.remote`` keyword arguments; ``None`` means ``{}``)."""

    def __init__(self, fn: ValidationFn, task_config: Optional[ValidationTaskConfig] = None,
                 ray_remote_kwargs: Optional[dict[str, Any]] = None):
        self.fn = fn
        self.task_config = ValidationTaskConfig() if task_config is None else task_config
        self.ray_remote_kwargs = {} if ray_remote_kwargs is None else ray_remote_kwargs

    def __repr__(self) -> str:
        return (f"ValidationConfig(fn={self.fn!r}, task_config={self.task_config!r}, "
                f"ray_remote_kwargs={self.ray_remote_kwargs!r})")
