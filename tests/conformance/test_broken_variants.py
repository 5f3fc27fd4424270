"""The suite catches deliberately broken variants of the reference, for the right reason.

Each variant runs in a subprocess (so its patches never leak into other tests) with a JSON
report. A variant counts as caught only when every check listed for it failed in its body
with an AssertionError filed under the expected clause, and the first line of the message
(what the assertion helpers put there: what was seen, what was expected) names the breakage.
A check that crashed instead (an AttributeError after a rename, a TypeError, an error while
the adapter set the variant up) is not a catch, and neither is a failing fit() reported as
"fit() raised ..., expected success": such a variant is broken, not caught.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(__file__)
ROOT = os.path.dirname(os.path.dirname(HERE))


@dataclasses.dataclass(frozen=True)
class Catch:
    """`check` must fail under `clause`, the first line of its message holding one of
    `because`."""

    check: str
    clause: str
    because: tuple[str, ...]


# Without a barrier, rank 0 may finish all its reports before rank 1 starts; the journal
# then counts rank 1 as a later attempt. Which journal check sees the breakage first
# depends on that race, so either finding is the right reason.
_NO_BARRIER = ("journal check checkpoints_whole: ckpt-0002 lacks the shards of ranks [1]",
               "journal check ranks_complete: attempt 0: ranks [0] are not 0..N-1 once each")

CASES: dict[str, tuple[Catch, ...]] = {
    "drops_latest": (
        Catch("check_retention.py::check_missing_score_min", "retention.missing-score",
              ("checkpoint folders on disk=",)),
        Catch("check_retention.py::check_retention_property", "retention.best-plus-latest",
              ("checkpoint folders on disk=",)),
    ),
    "ignores_max_failures": (
        Catch("check_faults.py::check_worker_failures_keyed_by_rank", "fault.max-failures",
              ("fit() succeeded, expected it to raise",)),
    ),
    "rank1_metrics": (
        Catch("check_report.py::check_result_metrics_are_rank0_latest_checkpointed",
              "report.rank0-metrics", ("result.metrics={'step': 2, 'rank': 1,",)),
    ),
    "restarts_only_failed_worker": (
        Catch("check_faults.py::check_worker_failures_keyed_by_rank", "fault.max-failures",
              ("journal check ranks_complete: attempt 1: ranks [1] are not 0..N-1",)),
    ),
    "skips_backend_shutdown": (
        Catch("check_backend.py::check_hooks_order_and_effects", "backend.hooks",
              ("hooks called, in order=['on_start', 'on_training_start'],",)),
    ),
    "lightning_full_data_per_rank": (
        Catch("check_lightning.py::check_ddp_equals_one_process", "lightning.ddp-equivalence",
              ("weights after DDP over 2 ranks differ from one process",)),
    ),
    "lightning_checkpoint_name": (
        Catch("check_lightning.py::check_checkpoint_file_and_load", "lightning.checkpoint",
              ("rank 0: files of the reported folder (epoch 0)=['model.ckpt']",)),
    ),
    "transformers_last_log_only": (
        Catch("check_transformers.py::check_report_per_save_from_every_rank",
              "transformers.report", ("rank 0: keys missing from a report=",)),
    ),
    "tune_ignores_scheduler": (
        Catch("check_tune.py::check_asha", "tune.scheduler-stop",
              ("x -> training_iteration of its last result",)),
    ),
    "tune_retry_from_scratch": (
        Catch("check_tune.py::check_trial_retry", "tune.trial-retry",
              ("step of get_checkpoint() at each start of the trial",)),
    ),
    "data_shards_overlap": (
        Catch("check_data.py::check_split_shards", "data.shard-split",
              ("'train' shards, first pass (iter_rows)",)),
        Catch("check_data.py::check_each_pass_is_an_epoch", "data.epochs",
              ("'train' shards, pass iter_rows: rows per rank",)),
        Catch("check_data.py::check_shards_after_restart", "data.restart", ("rows per rank",)),
    ),
    "data_no_shard_barrier": (
        Catch("check_data.py::check_shard_barrier", "data.shard-barrier",
              ("before rank 0 called it",)),
    ),
    "registers_incomplete": (
        Catch("check_report.py::check_checkpoints_of_ranks_merge_under_rank0_name",
              "report.merge-ranks", _NO_BARRIER),
        Catch("check_report.py::check_report_waits_for_every_rank", "report.barrier",
              _NO_BARRIER),
    ),
}


def judge(report: dict, catches: tuple[Catch, ...]) -> list[str]:
    """Why `report` does not show the variant caught as `catches` say ([] when it does)."""
    checks = {c["id"]: c for c in report["checks"]}
    problems = []
    for catch in catches:
        c = checks.get(catch.check)
        if c is None:
            problems.append(f"{catch.check}: not in the report (did it run?)")
            continue
        head = (c.get("message") or "").partition("\n")[0]
        seen = f"{c.get('error')}: {head!r}"
        if c["status"] != "fail":
            problems.append(f"{catch.check}: status {c['status']!r}, expected 'fail'")
        elif catch.clause not in c["clauses"]:
            problems.append(f"{catch.check}: failed under clauses {c['clauses']}, expected "
                            f"{catch.clause!r}")
        elif c.get("phase") != "call":
            problems.append(f"{catch.check}: failed in {c.get('phase')!r} before the check "
                            f"ran ({seen}): the variant is broken, not caught")
        elif c.get("error") != "AssertionError":
            problems.append(f"{catch.check}: crashed with {seen}, expected an AssertionError "
                            "from the suite's assertions")
        elif not any(fragment in head for fragment in catch.because):
            problems.append(f"{catch.check}: failed with {head!r}, expected a first line "
                            f"holding one of {list(catch.because)}")
    expected = {catch.check for catch in catches}
    for cid, c in checks.items():
        if cid not in expected and c["status"] != "pass":
            problems.append(f"{cid}: status {c['status']!r} but not listed for this variant")
    return problems


def _run_suite(checks: list[str], impl: str, out, extra_env=None):
    paths = [os.path.join(ROOT, "conformance", "checks", c) for c in checks]
    empty = out / "no-expectations.txt"
    empty.write_text("")
    env = dict(os.environ, **(extra_env or {}))
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", *paths, "--impl", impl, "--expectations", str(empty),
         "--conformance-report", str(out / "report"), "-p", "no:cacheprovider", "-q",
         "-p", "no:xdist"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    output = (proc.stdout + proc.stderr)[-3000:]
    reports = list((out / "report").glob("*.json"))
    assert len(reports) == 1, f"no report written\n{output}"
    return proc.returncode, json.loads(reports[0].read_text()), output


#: what a variant's checks need installed (they skip without it)
REQUIRES = {"lightning_full_data_per_rank": "lightning", "lightning_checkpoint_name": "lightning",
            "transformers_last_log_only": "transformers"}


@pytest.mark.slow
@pytest.mark.parametrize("variant", sorted(CASES))
def test_variant_is_caught(variant, tmp_path):
    if variant in REQUIRES:
        pytest.importorskip(REQUIRES[variant])
    catches = CASES[variant]
    pythonpath = HERE + os.pathsep + os.environ.get("PYTHONPATH", "")
    code, report, output = _run_suite([c.check for c in catches], f"broken_variants:{variant}",
                                      tmp_path, {"PYTHONPATH": pythonpath})
    assert judge(report, catches) == [], output
    assert code == 1, output


@pytest.mark.slow
def test_reference_passes_the_same_checks(tmp_path):
    """Control: the unbroken reference passes every check used above."""
    for module in set(REQUIRES.values()):
        pytest.importorskip(module)
    checks = sorted({c.check for cs in CASES.values() for c in cs})
    code, report, output = _run_suite(checks, "reference", tmp_path)
    assert {c["id"]: c["status"] for c in report["checks"]} == dict.fromkeys(checks, "pass")
    assert code == 0, output


# ------------------------------------------------------------- the judge itself, on fakes

_CATCH = CASES["drops_latest"][0]
_SETTING = "[broken: DataParallelTrainer(num_workers=1), scores=[2.0, None, 1.0, 3.0]]"


def _report(**fields) -> dict:
    check = {"id": _CATCH.check, "status": "fail", "clauses": [_CATCH.clause],
             "phase": "call", "error": "AssertionError",
             "message": "checkpoint folders on disk=['ckpt-0001'], expected ['ckpt-0001', "
                        f"'ckpt-0003'] {_SETTING}"}
    check.update(fields)
    return {"checks": [check]}


def test_judge_accepts_the_expected_failure():
    assert judge(_report(), (_CATCH,)) == []


def test_judge_rejects_a_crash_on_a_renamed_attribute():
    report = _report(error="AttributeError",
                     message="'CheckpointManager' object has no attribute '_results'")
    (problem,) = judge(report, (_CATCH,))
    assert "crashed with AttributeError" in problem


def test_judge_rejects_a_variant_that_broke_while_being_set_up():
    report = _report(phase="setup", error="AttributeError",
                     message="type object 'Controller' has no attribute '_on_report'")
    (problem,) = judge(report, (_CATCH,))
    assert "failed in 'setup'" in problem and "broken, not caught" in problem


def test_judge_reads_only_the_first_line_of_the_message():
    # A fit that crashed inside the variant: an AssertionError from `succeeded`, whose
    # traceback happens to quote the expected words further down.
    message = (f"fit() raised ControllerError, expected success {_SETTING}\n"
               "Traceback (most recent call last):\n"
               '  assertions.equal(on_disk, kept, "checkpoint folders on disk=", setting)\n'
               "AttributeError: 'CheckpointManager' object has no attribute '_results'")
    (problem,) = judge(_report(message=message), (_CATCH,))
    assert "fit() raised ControllerError" in problem and "expected a first line" in problem


def test_judge_rejects_other_clauses_and_statuses():
    (problem,) = judge(_report(clauses=["retention.nested-score"]), (_CATCH,))
    assert "expected 'retention.missing-score'" in problem
    (problem,) = judge(_report(status="pass", error=None, message=None), (_CATCH,))
    assert "status 'pass'" in problem
    (problem,) = judge(_report(status="hang", error="HangVerdict"), (_CATCH,))
    assert "status 'hang'" in problem
    (problem,) = judge({"checks": []}, (_CATCH,))
    assert "not in the report" in problem


def test_judge_rejects_an_unlisted_failure():
    other = dict(_report()["checks"][0], id="check_retention.py::check_nested_score")
    problems = judge({"checks": [_report()["checks"][0], other]}, (_CATCH,))
    assert problems == ["check_retention.py::check_nested_score: status 'fail' but not listed "
                        "for this variant"]
