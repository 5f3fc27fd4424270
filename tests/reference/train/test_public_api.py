"""The public surface of `reference.train`: `__all__`, and signatures equal to Ray's."""

from __future__ import annotations

import inspect
import subprocess
import sys
import types
import typing

import pytest

import reference.train as train

# The classes defined by the config/checkpoint/result/exception modules of this package.
OWN = [
    "Checkpoint", "CheckpointConfig", "CheckpointConsistencyMode", "CheckpointUploadMode",
    "ControllerError", "DataConfig", "FailureConfig", "LoggingConfig", "NCCLHangError", "PreemptionError",
    "ReportedCheckpoint", "ReportedCheckpointStatus", "Result", "RunConfig", "ScalingConfig",
    "TrainingFailedError", "UserCallback", "WorkerGroupError",
]

# Public attributes Ray has that we leave out on purpose, with the reason.
OMITTED = {
    # Ray Tune placement-group glue, meaningless without Tune's trial scheduler.
    "ScalingConfig": {"as_placement_group_factory", "from_placement_group_factory"},
    # Built by the storage layer from (storage_path, name, storage_filesystem).
    "RunConfig": {"storage_context"},
}


def _public(obj) -> set[str]:
    return {n for n in dir(obj) if not n.startswith("_")}


def _params(obj):
    """(name, kind, default) of each parameter; annotations differ in spelling, not meaning."""
    try:
        signature = inspect.signature(obj)
    except (TypeError, ValueError) as exc:
        return type(exc).__name__
    return [(p.name, p.kind, p.default) for p in signature.parameters.values()]


def _kind(cls, attr: str) -> str:
    static = inspect.getattr_static(cls, attr)
    for kind in (property, classmethod, staticmethod, types.FunctionType):
        if isinstance(static, kind):
            return kind.__name__
    return "value"


@pytest.fixture(scope="module")
def ray_train():
    return pytest.importorskip("ray.train")


def test_all_lists_exactly_the_public_names():
    public = {name for name, obj in vars(train).items()
              if not name.startswith("_") and not isinstance(obj, types.ModuleType)}
    assert len(train.__all__) == len(set(train.__all__)), "duplicates in __all__"
    assert sorted(train.__all__) == sorted(public)


@pytest.mark.parametrize("name", OWN)
def test_exported(name):
    assert name in train.__all__
    obj = getattr(train, name)
    assert obj.__module__.startswith("reference.train._"), "defined in a private module"


def test_importing_reference_does_not_import_ray():
    code = ("import sys, reference.train; "
            "sys.exit(any(m == 'ray' or m.startswith('ray.') for m in sys.modules))")
    assert subprocess.run([sys.executable, "-c", code], timeout=60).returncode == 0


@pytest.mark.parametrize("name", OWN)
def test_constructor_signature_matches_ray(ray_train, name):
    assert _params(getattr(train, name)) == _params(getattr(ray_train, name))


@pytest.mark.parametrize("name", OWN)
def test_public_attributes_match_ray(ray_train, name):
    ours, theirs = _public(getattr(train, name)), _public(getattr(ray_train, name))
    assert ours - theirs == set(), "attributes Ray does not have"
    assert theirs - ours == OMITTED.get(name, set())


@pytest.mark.parametrize("name", OWN)
def test_method_signatures_match_ray(ray_train, name):
    ours, theirs = getattr(train, name), getattr(ray_train, name)
    for attr in sorted(_public(ours) & _public(theirs)):
        assert _kind(ours, attr) == _kind(theirs, attr), attr
        if callable(getattr(ours, attr)) and not isinstance(getattr(ours, attr), type):
            assert _params(getattr(ours, attr)) == _params(getattr(theirs, attr)), attr


@pytest.mark.parametrize("name", OWN)
def test_class_hierarchy_shape_matches_ray(ray_train, name):
    ours, theirs = getattr(train, name), getattr(ray_train, name)
    if issubclass(theirs, BaseException):
        assert [c.__name__ for c in ours.__mro__] == [c.__name__ for c in theirs.__mro__]


@pytest.mark.parametrize("name", OWN)
def test_type_hints_resolve(name):
    # Tools that build instances from annotations (hypothesis.strategies.builds) need this.
    cls = getattr(train, name)
    typing.get_type_hints(cls)
    typing.get_type_hints(cls.__init__)
