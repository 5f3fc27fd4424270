"""docs/examples/jax_spmd.py runs on the reference: the CPU form and the simulated TPU form."""

import os
import subprocess
import sys

import pytest

pytest.importorskip("jax")
pytestmark = pytest.mark.slow
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), *[os.pardir] * 5))


@pytest.mark.parametrize("extra, processes, slices", [([], 2, "1"), (["--tpu"], 4, "2")])
def test_example_converges_as_one_program(extra, processes, slices):
    out = subprocess.run(
        [sys.executable, os.path.join(ROOT, "docs", "examples", "jax_spmd.py"), "--steps", "40",
         *extra], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-3000:]
    line = next(line for line in out.stdout.splitlines() if line.startswith("final metrics"))
    assert f"'processes': {processes}" in line and f"'slices': '{slices}'" in line
    metrics = eval(line.split(": ", 1)[1])  # noqa: S307 - the example's own printed dict
    assert metrics["step"] == 40 and metrics["max_error"] < 0.01
