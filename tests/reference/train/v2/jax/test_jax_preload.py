"""What a JaxTrainer's nodes import once for its workers: ml_dtypes (most of jax's import,
no configuration read), never jax itself, whose config reads JAX_PLATFORMS and the other
JAX_* variables when imported. This module imports no jax, so a worker that unpickles its
training function does not either."""

from __future__ import annotations

import importlib.util
import os
import sys

import pytest

import reference.train as train
from reference.train.v2.jax import JaxTrainer

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(importlib.util.find_spec("jax") is None,
                                 reason="jax not installed")]


def _imported(config):
    return {"ml_dtypes": "ml_dtypes" in sys.modules, "jax": "jax" in sys.modules,
            "platforms": os.environ.get("JAX_PLATFORMS")}


def test_workers_start_with_ml_dtypes_but_import_jax_themselves(tmp_path):
    run = train.RunConfig(storage_path=str(tmp_path),
                          worker_runtime_env={"env_vars": {"JAX_PLATFORMS": "cpu"}})
    seen = JaxTrainer(_imported, scaling_config=train.ScalingConfig(num_workers=2),
                      run_config=run).fit().return_value
    assert seen == {"ml_dtypes": True, "jax": False, "platforms": "cpu"}
