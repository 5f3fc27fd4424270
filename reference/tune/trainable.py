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
    """A trial's resources as bundles, reserved together on the cluster (PACK); the trial's
    function runs in the first bundle, the others are held for what it starts."""

    def __init__(self, bundles: list, strategy: str = "PACK"):
        if not bundles or not all(isinstance(b, dict) for b in bundles):
            raise ValueError(f"PlacementGroupFactory(bundles={bundles!r}): expected a "
                             "non-empty list of resource dicts.")
        if strategy != "PACK":
            raise ValueError(f"PlacementGroupFactory(strategy={strategy!r}): the reference "
                             "reserves a trial's bundles with 'PACK' only.")
        self.bundles, self.strategy = [dict(b) for b in bundles], strategy

    @property
    def required_resources(self) -> dict:
        total: dict = {}
        for bundle in self.bundles:
            for key, value in bundle.items():
                total[key] = total.get(key, 0.0) + value
        return total

    def __eq__(self, other) -> bool:
        return isinstance(other, PlacementGroupFactory) and other.bundles == self.bundles

    def __repr__(self) -> str:
        return f"PlacementGroupFactory({self.bundles!r})"


def normalize_resources(resources) -> list[dict]:
    """A trial's bundles from `with_resources(...)`'s argument: `{"cpu": 2, "gpu": 1,
    "custom": 1}` -> `[{"CPU": 2.0, "GPU": 1.0, "custom": 1.0}]`; a PlacementGroupFactory
    gives its bundles."""
    bundles = getattr(resources, "bundles", None)
    if bundles is None:
        if not isinstance(resources, dict):
            raise ValueError(f"with_resources(resources={resources!r}): expected a dict such "
                             "as {'cpu': 1, 'gpu': 0}, a PlacementGroupFactory, or a function "
                             "of the config returning one.")
        bundles = [resources]
    out = []
    for bundle in bundles:
        normal = {}
        for key, value in bundle.items():
            name = {"cpu": "CPU", "gpu": "GPU"}.get(key, key)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise ValueError(f"with_resources(resources={resources!r}): {key!r} must be a "
                                 "number >= 0.")
            if value:
                normal[name] = float(value)
        out.append(normal or {"CPU": 0.0})
    return out
