"""ci/repeat_check.py: each run in a fresh pytest, failures named, the load stopped after."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "ci" / "repeat_check.py"
QUICK = "conformance/checks/check_scaling_config.py::check_num_workers_range"


def _run(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


def test_passing_runs_under_load_and_the_load_is_gone_after():
    proc = _run(QUICK, "--runs", "2", "--load", "1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    load, *runs, summary = proc.stdout.splitlines()
    pids = json.loads(load.split("processes ", 1)[1])
    assert len(pids) == 1, load
    assert [line.split(":")[0] for line in runs] == ["run 1/2", "run 2/2"]
    assert all(": pass in " in line for line in runs), runs
    assert summary.startswith("2 of 2 runs passed with 1 busy processes"), summary
    for pid in pids:  # no busy process outlives the script
        assert not Path(f"/proc/{pid}").exists(), f"busy process {pid} still runs"


def test_a_failing_run_is_named_and_the_exit_status_says_so():
    proc = _run(QUICK + "_no_such_check", "--runs", "2", "--load", "0")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "run 1/2: FAIL" in proc.stdout and "run 2/2: FAIL" in proc.stdout, proc.stdout
    assert proc.stdout.splitlines()[-1].endswith("failed: [1, 2]"), proc.stdout


def test_bad_arguments_name_the_option():
    proc = _run(QUICK, "--runs", "0")
    assert proc.returncode == 2 and "--runs must be at least 1, got 0" in proc.stderr
    proc = _run(QUICK, "--load", "-1")
    assert proc.returncode == 2 and "--load must be 0 or more, got -1" in proc.stderr
