"""The fault matrix on a user's job file (`--job`): the contract's checks, and real runs of
the packaged command on docs/examples/matrix_job.py and on a job that does not resume."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conformance.matrix import JobFileError, cli, load_job
from conformance.matrix.job_file import resumed_where_restored

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "docs" / "examples" / "matrix_job.py"
MATRIX_TIMEOUT_S = 240


def _write(folder: Path, name: str, body: str) -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(body))
    return path


def test_the_example_job_keeps_the_contract():
    job = load_job(str(EXAMPLE))
    assert job.path == str(EXAMPLE) and job.name == "matrix_job.py"
    assert job.trainer == "DataParallelTrainer"
    assert job.config == {"lr": 0.1, "batch": 32}


@pytest.mark.parametrize("body, message", [
    ("x = 1\n", r"defines no train_func; define `def train_func\(config\): ...`"),
    ("def train_func(config, other): pass\n", r"cannot be called with one argument"),
    ("def train_func(config): pass\nTRAINER = 3\n", r"TRAINER=3; expected .*'torch.TorchTrainer'"),
    ("def train_func(config): pass\nCONFIG = [1]\n", r"CONFIG=\[1\]; expected a dict"),
    ("raise ImportError('no such thing')\n", r"importing it raised ImportError: no such thing"),
])
def test_a_job_file_that_breaks_the_contract_is_refused_naming_it(tmp_path, body, message):
    path = _write(tmp_path, "job.py", body)
    with pytest.raises(JobFileError, match=message):
        load_job(str(path))


def test_a_missing_job_file_is_refused():
    with pytest.raises(JobFileError, match=r"--job='nowhere.py': no such file"):
        load_job("nowhere.py")


def _jobs(*argv):
    return [j.name for j in cli.selection(cli.build_parser().parse_args(list(argv)))[2]]


def test_job_files_replace_the_job_axis_unless_jobs_are_named_too(tmp_path):
    a = _write(tmp_path, "a.py", "def train_func(config): pass\n")
    (tmp_path / "sub").mkdir()
    b = _write(tmp_path / "sub", "a.py", "def train_func(config): pass\n")
    assert _jobs("--slice", "ci", "--job", str(a)) == ["a.py"]
    assert _jobs("--jobs", "noop", "--job", str(a)) == ["noop", "a.py"]
    # comma-separated and repeated; two files of one name are named by their paths
    assert _jobs("--job", f"{a},{b}", "--job", str(a)) == [str(a), str(b)]


def test_a_bad_job_file_is_a_usage_error(tmp_path, capsys):
    path = _write(tmp_path, "job.py", "x = 1\n")
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["--impl", "reference", "--job", str(path)])
    assert exit_info.value.code == 2
    assert "defines no train_func" in capsys.readouterr().err


def _start(rank, attempt, restored_step):
    restored = None if restored_step is None else {"step": restored_step}
    return {"ev": "start", "rank": rank, "attempt": attempt, "world_size": 2,
            "restored": restored}


def _report(rank, attempt, step):
    return {"ev": "report", "rank": rank, "attempt": attempt, "step": step, "checkpoint": True}


def test_resumed_where_restored_wants_the_step_after_the_restored_one():
    first = [_start(0, 0, None), _start(1, 0, None), _report(0, 0, 0), _report(1, 0, 0),
             _report(0, 0, 1), _report(1, 0, 1)]
    resumed = first + [_start(0, 1, 1), _start(1, 1, 1), _report(0, 1, 2), _report(1, 1, 2)]
    assert resumed_where_restored(resumed).status == "valid"
    restarted = first + [_start(0, 1, 1), _start(1, 1, 1), _report(0, 1, 0), _report(1, 1, 0)]
    verdict = resumed_where_restored(restarted)
    assert verdict.status == "invalid"
    assert verdict.reason == ("attempt 1 rank 0 started from the checkpoint of step 1 and first "
                              "reported step 0, expected 2: the job did not resume from "
                              "train.get_checkpoint()")
    assert resumed_where_restored(first).status == "unknown"


def _matrix(*argv, command=("conformance.matrix.cli",)):
    return subprocess.run([sys.executable, "-m", *command, "--impl", "reference", *argv],
                          cwd=ROOT, capture_output=True, text=True, timeout=MATRIX_TIMEOUT_S)


def _packaged_command():
    """`python -m conformance matrix` once conformance/__main__.py has the subcommand."""
    probe = subprocess.run([sys.executable, "-m", "conformance", "matrix", "--help"],
                           cwd=ROOT, capture_output=True, text=True, timeout=60)
    if probe.returncode != 0 and "invalid choice: 'matrix'" in probe.stderr:
        pytest.skip("python -m conformance has no matrix subcommand yet")
    return ("conformance", "matrix")


@pytest.mark.slow
@pytest.mark.parametrize("packaged", [True, False], ids=["conformance-matrix", "matrix-cli"])
def test_the_example_job_passes_worker_sigkill(packaged):
    command = _packaged_command() if packaged else ("conformance.matrix.cli",)
    done = _matrix("--job", "docs/examples/matrix_job.py", "--faults", "worker-sigkill",
                   command=command)
    assert done.returncode == 0, done.stdout + done.stderr[-4000:]
    assert "1 cells: 1 pass, 0 fail, 0 hang, 0 unsupported" in done.stdout


BROKEN = '''
import importlib
import os
import tempfile


def train_func(config):
    train = importlib.import_module(config["impl"] + ".train")
    # never looks at train.get_checkpoint(): every attempt starts over at step 0
    for step in range(config["steps"]):
        with tempfile.TemporaryDirectory() as d:
            open(os.path.join(d, "weights"), "w").write(str(step))
            train.report({"step": step}, checkpoint=train.Checkpoint.from_directory(d))
'''
NO_STEP = '''
import importlib


def train_func(config):
    train = importlib.import_module(config["impl"] + ".train")
    for epoch in range(config["steps"]):
        train.report({"epoch": epoch})
'''


@pytest.mark.slow
def test_a_job_that_ignores_its_checkpoint_fails_a_fault_that_needs_resume(tmp_path):
    broken = _write(tmp_path, "starts_over.py", BROKEN)
    no_step = _write(tmp_path, "no_step.py", NO_STEP)
    out = tmp_path / "matrix.json"
    done = _matrix("--job", f"{broken},{no_step}", "--faults", "worker-sigkill",
                   "--json", str(out))
    assert done.returncode == 1, done.stdout + done.stderr[-4000:]
    cells = {c["job"]: c for c in json.loads(out.read_text())["cells"]}
    assert cells["starts_over.py"]["verdict"] == "fail"
    assert cells["starts_over.py"]["reason"] == (
        "journal check resumed_where_restored: invalid: attempt 1 rank 0 started from the "
        "checkpoint of step 0 and first reported step 0, expected 1: the job did not resume "
        "from train.get_checkpoint()")
    assert cells["no_step.py"]["verdict"] == "fail"
    assert "a matrix job reports metrics['step']" in cells["no_step.py"]["reason"]
