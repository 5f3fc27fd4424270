"""`DataContext` and `ExecutionOptions`: the settings Ray Data reads from the driver.

The reference executes in the consuming process, so most of Ray's knobs have nothing to
act on; they are kept (and copied to the training workers, as Ray does) so that code that
sets them runs unchanged. What the reference honours is documented per field.
"""

from __future__ import annotations

import copy
import dataclasses
import threading


@dataclasses.dataclass
class ExecutionResources:
    cpu: float | None = None
    gpu: float | None = None
    object_store_memory: float | None = None


@dataclasses.dataclass
class ExecutionOptions:
    """Accepted for Ray compatibility; the reference's execution is always in order and
    streams in the consuming process (`preserve_order` holds whatever its value)."""

    resource_limits: ExecutionResources = dataclasses.field(default_factory=ExecutionResources)
    exclude_resources: ExecutionResources = dataclasses.field(
        default_factory=ExecutionResources)
    locality_with_output: bool | list = False
    preserve_order: bool = False
    actor_locality_enabled: bool = True
    verbose_progress: bool = False


@dataclasses.dataclass
class DataContext:
    execution_options: ExecutionOptions = dataclasses.field(default_factory=ExecutionOptions)
    target_max_block_size: int | None = 128 * 1024 * 1024
    enable_progress_bars: bool = True

    _lock = threading.Lock()
    _current = None

    @classmethod
    def get_current(cls) -> DataContext:
        with cls._lock:
            if cls._current is None:
                cls._current = cls()
            return cls._current

    @classmethod
    def _set_current(cls, context: DataContext) -> None:
        with cls._lock:
            cls._current = copy.deepcopy(context)
