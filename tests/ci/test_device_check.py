"""ci/device_check.sh, the GPU machine's one prepared run, works from a plain checkout: on
this machine (no GPU) the accelerator clauses run on simulated GPUs and say so, the NCCL
clause is skipped with its reason, gpu_check's checks skip, and it exits 0."""

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.slow
def test_the_device_script_runs_and_reports_what_ran_on_which_hardware(tmp_path):
    pytest.importorskip("torch")
    env = {k: v for k, v in os.environ.items() if k not in ("OUT", "PYTHONPATH")}
    done = subprocess.run(["bash", os.path.join(ROOT, "ci", "device_check.sh"), str(tmp_path)],
                          env={**env, "PYTHON": sys.executable}, capture_output=True,
                          text=True, timeout=400)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert sorted(os.listdir(tmp_path)) == ["gpu_check.json", "machine.txt", "reference.html",
                                            "reference.json", "reference.md"]
    assert "torch" in (tmp_path / "machine.txt").read_text()
    clauses = json.loads((tmp_path / "reference.json").read_text())["clauses"]
    mine = {k: v for k, v in clauses.items() if k.startswith("accelerator.")}
    assert len(mine) == 9
    real = __import__("torch").cuda.is_available()
    for name, clause in mine.items():
        if name == "accelerator.nccl" and not real:
            assert clause["status"] == "skip", clause
            assert "declared, not real" in " ".join(clause["reasons"]), clause
            continue
        assert clause["status"] == "pass", (name, clause)
        declared = name in ("accelerator.rocm-ids", "accelerator.tpu-chips")
        assert clause["hardware"] == ("real" if real and not declared else "simulated"), \
            (name, clause)
    checks = {r["check"]: r["status"] for r in json.loads((tmp_path / "gpu_check.json")
                                                          .read_text())}
    assert "failed" not in checks.values(), checks
    if not real:
        assert set(checks.values()) == {"skipped"}, checks
