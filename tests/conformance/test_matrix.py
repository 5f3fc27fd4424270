"""conformance.matrix: verdicts, the table and the arguments on made-up cells; real cells.

(The job-file contract has its own tests in test_matrix_jobs.py.)
"""

from __future__ import annotations

import subprocess
import sys
import types
from pathlib import Path

import pytest

import conformance.matrix
from conformance.adapters.base import Unsupported
from conformance.assertions import HangVerdict
from conformance.matrix import cells, cli, faults

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def table():
    return conformance.matrix.table


@pytest.fixture(scope="module")
def matrix():
    return cli


def test_all_lists_the_public_names():
    package = conformance.matrix
    public = {n for n, v in vars(package).items()  # the submodules are no names of it
              if n.isidentifier() and not n.startswith("_")
              and not isinstance(v, types.ModuleType)}
    assert set(package.__all__) == public
    assert all(hasattr(package, n) for n in package.__all__)


SETTING = "reference: DataParallelTrainer(num_workers=2), faults=['raise(rank=1)']"


class WorkerGroupError(RuntimeError):
    pass


@pytest.mark.parametrize("raised, verdict, reason", [
    (None, "pass", ""),
    (Unsupported("adapter 'ray' lacks the capability 'pause_node'"), "unsupported",
     "adapter 'ray' lacks the capability 'pause_node'"),
    (HangVerdict(f"fit() did not finish within its deadline (60s) [{SETTING}]\nstacks..."),
     "hang", "fit() did not finish within its deadline (60s)"),
    (AssertionError(f"attempts started=1, expected 2 [{SETTING}]"), "fail",
     "attempts started=1, expected 2"),
    (KeyError("node_id"), "fail", "KeyError: 'node_id'"),
])
def test_verdict_of(table, raised, verdict, reason):
    assert table.verdict_of(raised, SETTING)[:2] == (verdict, reason)


def test_a_failed_fit_is_named_by_its_exception(table):
    error = WorkerGroupError("Training failed due to worker errors:\n[Rank 1 Error Snippet]\n"
                             "Traceback ...\nInjectedFault: raise(rank=1, report=1)\n")
    raised = AssertionError(f"fit() raised WorkerGroupError, expected success [{SETTING}]\n"
                            "Traceback (most recent call last): ...")
    verdict, reason, detail = table.verdict_of(raised, SETTING, fit_error=error)
    assert verdict == "fail"
    assert reason == ("fit() raised WorkerGroupError: Training failed due to worker errors: "
                      "... InjectedFault: raise(rank=1, report=1)")
    assert "Traceback" in detail


def test_one_line_cuts_long_reasons(table):
    line = table.one_line("x" * 500 + "\nsecond line")
    assert len(line) == table.REASON_LIMIT and line.endswith("...")
    assert table.one_line("\n\n  a   b  \nc") == "a b"


def _cell(table, fault, job, verdict, seconds=1.0, reason="", impl="reference"):
    return table.CellResult(impl, fault, job, verdict, seconds, reason)


def test_exit_code_fails_on_fail_and_hang_only(table):
    ok = [_cell(table, "worker-raise", "noop", "pass"),
          _cell(table, "preemption", "noop", "unsupported", 0.0, "no action")]
    assert table.exit_code(ok) == 0
    assert table.exit_code([*ok, _cell(table, "node-loss", "noop", "hang", 60.0, "late")]) == 1
    assert table.exit_code([*ok, _cell(table, "node-loss", "noop", "fail", 3.0, "x")]) == 1
    assert table.exit_code([]) == 0


def test_cell_result_rejects_unknown_verdicts(table):
    with pytest.raises(ValueError, match=r"verdict='skipped'.*'unsupported'"):
        _cell(table, "worker-raise", "noop", "skipped")


def test_render_draws_one_table_per_implementation(table):
    results = [
        _cell(table, "worker-raise", "noop", "pass", 3.14),
        _cell(table, "worker-raise", "resume", "fail", 5.0, "attempts started=1, expected 2"),
        _cell(table, "node-pause", "noop", "unsupported", 0.0, "cannot pause", impl="ray"),
    ]
    text = table.render(results, {"reference": "0.1.0"})
    lines = text.splitlines()
    assert lines[0] == "== reference 0.1.0"
    assert lines[1].split() == ["fault", "noop", "resume"]
    assert lines[3].split() == ["worker-raise", "pass", "3.1s", "fail", "5.0s"]
    assert "== ray" in lines
    assert "  reference worker-raise x resume: fail: attempts started=1, expected 2" in lines
    assert "  ray node-pause x noop: unsupported: cannot pause" in lines
    assert "worker-raise x noop" not in text  # passing cells have no reason line
    assert lines[-1].startswith("3 cells: 1 pass, 1 fail, 0 hang, 1 unsupported")


def test_to_json_carries_every_cell_and_the_exit_code(table):
    results = [_cell(table, "worker-raise", "noop", "hang", 60.0, "late")]
    doc = table.to_json(results, wall_s=61.0)
    assert doc["exit_code"] == 1 and doc["wall_s"] == 61.0
    assert doc["cells"][0]["verdict"] == "hang" and doc["cells"][0]["fault"] == "worker-raise"


