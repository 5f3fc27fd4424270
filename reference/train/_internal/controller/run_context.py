"""The run's context handed to every UserCallback hook (Ray's TrainRunContext): the
configs the trainer was built with, and an id of this fit()."""

from __future__ import annotations

import dataclasses
import functools
import uuid
from typing import Any

#: the UserCallback hooks that take run_context
HOOKS = ("after_report", "after_exception")


@dataclasses.dataclass
class TrainRunContext:
    run_config: Any
    train_loop_config: dict | None
    scaling_config: Any
    backend_config: Any
    dataset_config: Any
    run_id: str = dataclasses.field(init=False, default_factory=lambda: uuid.uuid4().hex)

    def get_run_config(self) -> Any:
        return self.run_config

    @classmethod
    def of(cls, trainer) -> TrainRunContext:
        return cls(run_config=trainer.run_config,
                   train_loop_config=getattr(trainer, "train_loop_config", None),
                   scaling_config=trainer.scaling_config,
                   backend_config=trainer.backend_config,
                   dataset_config=getattr(trainer, "dataset_config", None))


class WithRunContext:
    """A user callback whose hooks receive `run_context` whatever the caller passes for it
    (the controller knows hooks and their arguments, not the trainer's configs)."""

    def __init__(self, callback: Any, run_context: TrainRunContext):
        self._callback, self._run_context = callback, run_context

    def __getattr__(self, name: str):
        attribute = getattr(self._callback, name)  # a hook it lacks stays missing
        if name not in HOOKS:
            return attribute
        return functools.partial(_with_context, attribute, self._run_context)


def _with_context(hook, context, /, *args, **kwargs):
    kwargs["run_context"] = context
    return hook(*args, **kwargs)
