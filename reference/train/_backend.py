"""Backends: the framework-specific setup around a worker group (process groups, env vars).

A backend is a small class the worker group consults when it starts a group:
`worker_env` adds environment variables per rank, `worker_setup` / `worker_teardown` return
picklable callables every worker runs before / after the training function (e.g. creating
and destroying a torch process group), and `local_context` lets local mode pick up an
external launcher (torchrun). `BackendConfig.backend_cls` names the backend; the base
backend does nothing, which is what `DataParallelTrainer` uses.
"""

from __future__ import annotations

from typing import Callable


class Backend:
    #: modules worth importing once in the node supervisors (workers fork with them loaded)
    preload_modules: tuple = ()

    def worker_env(self, backend_config, slots: list) -> list[dict]:
        """Extra environment per rank (`slots[i]` is rank i's WorkerSlot)."""
        return [{} for _ in slots]

    def worker_setup(self, backend_config) -> Callable | None:
        """Runs in every worker as `fn(train_context)` before the training function."""
        return None

    def worker_teardown(self, backend_config) -> Callable | None:
        """Runs in every worker as `fn(train_context)` after the training function returned."""
        return None

    def local_context(self, backend_config, experiment_name: str):
        """The TrainContext of local mode, or None for the single-process default."""
        return None


class BackendConfig:
    """Configuration of a backend; `backend_cls` is the Backend it sets up."""

    @property
    def backend_cls(self) -> type[Backend]:
        return Backend

    @property
    def train_func_context(self):
        import contextlib

        return contextlib.nullcontext
