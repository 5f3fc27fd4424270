"""What a user sees of a reference fit: INFO logs as Ray's (attempts, failures and their
budget, restores), LoggingConfig honoured, train-level events and worker tags in the
cluster's history (so plans say rank=1, report=3), one line on Ctrl-C."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

pytestmark = pytest.mark.slow

SCRIPT = textwrap.dedent("""
    import os, sys, tempfile, time
    import reference
    from reference import train
    from reference.train import (Checkpoint, DataParallelTrainer, FailureConfig,
                                 LoggingConfig, RunConfig, ScalingConfig)

    def train_fn(config):
        ckpt = train.get_checkpoint()
        start = int(open(os.path.join(ckpt.path, "step")).read()) + 1 if ckpt else 0
        for step in range(start, config["steps"]):
            time.sleep(config["sleep"])
            with tempfile.TemporaryDirectory() as d:
                open(os.path.join(d, "step"), "w").write(str(step))
                train.report({"step": step}, checkpoint=Checkpoint.from_directory(d))

    level, steps, sleep = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    reference.init()   # SIMCLUSTER_ADDRESS is set by `simcluster run`: it connects
    result = DataParallelTrainer(
        train_fn, train_loop_config={"steps": steps, "sleep": sleep},
        scaling_config=ScalingConfig(num_workers=2),
        run_config=RunConfig(storage_path=sys.argv[4], name="console",
                             failure_config=FailureConfig(max_failures=2),
                             logging_config=LoggingConfig(log_level=level))).fit()
    print("final step", result.metrics["step"], flush=True)
""")

PLAN = """\
steps:
  - trigger: {event: train.report, match: {report: 2}}
    action: {kind: kill_worker, worker: "rank=1"}
