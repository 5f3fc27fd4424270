"""The `simcluster` CLI: `run` a script on a cluster with a fault plan, `history` a file."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from simcluster import FaultPlan, NodeSpec, Trigger, action
from simcluster.cli.main import main, parse_nodes

SCRIPT = textwrap.dedent("""
    import os, sys
    import simcluster
    from simcluster import worker

    def job():
        ch = worker.channel()
        for i in range(5):
            ch.send(i)
            ch.recv(10)

    c = simcluster.connect(os.environ["SIMCLUSTER_ADDRESS"])
    c.on_message(lambda w, m: c.send(w, "ack"))
    print("nodes", len(c.nodes), sys.argv[1:], flush=True)
    h = c.start_worker("node-0", job, name="w0")
    print("signal", h.wait(20).signal, flush=True)
    sys.exit(3)
""")


def test_parse_nodes():
    assert parse_nodes("2x4cpu,1x2gpu") == [NodeSpec(cpus=4), NodeSpec(cpus=4),
                                           NodeSpec(cpus=1, gpus=2)]
    assert parse_nodes("1x8cpu+2gpu:A100") == [NodeSpec(cpus=8, gpus=2, accelerator_type="A100")]
    assert parse_nodes("3cpus") == [NodeSpec(cpus=3)]
    with pytest.raises(ValueError, match="cannot read '4xpu'"):
        parse_nodes("1x4xpu")


@pytest.mark.slow
def test_run_applies_the_plan_and_exits_with_the_scripts_code(tmp_path):
    script = tmp_path / "job.py"
    script.write_text(SCRIPT)
    plan = tmp_path / "plan.json"
    plan.write_text(FaultPlan([(Trigger.message("w0", nth=2),
                                action("kill_worker", worker="$trigger"))]).to_json())
    history = tmp_path / "history.jsonl"
    done = subprocess.run(
        [sys.executable, "-m", "simcluster", "run", "--nodes", "2x4cpu,1x2gpu", "--faults",
         str(plan), "--history", str(history), str(script), "a", "--b"],
        capture_output=True, text=True, timeout=60, cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": os.getcwd()})
    assert done.returncode == 3, done.stderr
    assert "nodes 3 ['a', '--b']" in done.stdout and "signal 9" in done.stdout
    assert f"history: {history}" in done.stderr
    assert "fault action=kill_worker" in done.stderr  # the plain progress lines
    events = [json.loads(line) for line in history.read_text().splitlines()]
    assert [e["action"] for e in events if e["event"] == "fault"] == ["kill_worker"]
    assert events[-1]["event"] == "cluster_stop"


def test_history_prints_a_timeline(tmp_path, capsys):
    path = tmp_path / "h.jsonl"
    lines = [{"t": 10.0, "seq": 1, "event": "cluster_start", "address": "127.0.0.1:1"},
             {"t": 10.5, "seq": 2, "event": "message", "worker": "worker-0"},
             {"t": 11.25, "seq": 3, "event": "fault", "action": "kill_node", "node": "node-1"}]
    path.write_text("".join(json.dumps(e) + "\n" for e in lines))
    assert main(["history", str(path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["+0.000s", "cluster_start", "address=127.0.0.1:1"]
    assert out[1].split() == ["+1.250s", "fault", "action=kill_node", "node=node-1"]
    assert "1 message events not shown" in out[2]
    assert main(["history", str(path), "--events", "message"]) == 0
    assert "worker=worker-0" in capsys.readouterr().out
    assert main(["history", str(tmp_path / "missing.jsonl")]) == 2


def test_run_refuses_bad_arguments(tmp_path, capsys):
    assert main(["run", "--nodes", "2xbanana", "x.py"]) == 2
    assert "cannot read" in capsys.readouterr().err
    assert main(["run", str(tmp_path / "missing.py")]) == 2


QUIET_SCRIPT = textwrap.dedent("""
    import os, signal, sys
    import simcluster
    c = simcluster.connect(os.environ["SIMCLUSTER_ADDRESS"])
    c.record_event("job.step", n=1)
    if sys.argv[1:] == ["interrupt"]:
        os.kill(os.getpid(), signal.SIGINT)  # an uncaught KeyboardInterrupt: status 130
