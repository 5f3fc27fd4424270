"""The backend developer API (``ray.train.backend``): what a framework plugs into a trainer.

A `BackendConfig` names its `Backend` (`backend_cls`) and the context manager the training
function runs in on every worker (`train_func_context`). The controller makes one backend
per fit (a backend class is a singleton, as in Ray) and calls its hooks in the driver:

    group started (workers up, their TrainContext set, no training function yet)
      -> on_start(worker_group, backend_config)         e.g. create a process group
      -> on_training_start(worker_group, backend_config)
      -> the training function starts on every rank, inside train_func_context()
    every rank returned, or the group failed (not on Ctrl-C / abort)
      -> on_shutdown(worker_group, backend_config)      e.g. destroy it
      -> the workers are stopped

`worker_group` runs functions on the workers (`execute`, `execute_async`, `execute_single`,
`execute_single_async`, `len()`, `get_workers()` with each worker's metadata and ranks,
`get_resources_per_worker()`); the `_async` forms return futures that `reference.get`
waits for, as `ray.get` does for Ray's object refs. See
`reference/train/_internal/worker_group/execution.py`.

Errors: an exception raised by on_start/on_training_start in the driver fails the run with
a ControllerError at once (the configuration is wrong, retrying cannot help); an exception
a worker raised inside an executed function (`reference.exceptions.RayTaskError`) is
retried twice with a new group, never charged to `max_failures`, then fails the run with a
ControllerError; a worker that died meanwhile (`RayActorError`) is a failed group start,
retried under `FailureConfig.controller_failure_limit`. on_shutdown's RayActorError and
RayTaskError are logged, as Ray logs them; any other exception from it after a successful
run fails the run with a ControllerError.

Three attributes are the reference's own: `preload_modules` (modules the cluster's node
supervisors import once so forked workers start with them loaded, e.g. torch),
`worker_env` (variables a worker process starts with, before anything of the run is
imported there) and `share_cuda_visible_devices`, which Ray has too (GPU workers of a node see all the node's
GPUs of the run; `TRAIN_ENABLE_SHARE_CUDA_VISIBLE_DEVICES` overrides it).
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any


class _Singleton(type):
    """One instance per class: `Backend()` returns the same object each time."""

    _instances: dict = {}
    _lock = threading.Lock()

    def __call__(cls, *args, **kwargs):
        with _Singleton._lock:
            if cls not in _Singleton._instances:
                _Singleton._instances[cls] = super().__call__(*args, **kwargs)
            return _Singleton._instances[cls]


class BackendConfig:
    """Configuration of a backend; `backend_cls` is the Backend it sets up."""

    @property
    def backend_cls(self) -> type[Backend]:
        return Backend

    @property
    def train_func_context(self):
        """A context manager class the training function runs in, on every worker."""
        return contextlib.nullcontext

    @property
    def framework(self):
        return None

    def to_dict(self) -> dict[str, Any]:
        """The fields worth recording about this configuration (none for the base)."""
        return {}


class Backend(metaclass=_Singleton):
    """The hooks a framework's backend overrides; the base does nothing (what
    `DataParallelTrainer` uses)."""

    #: GPU workers of a node get CUDA_VISIBLE_DEVICES = every GPU of the run on that node
    share_cuda_visible_devices: bool = False
    #: Ray's flag for backends that manage replica groups (torchft); not supported here
    has_replica_groups: bool = False
    #: modules worth importing once in the node supervisors (workers fork with them loaded)
    preload_modules: tuple = ()
    #: environment variables every worker process starts with, before the training
    #: function is unpickled (so before a framework it refers to is imported)
    worker_env: dict = {}

    def on_start(self, worker_group, backend_config: BackendConfig) -> None:
        """Runs in the driver after the group started, before the training function."""

    def on_shutdown(self, worker_group, backend_config: BackendConfig) -> None:
        """Runs in the driver before the group's workers are stopped."""

    def on_training_start(self, worker_group, backend_config: BackendConfig) -> None:
        """Runs in the driver right before the training function starts; the workers'
        train context is available to executed functions."""


__all__ = ["Backend", "BackendConfig"]
