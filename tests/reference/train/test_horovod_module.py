"""`reference.train.horovod` as Ray 2.60's `ray.train.horovod`: without horovod the import
fails with Ray's message; with it, `HorovodTrainer(...)` raises Ray's DeprecationWarning.

Each case runs in a child process, so the package cache of this one is untouched. Horovod
cannot be built here, so the second case puts a stub `horovod` package (the few names
`ray.train.horovod` imports, nothing that trains) on the child's PYTHONPATH; only these
tests use it.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))

MISSING = ("Horovod isn't installed. To install Horovod with PyTorch support, run 'pip "
           "install 'horovod[pytorch]''. To install Horovod with TensorFlow support, run "
           "'pip install 'horovod[tensorflow]''.")
DEPRECATED = ("`HorovodTrainer` is not supported and is scheduled to be removed in the "
              "future. Please consider using `TorchTrainer` or `TensorflowTrainer`, fall "
              "back to the old implementation with `RAY_TRAIN_V2_ENABLED=0`, or file an "
              "issue on Github describing your use case.")
FIELDS = [["nics", None], ["verbose", 1], ["key", None], ["ssh_port", None],
          ["ssh_identity_file", None], ["ssh_str", None], ["timeout_s", 300],
          ["placement_group_timeout_s", 100]]

# What `ray.train.horovod` imports from horovod at import time, as inert stand-ins.
STUB = {
    "horovod/__init__.py": "",
    "horovod/ray/__init__.py": "",
    "horovod/ray/runner.py": "class Coordinator:\n    pass\n",
    "horovod/ray/utils.py": "def detect_nics(*a, **k):\n    return set()\n"
                            "def nics_to_env_var(nics):\n    return {}\n",
    "horovod/runner/__init__.py": "",
    "horovod/runner/common/__init__.py": "",
    "horovod/runner/common/util/__init__.py": "",
    "horovod/runner/common/util/secret.py": "def make_secret_key():\n    return 'stub-key'\n",
    "horovod/runner/common/util/timeout.py": "class Timeout:\n"
                                             "    def __init__(self, *a, **k):\n        pass\n",
}

PROBE = """
import dataclasses, importlib, json, sys
out = {}
try:
    module = importlib.import_module(sys.argv[1] + ".train.horovod")
except Exception as exc:
    out["import_error"] = [type(exc).__name__, str(exc)]
else:
    out["all"] = list(module.__all__)
    out["key"] = module.HorovodConfig().key
    out["fields"] = [[f.name, f.default] for f in dataclasses.fields(module.HorovodConfig)]
    try:
        module.HorovodTrainer(lambda: None, train_loop_config={})
    except BaseException as exc:
        out["init_error"] = [type(exc).__name__, str(exc)]
print(json.dumps(out))
"""


def _probe(root: str, pythonpath: str | None = None) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "RAY_TRAIN_V2_ENABLED"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (pythonpath, ROOT) if p)
    done = subprocess.run([sys.executable, "-c", PROBE, root], capture_output=True, text=True,
                          cwd=ROOT, env=env, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.splitlines()[-1])


def _ray_available() -> bool:
    return importlib.util.find_spec("ray") is not None


@pytest.fixture(scope="module")
def stub_horovod(tmp_path_factory) -> str:
    folder = tmp_path_factory.mktemp("stub_horovod")
    for path, text in STUB.items():
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / path).write_text(text)
    return str(folder)


@pytest.mark.skipif(importlib.util.find_spec("horovod") is not None,
                    reason="horovod is installed: the import succeeds")
def test_without_horovod_the_import_fails_with_rays_message():
    seen = _probe("reference")
    assert seen == {"import_error": ["ModuleNotFoundError", MISSING]}
    if _ray_available():
        assert _probe("ray") == seen


def test_with_horovod_the_trainer_raises_rays_deprecation(stub_horovod):
    seen = _probe("reference", stub_horovod)
    assert seen == {"all": ["HorovodConfig", "HorovodTrainer"], "key": "stub-key",
                    "fields": FIELDS, "init_error": ["DeprecationWarning", DEPRECATED]}
    if _ray_available():
        assert _probe("ray", stub_horovod) == seen
