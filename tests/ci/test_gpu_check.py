"""ci/gpu_check.py: without a GPU every check skips with its reason, and the report says so."""

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_without_gpus_the_checks_skip_with_reasons(tmp_path):
    out = tmp_path / "report.json"
    done = subprocess.run([sys.executable, os.path.join(ROOT, "ci", "gpu_check.py"), "--out",
                           str(out)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    report = {r["check"]: r for r in json.loads(out.read_text())}
    assert sorted(report) == ["deepspeed", "jax", "lightning_deepspeed", "torch",
                              "torch_fractional"]
    torch = __import__("pytest").importorskip("torch")
    if not torch.cuda.is_available():
        for name in ("torch", "torch_fractional", "deepspeed", "lightning_deepspeed"):
            assert report[name] == {"check": name, "status": "skipped",
                                    "reason": "no CUDA device visible to torch"}
