"""The public surface of `reference.train.lightgbm` against Ray's `ray.train.lightgbm`:
`__all__`, signatures (names, kinds, defaults), the legacy arguments' DeprecationWarning
text, the config's dict, and `get_network_params` outside a trainer. Nothing here starts a
fit; the Ray comparisons are skipped without Ray."""

from __future__ import annotations

import dataclasses
import inspect
import logging

import pytest

import reference.train.lightgbm as ours
from reference.train import BackendConfig, DataParallelTrainer
from reference.train.backend import Backend

PUBLIC = ["LightGBMCheckpoint", "LightGBMConfig", "LightGBMTrainer", "RayTrainReportCallback",
          "get_network_params", "normalize_pandas_for_lightgbm"]
# In Ray's `__all__` but not here: nothing (the deprecated V1 `LightGBMCheckpoint` is
# exported too, and warns when built; tests/reference/train/test_surface_names.py).
OMITTED: set = set()
LEGACY = [{"label_column": "y"}, {"params": {"num_leaves": 4}}, {"num_boost_round": 3},
          {"label_column": "y", "params": {}, "num_boost_round": 0}]


def _ray():
    return pytest.importorskip("ray.train.lightgbm")


def _params(obj):
    return [(p.name, p.kind, p.default) for p in inspect.signature(obj).parameters.values()]


def _train_fn():
    pass


def test_all_lists_the_public_names():
    assert sorted(ours.__all__) == sorted(PUBLIC)
    for name in PUBLIC:
        assert getattr(ours, name).__module__.startswith("reference.train.lightgbm")
    # ("@py_builtins" and "@pytest_ar" appear where pytest rewrote the package's asserts)
    defined = {n for n in dir(ours) if not n.startswith(("_", "@"))} - {"lightgbm"}
    assert defined == set(PUBLIC)


def test_classes_are_what_they_extend():
    assert issubclass(ours.LightGBMTrainer, DataParallelTrainer)
    assert issubclass(ours.LightGBMConfig, BackendConfig)
    assert dataclasses.is_dataclass(ours.LightGBMConfig)
    assert issubclass(ours.LightGBMConfig().backend_cls, Backend)
    assert ours.RayTrainReportCallback.CHECKPOINT_NAME == "model.txt"


def test_all_is_rays_without_the_v1_checkpoint():
    assert set(_ray().__all__) - set(ours.__all__) == OMITTED
    assert set(ours.__all__) <= set(_ray().__all__)


@pytest.mark.parametrize("name", PUBLIC)
def test_signature_same_as_ray(name):
    assert _params(getattr(ours, name)) == _params(getattr(_ray(), name))


@pytest.mark.parametrize("path", ["RayTrainReportCallback.get_model",
                                  "RayTrainReportCallback.__call__",
                                  "LightGBMTrainer.get_model"])
def test_method_signature_same_as_ray(path):
    cls, method = path.split(".")
    assert _params(getattr(getattr(ours, cls), method)) == _params(
        getattr(getattr(_ray(), cls), method))


def test_constants_and_config_dict_same_as_ray():
    ray_lightgbm = _ray()
    assert (ours.RayTrainReportCallback.CHECKPOINT_NAME
            == ray_lightgbm.RayTrainReportCallback.CHECKPOINT_NAME)
    assert dataclasses.fields(ours.LightGBMConfig) == dataclasses.fields(
        ray_lightgbm.LightGBMConfig) == ()
    assert ours.LightGBMConfig().to_dict() == ray_lightgbm.LightGBMConfig().to_dict() == {}


def test_get_network_params_outside_a_trainer_is_empty_with_a_warning(caplog):
    with caplog.at_level(logging.WARNING):
        assert ours.get_network_params() == {}
    assert any("called outside the context of a `reference.train.lightgbm.LightGBMTrainer`"
               in r.getMessage() for r in caplog.records)
    assert _ray().get_network_params() == {}  # Ray's says the same about its trainer


@pytest.mark.parametrize("legacy", LEGACY)
def test_legacy_arguments_raise_rays_deprecation_warning(legacy):
    with pytest.raises(DeprecationWarning) as raised:
        ours.LightGBMTrainer(_train_fn, **legacy)
    assert "legacy LightGBMTrainer API is deprecated" in str(raised.value)
    # Ray's trainer raises before it looks at anything else: no Ray cluster starts.
    with pytest.raises(DeprecationWarning) as theirs:
        _ray().LightGBMTrainer(_train_fn, **legacy)
    assert str(raised.value) == str(theirs.value)


def test_trainer_get_model_is_deprecated_with_rays_message():
    with pytest.raises(DeprecationWarning) as raised:
        ours.LightGBMTrainer.get_model(None)
    with pytest.raises(DeprecationWarning) as theirs:
        _ray().LightGBMTrainer.get_model(None)
    assert str(raised.value) == str(theirs.value)
    assert "RayTrainReportCallback.get_model" in str(raised.value)
