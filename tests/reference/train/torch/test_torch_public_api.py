"""The public surface of `reference.train.torch`: `__all__`, signatures equal to Ray's."""

from __future__ import annotations

import inspect

import pytest

import reference.train.torch as ours

PUBLIC = ["TorchCheckpoint", "TorchConfig", "TorchTrainer", "accelerate", "backward", "enable_reproducibility",
          "get_device", "get_devices", "prepare_data_loader", "prepare_model",
          "prepare_optimizer"]
# In Ray's `__all__` but not here: nothing (the deprecated V1 `TorchCheckpoint` is exported
# too, and warns when built; tests/reference/train/test_surface_names.py).
OMITTED: set = set()


def test_all_lists_the_public_names():
    assert sorted(ours.__all__) == sorted(PUBLIC)
    for name in PUBLIC:
        assert getattr(ours, name).__module__.startswith("reference.train.torch")
    # ("@py_builtins" and "@pytest_ar" appear where pytest rewrote the package's asserts:
    # it rewrites every module of a distribution that provides a plugin, as this one does)
    defined = {n for n in dir(ours) if not n.startswith(("_", "@"))} - {"torch"}
    assert defined == set(PUBLIC)


@pytest.mark.parametrize("name, args", [
    ("accelerate", ()), ("prepare_optimizer", (None,)), ("backward", (None,)),
])
def test_amp_utilities_are_deprecated(name, args):
    with pytest.raises(DeprecationWarning, match="native PyTorch mixed precision"):
        getattr(ours, name)(*args)


def _params(obj):
    return [(p.name, p.kind, p.default) for p in inspect.signature(obj).parameters.values()]


@pytest.mark.parametrize("name", PUBLIC)
def test_signature_same_as_ray(name):
    ray_torch = pytest.importorskip("ray.train.torch")
    assert set(ray_torch.__all__) - set(ours.__all__) == OMITTED
    assert _params(getattr(ours, name)) == _params(getattr(ray_torch, name))
