"""The public surface of `reference.train.xgboost` against Ray's `ray.train.xgboost`:
`__all__`, signatures (names, kinds, defaults), the legacy arguments' DeprecationWarning
text, the config's dict and its unsupported communicator. Nothing here starts a fit; the
Ray comparisons are skipped without Ray."""

from __future__ import annotations

import dataclasses
import inspect

import pytest
import xgboost

import reference.train.xgboost as ours
from reference.train import BackendConfig, DataParallelTrainer
from reference.train.backend import Backend

PUBLIC = ["RayTrainReportCallback", "XGBoostCheckpoint", "XGBoostConfig", "XGBoostTrainer"]
# In Ray's `__all__` but not here: nothing (the deprecated V1 `XGBoostCheckpoint` is
# exported too, and warns when built; tests/reference/train/test_surface_names.py).
OMITTED: set = set()
LEGACY = [{"label_column": "y"}, {"params": {"max_depth": 2}}, {"num_boost_round": 3},
          {"label_column": "y", "params": {}, "num_boost_round": 0}]


def _ray():
    return pytest.importorskip("ray.train.xgboost")


def _params(obj):
    return [(p.name, p.kind, p.default) for p in inspect.signature(obj).parameters.values()]


def _train_fn():
    pass


def test_all_lists_the_public_names():
    assert sorted(ours.__all__) == sorted(PUBLIC)
    for name in PUBLIC:
        assert getattr(ours, name).__module__.startswith("reference.train.xgboost")
    # ("@py_builtins" and "@pytest_ar" appear where pytest rewrote the package's asserts)
    defined = {n for n in dir(ours) if not n.startswith(("_", "@"))} - {"xgboost"}
    assert defined == set(PUBLIC)


def test_classes_are_what_they_extend():
    assert issubclass(ours.XGBoostTrainer, DataParallelTrainer)
    assert issubclass(ours.XGBoostConfig, BackendConfig)
    assert dataclasses.is_dataclass(ours.XGBoostConfig)
    assert issubclass(ours.RayTrainReportCallback, xgboost.callback.TrainingCallback)
    assert ours.RayTrainReportCallback.CHECKPOINT_NAME == "model.ubj"


def test_all_is_rays_without_the_v1_checkpoint():
    assert set(_ray().__all__) - set(ours.__all__) == OMITTED
    assert set(ours.__all__) <= set(_ray().__all__)


@pytest.mark.parametrize("name", PUBLIC)
def test_signature_same_as_ray(name):
    assert _params(getattr(ours, name)) == _params(getattr(_ray(), name))


@pytest.mark.parametrize("path", ["RayTrainReportCallback.get_model",
                                  "RayTrainReportCallback.after_iteration",
                                  "RayTrainReportCallback.after_training",
                                  "XGBoostTrainer.get_model"])
def test_method_signature_same_as_ray(path):
    cls, method = path.split(".")
    assert _params(getattr(getattr(ours, cls), method)) == _params(
        getattr(getattr(_ray(), cls), method))


def test_constants_and_config_dict_same_as_ray():
    ray_xgboost = _ray()
    assert (ours.RayTrainReportCallback.CHECKPOINT_NAME
            == ray_xgboost.RayTrainReportCallback.CHECKPOINT_NAME)
    assert [f.name for f in dataclasses.fields(ours.XGBoostConfig)] == [
        f.name for f in dataclasses.fields(ray_xgboost.XGBoostConfig)]
    for kwargs in ({}, {"xgboost_communicator": "rabit"}, {"xgboost_communicator": "x"}):
        assert ours.XGBoostConfig(**kwargs).to_dict() == ray_xgboost.XGBoostConfig(
            **kwargs).to_dict()


def test_unsupported_communicator_is_not_implemented_as_in_ray():
    config = ours.XGBoostConfig(xgboost_communicator="x")
    with pytest.raises(NotImplementedError) as raised:
        config.backend_cls  # noqa: B018 - the property raises
    assert str(raised.value) == "Unsupported backend: x"
    with pytest.raises(NotImplementedError) as theirs:
        _ray().XGBoostConfig(xgboost_communicator="x").backend_cls  # noqa: B018
    assert str(raised.value) == str(theirs.value)
    assert issubclass(ours.XGBoostConfig().backend_cls, Backend)  # "rabit", the default


@pytest.mark.parametrize("legacy", LEGACY)
def test_legacy_arguments_raise_rays_deprecation_warning(legacy):
    with pytest.raises(DeprecationWarning) as raised:
        ours.XGBoostTrainer(_train_fn, **legacy)
    assert "legacy XGBoostTrainer API is deprecated" in str(raised.value)
    # Ray's trainer raises before it looks at anything else: no Ray cluster starts.
    with pytest.raises(DeprecationWarning) as theirs:
        _ray().XGBoostTrainer(_train_fn, **legacy)
    assert str(raised.value) == str(theirs.value)


def test_trainer_get_model_is_deprecated_with_rays_message():
    with pytest.raises(DeprecationWarning) as raised:
        ours.XGBoostTrainer.get_model(None)
    with pytest.raises(DeprecationWarning) as theirs:
        _ray().XGBoostTrainer.get_model(None)
    assert str(raised.value) == str(theirs.value)
    assert "RayTrainReportCallback.get_model" in str(raised.value)
