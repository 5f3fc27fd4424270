"""The suite catches deliberately broken variants of the reference (each in a subprocess,
so the patches never leak into other tests)."""

import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(__file__)
ROOT = os.path.dirname(os.path.dirname(HERE))

CASES = {
    "drops_latest": ["check_retention.py::check_missing_score_min",
                     "check_retention.py::check_retention_property"],
    "ignores_max_failures": ["check_faults.py::check_worker_failures_keyed_by_rank"],
    "rank1_metrics": ["check_report.py::check_result_metrics_are_rank0_latest_checkpointed"],
    "restarts_only_failed_worker": ["check_faults.py::check_worker_failures_keyed_by_rank"],
    "registers_incomplete": ["check_report.py::check_checkpoints_of_ranks_merge_under_rank0_name",
                             "check_report.py::check_report_waits_for_every_rank"],
}


@pytest.mark.slow
@pytest.mark.parametrize("variant", sorted(CASES))
def test_variant_is_caught(variant, tmp_path):
    checks = [os.path.join(ROOT, "conformance", "checks", c) for c in CASES[variant]]
    empty = tmp_path / "no-expectations.txt"
    empty.write_text("")
    env = dict(os.environ, PYTHONPATH=HERE + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", *checks, "--impl", f"broken_variants:{variant}",
         "--expectations", str(empty), "-p", "no:cacheprovider", "-q", "-p", "no:xdist"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out[-3000:]
    assert f"{len(checks)} failed" in out, out[-3000:]


def test_reference_passes_the_same_checks(tmp_path):
    """Control: the unbroken reference passes every check used above."""
    checks = sorted({c for cs in CASES.values() for c in cs})
    paths = [os.path.join(ROOT, "conformance", "checks", c) for c in checks]
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", *paths, "--impl", "reference", "-p", "no:cacheprovider",
         "-q", "-p", "no:xdist"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
