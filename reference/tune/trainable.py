"""`tune.with_parameters` and `tune.with_resources`: wrap a function trainable so each
trial gets extra arguments, or asks for other resources than 1 CPU."""

from __future__ import annotations

import functools
import inspect
from typing import Callable


class Trainable:
    """Ray's class-based trainable API. The reference's Tuner runs function trainables
    only; a `Trainable` subclass is rejected with a TuneError when the Tuner is built."""


def with_parameters(trainable: Callable, **kwargs) -> Callable:
    """`trainable(config, **kwargs)` for every trial: pass large or unpicklable-by-value
    objects (datasets, models) once instead of through the config."""
    if not callable(trainable) or isinstance(trainable, type):
        raise ValueError(f"with_parameters(trainable={trainable!r}): expected a function "
                         "taking `config`.")
    params = inspect.signature(trainable).parameters
    missing = [k for k in kwargs if k not in params and not any(
        p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())]
    if missing:
        raise ValueError(f"with_parameters(...): the trainable {trainable.__name__!r} has no "
                         f"parameter(s) {missing}; its signature is "
                         f"{inspect.signature(trainable)}.")

    @functools.wraps(trainable)
    def inner(config):
        return trainable(config, **kwargs)

    inner._tune_resources = getattr(trainable, "_tune_resources", None)
    return inner


def with_resources(trainable: Callable, resources) -> Callable:
    """Run each trial of `trainable` with `resources`: a dict (`{"cpu": 2, "gpu": 1}`; other
    keys are custom resources), a PlacementGroupFactory, or a function of the config that
    returns one of those."""
    from reference.tune._controller import normalize_resources

    if not callable(trainable) or isinstance(trainable, type):
        raise ValueError(f"with_resources(trainable={trainable!r}): expected a function "
                         "taking `config`.")
    if not callable(resources):
        normalize_resources(resources)  # named errors now, not at the first trial

    @functools.wraps(trainable)
    def inner(config):
        return trainable(config)

    inner._tune_resources = resources
    return inner


class PlacementGroupFactory:
    """Resources of a trial as bundles; the reference runs a trial's function in the first
    bundle, so only that bundle's resources are requested for it."""

    def __init__(self, bundles: list, strategy: str = "PACK"):
        if not bundles or not all(isinstance(b, dict) for b in bundles):
            raise ValueError(f"PlacementGroupFactory(bundles={bundles!r}): expected a "
                             "non-empty list of resource dicts.")
        self.bundles, self.strategy = [dict(b) for b in bundles], strategy

    @property
    def required_resources(self) -> dict:
        return dict(self.bundles[0])
