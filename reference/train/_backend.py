"""Backends: the framework-specific setup around a worker group (process groups, env vars).

A backend is a small class with hooks the controller calls; `BackendConfig.backend_cls`
names it. The base backend does nothing, which is what `DataParallelTrainer` uses.
"""

from __future__ import annotations


class Backend:
    """Hooks around a worker group's life. Each receives the worker group and the config."""

    share_cuda_visible_devices: bool = False

    def on_start(self, worker_group, backend_config) -> None:
        """After the workers started, before the training function runs."""

    def on_training_start(self, worker_group, backend_config) -> None:
        """Right before the training function runs on every worker."""

    def on_shutdown(self, worker_group, backend_config) -> None:
        """Before the workers are stopped."""


class BackendConfig:
    """Configuration of a backend; `backend_cls` is the Backend it sets up."""

    @property
    def backend_cls(self) -> type[Backend]:
        return Backend

    @property
    def train_func_context(self):
        import contextlib

        return contextlib.nullcontext
