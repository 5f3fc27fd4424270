"""Stopping criteria: `tune.RunConfig(stop=...)` as a dict of thresholds, a function or a
`Stopper` object, all turned into one `Stopper`."""

from __future__ import annotations

import abc
import logging
from collections.abc import Callable, Mapping

logger = logging.getLogger(__name__)


class Stopper(abc.ABC):
    """`__call__(trial_id, result)`: True stops that trial; `stop_all()`: True ends the
    experiment."""

    @abc.abstractmethod
    def __call__(self, trial_id: str, result: dict) -> bool: ...

    def stop_all(self) -> bool:
        return False


class _ThresholdStopper(Stopper):
    """Stops a trial once any result key reaches its threshold (`>=`, as Ray compares);
    nested keys are written `a/b`. A key the trial never reports is warned about once and
    never stops it, as in Ray."""

    def __init__(self, thresholds: Mapping):
        for key in thresholds:
            if isinstance(thresholds[key], Mapping):
                raise ValueError("Stopping criteria is now flattened by default. Use forward "
                                 "slashes to nest values `key1/key2/key3`.")
        self.thresholds = dict(thresholds)
        self._warned = False

    def __call__(self, trial_id, result) -> bool:
        flat = flatten(result)
        for key, limit in self.thresholds.items():
            if key not in flat:
                if not self._warned:
                    self._warned = True
                    logger.warning("Stopping criterion %r not found in result dict! Available "
                                   "keys are %s. If %r is never reported, the run will "
                                   "continue until training is finished.", key,
                                   sorted(flat), key)
            elif flat[key] >= limit:
                return True
        return False


class _FunctionStopper(Stopper):
    def __init__(self, fn: Callable):
        self.fn = fn

    def __call__(self, trial_id, result) -> bool:
        return bool(self.fn(trial_id, result))


def flatten(result: Mapping, prefix: str = "") -> dict:
    """`{"a": {"b": 1}}` -> `{"a/b": 1}`, as Ray flattens results for stopping and tables."""
    flat = {}
    for key, value in result.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            flat.update(flatten(value, name + "/"))
        else:
            flat[name] = value
    return flat


def as_stopper(stop) -> Stopper | None:
    if stop is None:
        return None
    if isinstance(stop, Stopper):
        return stop
    if isinstance(stop, Mapping):
        return _ThresholdStopper(stop)
    if callable(stop):
        return _FunctionStopper(stop)
    raise ValueError(f"RunConfig(stop={stop!r}): expected a dict of result thresholds, a "
                     "function (trial_id, result) -> bool, or a tune.Stopper.")