""")


def _run_cli(tmp_path, plan_text: str | None, *script_args):
    script = tmp_path / "quiet.py"
    script.write_text(QUIET_SCRIPT)
    args = [sys.executable, "-m", "simcluster", "run", "--quiet"]
    if plan_text is not None:
        (tmp_path / "plan.yaml").write_text(plan_text)
        args += ["--faults", str(tmp_path / "plan.yaml")]
    # SIGINT as at a terminal, even where the tests run as a background job (SIGINT ignored)
    return subprocess.run([*args, str(script), *script_args], capture_output=True, text=True,
                          timeout=60, cwd=tmp_path, env={**os.environ, "PYTHONPATH": os.getcwd()},
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def test_run_fails_when_a_planned_fault_never_acted(tmp_path):
    done = _run_cli(tmp_path, "steps:\n"
                    "  - trigger: {event: job.step, match: {n: 2}}\n"
                    "    action: {kind: kill_node, node: 0}\n")
    assert done.returncode == 3, done.stderr
    assert ("fault plan step 0 (kill_node(node='node-0') at 1st job.step(n=2)) never acted: "
            "its trigger never came (the run fails)") in done.stderr
    assert "exit status 3: the script passed, but not every planned fault happened" \
        in done.stderr


def test_run_passes_when_only_optional_faults_never_acted(tmp_path):
    done = _run_cli(tmp_path, "steps:\n"
                    "  - trigger: {event: job.step, match: {n: 1}}\n"
                    "    action: {kind: kill_worker, worker: 'rank=1'}\n"
                    "    optional: true\n")
    assert done.returncode == 0, done.stderr
    assert "it fired but found no target" in done.stderr
    assert "(optional, so not a failure)" in done.stderr


def test_run_reports_the_exit_status_the_shell_sees(tmp_path):
    done = _run_cli(tmp_path, None, "interrupt")
    assert done.returncode == 130, done.stderr
    assert "the script was stopped by SIGINT (exit status 130)" in done.stderr


def test_run_names_the_mistake_in_a_plan_file(tmp_path):
    done = _run_cli(tmp_path, "steps:\n  - trigger: {after_s: 1}\n"
                    "    action: {kind: kill_worker, wrker: 'rank=1'}\n")
    assert done.returncode == 2
    assert "plan.yaml: not a valid fault plan" in done.stderr
    assert "steps[0].action: Additional properties are not allowed ('wrker' was unexpected)" \
        in done.stderr


def test_history_refuses_unknown_event_names_listing_the_valid_ones(tmp_path):
    path = tmp_path / "h.jsonl"
    lines = [{"t": 1.0, "seq": 1, "event": "cluster_start"},
             {"t": 2.0, "seq": 2, "event": "train.report", "report": 1}]
    path.write_text("".join(json.dumps(e) + "\n" for e in lines))
    done = subprocess.run([sys.executable, "-m", "simcluster", "history", str(path), "--events",
                           "fault,train.reprot"], capture_output=True, text=True, timeout=30,
                          env={**os.environ, "PYTHONPATH": os.getcwd()})
    assert done.returncode == 2
    assert "unknown event name(s) ['train.reprot']; valid: " in done.stderr
    assert "train.report" in done.stderr and "worker_exit" in done.stderr
    assert main(["history", str(path), "--events", "train.report"]) == 0


def test_every_subcommand_documents_its_options_with_defaults():
    for command in ("run", "history"):
        done = subprocess.run([sys.executable, "-m", "simcluster", command, "--help"],
                              capture_output=True, text=True, timeout=30,
                              env={**os.environ, "PYTHONPATH": os.getcwd()})
        assert done.returncode == 0
        text = " ".join(done.stdout.split())
        options = [o for o in ("--nodes", "--faults", "--provider", "--history", "--quiet",
                               "--messages", "--events", "--plot") if o in text]
        assert len(options) >= 3, text
        assert text.count("(default: ") >= len(options), text
