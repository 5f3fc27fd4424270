"""docs/tracking.md runs as written: its python blocks, in order, in one process in a fresh
folder (W&B's settings and caches under a home of its own), each in a namespace of its
own; each block's asserts say what the tracker left."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[3] / "docs" / "tracking.md"

pytestmark = pytest.mark.slow

RUNNER = """
import re, sys, traceback
blocks = re.findall(r"```python\\n(.*?)```", open(sys.argv[1]).read(), re.S)
for n, block in enumerate(blocks, 1):
    try:
        exec(compile(block, f"tracking.md block {n}", "exec"), {"__name__": "__main__"})
    except BaseException:
        traceback.print_exc()
        sys.exit(f"block {n} failed")
print(f"{len(blocks)} blocks ran")
"""


def test_every_block_runs_and_its_asserts_hold(tmp_path):
    for module in ("mlflow", "sqlalchemy", "wandb", "tensorboardX"):
        pytest.importorskip(module)
    blocks = re.findall(r"```python\n", DOC.read_text())
    env = dict(os.environ, HOME=str(tmp_path), WANDB_SILENT="true",
               TUNE_DISABLE_AUTO_CALLBACK_LOGGERS="")
    for name in ("WANDB_API_KEY", "WANDB_PROJECT_NAME", "WANDB_GROUP_NAME", "WANDB_MODE"):
        env.pop(name, None)
    done = subprocess.run([sys.executable, "-c", RUNNER, str(DOC)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    assert f"{len(blocks)} blocks ran" in done.stdout
    assert len(blocks) == 6
