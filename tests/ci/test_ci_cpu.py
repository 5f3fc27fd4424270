"""ci/bench/ci_cpu.py: a command recorded under process accounting is reported per step,
its children's CPU charged to them (needs root and Debian's `acct`: accton, dump-acct)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "ci" / "bench" / "ci_cpu.py"

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not (shutil.which("accton") and shutil.which("dump-acct")),
    reason="process accounting needs root and the acct package (accton, dump-acct)")


def test_a_step_that_burns_cpu_is_charged_with_it_and_an_idle_one_is_not(tmp_path):
    burn = f"{sys.executable} -c 'sum(range(6 * 10**7))'"
    # two steps: a shell whose python child burns about a second, and a sleeper
    command = ["bash", "-c", f"(bash -c \"{burn}\") & (sleep 0.5) & wait"]
    out = subprocess.run([sys.executable, str(SCRIPT), "record", "--out",
                          str(tmp_path / "pacct"), "--", *command],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    per_step = out.stdout.split("\n\n")[0].splitlines()[2:]  # the first table's rows
    steps = {r.split()[3]: float(r.split()[0]) for r in per_step if "(pid" in r}
    # the burning subshell exec'd its python (bash's last command); the sleeper burnt none
    burner = os.path.basename(sys.executable)[:15]  # its process name: python, python3...
    assert steps.get(burner, 0) >= 0.3, out.stdout
    assert steps.get("sleep", 1) < 0.1, out.stdout
    assert "not under the root" in out.stdout
