"""reference.train.v2.jax without fits: names, signatures (equal to Ray's), defaults."""

from __future__ import annotations

import inspect
import subprocess
import sys

import pytest

import reference.train as train
from reference.train.v2.jax import JaxConfig, JaxTrainer
from reference.train.v2.jax._config import _JaxBackend


def noop():
    pass


def test_names_and_config():
    import reference.train.v2.jax as module

    assert module.__all__ == ["JaxConfig", "JaxTrainer"]
    assert JaxConfig().to_dict() == {"use_tpu": False, "use_gpu": False}
    assert JaxConfig(use_gpu=True).to_dict() == {"use_tpu": False, "use_gpu": True}
    assert JaxConfig().backend_cls is _JaxBackend
    assert isinstance(JaxConfig(), train.BackendConfig)


def test_the_default_backend_follows_the_scaling_config():
    trainer = JaxTrainer(noop, scaling_config=train.ScalingConfig(num_workers=2, use_gpu=True))
    assert trainer.backend_config == JaxConfig(use_tpu=False, use_gpu=True)
    explicit = JaxConfig(use_gpu=True)  # used as given, even against the ScalingConfig
    assert JaxTrainer(noop, jax_config=explicit,
                      scaling_config=train.ScalingConfig(num_workers=2)).backend_config \
        is explicit


def test_no_scaling_config_is_an_attribute_error_saying_what_is_missing():
    with pytest.raises(AttributeError, match="scaling_config=ScalingConfig"):
        JaxTrainer(noop)


def test_importing_the_package_does_not_import_jax():
    code = ("import sys, reference.train.v2.jax; "
            "sys.exit('jax' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code], timeout=60).returncode == 0


def test_signatures_match_rays():
    ray_jax = pytest.importorskip("ray.train.v2.jax")

    def params(fn):
        return [(p.name, p.kind, p.default) for p in inspect.signature(fn).parameters.values()]

    assert params(JaxTrainer) == params(ray_jax.JaxTrainer)
    assert params(JaxConfig) == params(ray_jax.JaxConfig)
