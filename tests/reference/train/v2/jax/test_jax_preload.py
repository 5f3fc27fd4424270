"""What a JaxTrainer's nodes import once for its workers: ml_dtypes (most of jax's import,
no configuration read), never jax itself, whose config reads JAX_PLATFORMS and the other
JAX_* variables when imported. This module imports no jax, so a worker that unpickles its
training function does not either."""

from __future__ import annotations

import importlib.util
import sys

import pytest

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(importlib.util.find_spec("jax") is None,
                                 reason="jax not installed")]


_SCRIPT = """
import json, os, sys
import reference.train as train
from reference.train.v2.jax import JaxTrainer

def _imported(config):
    return {"ml_dtypes": "ml_dtypes" in sys.modules, "jax": "jax" in sys.modules,
            "platforms": os.environ.get("JAX_PLATFORMS")}

run = train.RunConfig(storage_path=sys.argv[1],
                      worker_runtime_env={"env_vars": {"JAX_PLATFORMS": "cpu"}})
seen = JaxTrainer(_imported, scaling_config=train.ScalingConfig(num_workers=2),
                  run_config=run).fit().return_value
print(json.dumps(seen))
"""


def test_workers_start_with_ml_dtypes_but_import_jax_themselves(tmp_path):
    # a driver of its own: the default cluster of a test process that imported jax earlier
    # (another test) would hand jax to every worker it forks
    import json
    import subprocess

    done = subprocess.run([sys.executable, "-c", _SCRIPT, str(tmp_path)], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen == {"ml_dtypes": True, "jax": False, "platforms": "cpu"}
