"""docs/examples/tune_torch_asha.py (the seeds' workflow 3 in its Ray 2.60 form) runs on the
reference at 4 CPUs, also when a worker of the best trial dies once."""

import os
import re
import subprocess
import sys

import pytest

pytest.importorskip("torch")
pytestmark = pytest.mark.slow
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), *[os.pardir] * 3))


def test_asha_over_torch_trainer_runs_finds_the_best_config(tmp_path):
    """The --kill-once form (it also covers the plain one: the kill only adds a restart)."""
    extra = ["--kill-once"]
    out = subprocess.run(
        [sys.executable, os.path.join(ROOT, "docs", "examples", "tune_torch_asha.py"),
         "--cpus", "4", "--storage", str(tmp_path), *extra],
        capture_output=True, text=True, timeout=400, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-3000:]
    text = out.stdout
    assert "trials: 4 errors: 0 terminated: 4" in text
    rows = re.findall(r"lr=(\S+)\s+epochs=(\d+) loss=(\S+)", text)
    epochs = {float(lr): int(n) for lr, n, _ in rows}
    losses = {float(lr): float(loss) for lr, _, loss in rows}
    # the two weak learning rates are stopped by ASHA at its first rung; the best one runs
    # to max_t (the other strong one too, unless the best reached each rung before it)
    assert epochs[0.01] == 2 and epochs[0.001] == 2
    best = min(losses, key=losses.get)  # the table prints each loss exactly (repr)
    assert best in (0.05, 0.2) and epochs[best] == 8
    assert f"best config: {{'lr': {best}" in text
    assert "worker killed once: True" in text
    # the killed trial's Train run restarted from its checkpoint (one folder per run)
    runs = [d for d in os.listdir(tmp_path) if d.startswith("train-trial_id=")]
    assert len(runs) == 4