def test_every_fault_kind_and_job_is_registered(matrix):
    assert list(matrix.FAULTS) == ["worker-raise", "worker-sigkill", "node-loss", "node-pause",
                                   "elastic-grow", "elastic-shrink", "preemption",
                                   "failed-upload"]
    assert list(matrix.JOBS) == ["noop", "resume", "torch-ddp"]
    assert not any(f.unsupported for f in matrix.FAULTS.values())
    assert "preempt_node" in matrix.FAULTS["preemption"].needs
    assert matrix.FAULTS["preemption"].max_failures == 0  # charged to the preemption budget
    assert "fail_upload" in matrix.FAULTS["failed-upload"].needs


def _selection(matrix, *argv):
    impls, faults, jobs = matrix.selection(matrix.build_parser().parse_args(list(argv)))
    return impls, faults, [j.name for j in jobs]


def test_the_ci_slice_and_its_overrides(matrix):
    impls, faults, jobs = _selection(matrix, "--slice", "ci")
    assert impls == ["reference"]
    assert faults == ["worker-raise", "worker-sigkill", "node-loss", "node-pause",
                      "elastic-grow"]
    assert jobs == ["noop", "resume"]
    assert _selection(matrix, "--slice", "ci", "--jobs", "noop")[2] == ["noop"]
    assert _selection(matrix)[0] == ["reference", "ray"]
    assert _selection(matrix, "--impl", "pkg.adapter:make")[0] == ["pkg.adapter:make"]


def test_the_command_is_named_as_the_packaged_one(matrix):
    assert matrix.build_parser().prog == "python -m conformance matrix"


@pytest.mark.parametrize("fault, capability, hint", [
    ("preemption", "preempt_node", "preemption notice"),
    ("failed-upload", "fail_upload", "fail one checkpoint upload"),
])
def test_a_missing_capability_is_unsupported_with_what_it_cannot_do(fault, capability, hint):
    ray_like = types.SimpleNamespace(
        name="ray", capabilities=frozenset({"multinode", "add_node", "remove_node", "kill_node",
                                            "elastic"}),
        fit_deadline_s=1.0, reset=lambda: None)
    result = cells.run_cell(ray_like, faults.FAULTS[fault], cells.JOBS["noop"])
    assert result.verdict == "unsupported"
    assert result.reason.startswith(f"adapter 'ray' lacks the capability '{capability}': ")
    assert hint in result.reason


@pytest.mark.parametrize("argv, message", [
    (["--faults", "worker-raise,meteor"], r"--faults='worker-raise,meteor': unknown \['meteor'\]"),
    (["--jobs", ","], r"--jobs=',': unknown empty list"),
    (["--impl", "jax"], r"--impl='jax'.*'module:factory'"),
])
def test_bad_names_are_refused_with_the_allowed_ones(matrix, argv, message):
    with pytest.raises(ValueError, match=message):
        _selection(matrix, *argv)


class Recorder:
    def __init__(self):
        self.calls = []

    def start(self, name):
        self.calls.append(("start", name))

    def done(self, name, outcome):
        self.calls.append(("done", name, outcome))


def test_progress_hears_of_every_cell_even_when_setup_fails(matrix):
    progress = Recorder()
    results, versions = matrix.run_matrix(["nowhere_at_all:make"], ["worker-raise"],
                                          [matrix.JOBS["noop"], matrix.JOBS["resume"]], progress)
    assert [r.verdict for r in results] == ["fail", "fail"] and versions == {}
    assert [c[:2] for c in progress.calls] == [
        ("done", "nowhere_at_all:make worker-raise x noop"),
        ("done", "nowhere_at_all:make worker-raise x resume")]
    assert progress.calls[0][2] == "fail"
    assert results[0].reason.startswith("setup of 'nowhere_at_all:make' raised "
                                        "ModuleNotFoundError")


def test_plain_progress_lines(matrix):
    import io

    out = io.StringIO()
    with matrix.PlainLines(2, stream=out) as progress:
        progress.start("reference worker-raise x noop")
        progress.done("reference worker-raise x noop", "pass")
    assert out.getvalue() == "[1/2] reference worker-raise x noop: pass\n"


@pytest.fixture(scope="module")
def reference():
    from conformance.adapters import load

    impl = load("reference")
    impl.setup()
    try:
        yield impl
    finally:
        impl.reset()
        impl.teardown()


@pytest.mark.slow
@pytest.mark.parametrize("fault", ["worker-raise", "preemption", "failed-upload"])
def test_real_cells_pass_on_the_reference(reference, fault):
    result = cells.run_cell(reference, faults.FAULTS[fault], cells.JOBS["noop"])
    assert (result.verdict, result.reason) == ("pass", ""), result.detail
    assert 0 < result.seconds < reference.fit_deadline_s


@pytest.mark.slow
def test_the_ci_wrapper_runs_the_packaged_command():
    done = subprocess.run([sys.executable, "ci/fault_matrix.py", "--faults", "meteor"],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "python -m conformance matrix: error: --faults='meteor'" in done.stderr