"""


def _start(tmp_path, level: str, steps: int, sleep: float, plan: str | None = PLAN):
    (tmp_path / "job.py").write_text(SCRIPT)
    args = [sys.executable, "-m", "simcluster", "run", "--quiet", "--nodes", "2x2cpu",
            "--history", str(tmp_path / "history.jsonl")]
    if plan is not None:
        (tmp_path / "plan.yaml").write_text(plan)
        args += ["--faults", str(tmp_path / "plan.yaml")]
    return subprocess.Popen(
        [*args, str(tmp_path / "job.py"), level, str(steps), str(sleep), str(tmp_path / "s")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": os.getcwd()},
        # Ctrl-C as at a terminal, even where this runs as a background job (SIGINT ignored)
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def _events(tmp_path) -> list[dict]:
    path = tmp_path / "history.jsonl"
    lines = path.read_text().splitlines(keepends=True) if path.exists() else []
    return [json.loads(line) for line in lines if line.endswith("\n")]


def test_a_restart_is_logged_and_recorded_and_the_plan_names_the_rank(tmp_path):
    proc = _start(tmp_path, "INFO", steps=4, sleep=0.1)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert "final step 3" in out
    # Ray's INFO records, with the rank, the cause and the budget charged
    assert err.count("(TrainController) Attempting to start training worker group of size 2") == 2
    assert "(TrainController) Started training worker group of size 2 (attempt 0)." in err
    assert "(TrainController) [FailurePolicy] RETRY\n  Source: worker group\n" \
           "  Error count: 1 (max allowed: 2, FailureConfig.max_failures)\n" \
           "  Rank 1 failed: worker process of rank 1 died (signal 9 (SIGKILL))" in err
    assert "Started training worker group of size 2 (attempt 1), restoring from checkpoint " \
           f"{tmp_path / 's' / 'console'}/checkpoint_" in err
    assert "Traceback" not in err

    events = _events(tmp_path)
    names = [e["event"] for e in events if e["event"].startswith("train.")]
    assert names == ["train.run_start", "train.attempt_start", "train.report", "train.report",
                     "train.failure", "train.attempt_start", "train.report", "train.report",
                     "train.run_end"]
    by_worker = {e["worker"]: e["tags"] for e in events if e["event"] == "worker_start"}
    [fault] = [e for e in events if e["event"] == "fault"]
    assert by_worker[fault["worker"]] == {"run": "console", "attempt": 0, "rank": 1}
    reports = [e for e in events if e["event"] == "train.report"]
    assert [(r["attempt"], r["round"], r["report"]) for r in reports] == [
        (0, 0, 1), (0, 1, 2), (1, 0, 3), (1, 1, 4)]
    failure = next(e for e in events if e["event"] == "train.failure")
    assert (failure["ranks"], failure["budget"], failure["failures"], failure["limit"],
            failure["decision"]) == ([1], "max_failures", 1, 2, "retry")
    second = [e for e in events if e["event"] == "train.attempt_start"][1]
    assert second["checkpoint"] == reports[1]["checkpoint"]  # restored from report 2's
    assert events[-2]["event"] != "plan_unfired"
    assert not [e for e in events if e["event"] == "plan_unfired"]  # every step acted


def test_logging_config_sets_what_is_shown(tmp_path):
    (tmp_path / "w").mkdir()
    quiet = _start(tmp_path / "w", "WARNING", steps=3, sleep=0.0)
    _, err = quiet.communicate(timeout=120)
    assert quiet.returncode == 0, err
    assert "(TrainController)" not in err.replace(
        "(TrainController) Graceful shutdown of backend failed", "")
    (tmp_path / "d").mkdir()
    verbose = _start(tmp_path / "d", "DEBUG", steps=3, sleep=0.0)
    _, err = verbose.communicate(timeout=120)
    assert verbose.returncode == 0, err
    assert "(TrainController) Started training worker group" in err
    assert "(TrainController) RUNNING -> RUNNING: round 0 consolidated" in err  # DEBUG


def test_ctrl_c_prints_one_line_and_leaves_nothing_running(tmp_path):
    proc = _start(tmp_path, "INFO", steps=200, sleep=0.1, plan=None)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if any(e["event"] == "train.report" for e in _events(tmp_path)):
            break
        time.sleep(0.1)
    else:
        proc.kill()
        pytest.fail("the run never reported")
    proc.send_signal(signal.SIGINT)  # what a Ctrl-C does to `simcluster run`
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    run_dir = tmp_path / "s" / "console"
    [line] = [line for line in err.splitlines() if "interrupted" in line]
    assert line.startswith("reference.train: interrupted (Ctrl-C): stopped the run 'console' "
                           f"and its workers; its state is in {run_dir} (latest checkpoint: "
                           f"{run_dir}/checkpoint_"), line
    assert line.endswith("); fit() with the same RunConfig(name, storage_path) resumes it")
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert "the script was stopped by SIGINT (exit status 130)" in err
    events = _events(tmp_path)
    started = {e["worker"] for e in events if e["event"] == "worker_start"}
    exited = {e["worker"] for e in events if e["event"] == "worker_exit"}
    assert started and started == exited
    assert [e["state"] for e in events if e["event"] == "train.run_end"] == ["ABORTED"]


EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "examples", "fault_plans")
#: what each example plan must make happen on the script above (6 reports, 0.3 s apart)
EXAMPLE_EFFECTS = {
    "kill_rank1_after_report3.yaml": "Rank 1 failed: worker process of rank 1 died (signal 9",
    "node_loss_then_new_node.yaml": "died (signal 9 (SIGKILL))",
    "preempt_node_of_rank1.yaml": "Error count: 1 (max allowed: unlimited, "
                                  "FailureConfig.max_preemption_failures)\n  Rank ",
    "flaky_storage.yaml": "Rank 0 failed: OSError: 503 Slow Down (uploading ",
}


def test_every_example_plan_is_listed_here():
    assert sorted(os.listdir(EXAMPLES)) == sorted(EXAMPLE_EFFECTS)


@pytest.mark.parametrize("name", sorted(EXAMPLE_EFFECTS))
def test_the_example_plans_do_what_their_comments_say(tmp_path, name):
    with open(os.path.join(EXAMPLES, name)) as f:
        plan = f.read()
    proc = _start(tmp_path, "INFO", steps=6, sleep=0.3, plan=plan)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert EXAMPLE_EFFECTS[name] in err, err
    if name.startswith("preempt"):
        assert ", its node was preempted" in err, err
    assert "(the run fails)" not in err, err
    assert "Traceback" not in err, err
