"""`--impl ray --ray-address ADDR`: the suite against a Ray cluster somebody else runs. A real
head is started here with `ray start --head --num-cpus 4` (its own HOME, so its token is its
own) and stopped at the end; the suite joins it, runs, and leaves it running with nothing of
its own behind. The commands run for real, in child processes."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time

import pytest
from conformance_cli_run import run

from conformance.adapters.ray_nodes import processes_mentioning

ray = pytest.importorskip("ray")

RAY_BIN = os.path.join(os.path.dirname(sys.executable), "ray")
#: a check that passes, one whose fit fails on purpose (the adapter must clean up after it
#: without a fresh session), and one that needs a cluster the suite would build (skips)
RAY_SERVICES = {"_AutoscalingCoordinatorActor"}
SUBSET = ("check_result_fields or check_worker_failures_keyed_by_rank or "
          "check_elastic_grows_onto_new_node")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _processes_of(marker: str) -> list[int]:
    """Pids of processes whose command line mentions `marker` (the head's own temp dir)."""
    return processes_mentioning(marker)


@contextlib.contextmanager
def _ray_head(home, extra=()):
    """A running Ray head (token authentication on, as Ray 2.60 sets it up by default) and
    the environment a driver on this machine needs to join it. It runs in the foreground
    (`--block`) in a process group of its own, with its own temp dir, and only that is
    stopped at the end: `ray stop` would stop every Ray on the machine."""
    temp = tempfile.mkdtemp(prefix="rh-", dir="/tmp")  # Ray's socket paths must be short
    port = _free_port()
    env = {**os.environ, "HOME": str(home), "RAY_USAGE_STATS_ENABLED": "0",
           "RAY_AUTH_MODE": "token"}
    env.pop("RAY_ADDRESS", None)
    subprocess.run([RAY_BIN, "get-auth-token", "--generate"], env=env, check=True,
                   capture_output=True, timeout=60)
    proc = subprocess.Popen(
        [RAY_BIN, "start", "--head", "--block", "--num-cpus", "4", *extra, "--port", str(port),
         "--temp-dir", temp, "--include-dashboard=false", "--disable-usage-stats"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, "no Ray head"
                time.sleep(0.5)
        yield f"127.0.0.1:{port}", env, temp
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            # a head that ran the suite can take 30 s and more to go; what it still runs
            # is killed, and nothing of it survives (the sweep below)
            proc.wait(5)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        for pid in _processes_of(temp):  # what left the group (Ray daemonizes some parts)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        shutil.rmtree(temp, ignore_errors=True)


@pytest.fixture(scope="module")
def head(tmp_path_factory):
    # two declared GPUs, for the accelerator checks that use the cluster's own nodes
    with _ray_head(tmp_path_factory.mktemp("ray-home"), ("--num-gpus", "2")) as (address, env,
                                                                               _):
        yield address, env


@pytest.mark.slow
def test_the_test_head_stops_alone_and_leaves_no_process(tmp_path):
    with _ray_head(tmp_path) as (address, env, temp):
        assert _processes_of(temp)  # its GCS, raylet, ... name their session under temp
    assert _processes_of(temp) == []


_SURVEY = textwrap.dedent("""
    import json, sys, ray
    from ray._private.state import state
    from ray.core.generated import gcs_pb2
    ray.init(address=sys.argv[1], log_to_driver=False, logging_level="ERROR")
    me = ray.get_runtime_context().get_job_id()
    alive = [a for a in state.actor_table(None).values() if a["State"] != "DEAD"]
    actors = [a["ActorClassName"] for a in alive if not a["IsDetached"]]
    services = sorted(a["ActorClassName"] for a in alive if a["IsDetached"])
    groups = [gcs_pb2.PlacementGroupTableData.FromString(raw)
              for raw in state._connect_and_get_accessor().get_placement_group_table()]
    print(json.dumps({
        "cpus": ray.cluster_resources().get("CPU"),
        "nodes": len([n for n in ray.nodes() if n["Alive"]]),
        "jobs": len([j for j in state.job_table() if j["JobID"] != me]),
        "actors": actors, "services": services,
        "groups": [g.placement_group_id.hex() for g in groups
                   if g.state != gcs_pb2.PlacementGroupTableData.REMOVED]}))
""")


def _survey(address: str, env: dict) -> dict:
    out = subprocess.run([sys.executable, "-c", _SURVEY, address], env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


#: the accelerator checks that use the cluster's own nodes (GPU sharing and fractions are
#: scheduling, the same on any Ray cluster: the local-session and cluster_utils runs of CI
#: cover them, two fits fewer here)
ACCELERATORS = "(check_accelerators and not share and not fractional)"


@pytest.fixture(scope="module")
def joined_run(head, tmp_path_factory):
    """One run of the suite on the head, for both tests below (a run's driver, its Ray
    connection and its imports cost tens of CPU-seconds): SUBSET and ACCELERATORS, then the
    cluster as the run left it."""
    address, env = head
    out = tmp_path_factory.mktemp("joined")
    result = run("run", "--impl", "ray", "--ray-address", address, "--out", str(out),
                 "--progress", "off", "--", "-k", f"{SUBSET} or {ACCELERATORS}", "-rs",
                 env=env)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    report = json.loads((out / "ray.json").read_text())
    return report, output, _survey(address, env)


@pytest.mark.slow
def test_the_suite_runs_on_a_running_cluster_and_leaves_it_running_and_clean(head,
                                                                            joined_run):
    address, _ = head
    report, output, after = joined_run
    statuses = {c["id"].split("::")[1]: c["status"] for c in report["checks"]
                if not c["id"].startswith("check_accelerators.py")}
    assert statuses == {"check_result_fields": "pass",
                        "check_worker_failures_keyed_by_rank": "pass",
                        "check_elastic_grows_onto_new_node": "skip"}, output
    assert "the suite does not own this cluster" in output, output  # the skip's reason
    assert f"cluster at {address}" in report["adapter"]
    assert after["cpus"] == 4.0  # still up: the suite never stopped it
    assert after["jobs"] >= 1    # the suite's driver was there
    assert after["actors"] == [] and after["groups"] == [], after
    # what may stay: Ray's own detached, cluster-wide services, started by a job's first use
    # of Ray Data and shared by later jobs (the suite starts no detached actor itself)
    assert set(after["services"]) <= RAY_SERVICES, after


ACCELERATOR_VERDICTS = {
    # on the head's two GPUs, as they are
    "accelerator.gpu-ids": "pass", "accelerator.torch-devices": "pass",
    # declared GPUs torch cannot reach; nothing AMD, A100/T4 or TPU on the cluster
    "accelerator.prepare-on-device": "skip", "accelerator.nccl": "skip",
    "accelerator.rocm-ids": "skip", "accelerator.type": "skip", "accelerator.tpu-chips": "skip"}


@pytest.mark.slow
def test_the_accelerator_checks_use_the_clusters_own_gpus(joined_run):
    report, output, _ = joined_run
    clauses = report["clauses"]
    assert {c: clauses[c]["status"] for c in ACCELERATOR_VERDICTS} == ACCELERATOR_VERDICTS, \
        output
    assert "no node of the cluster has 1 accelerator_type:A100" in output, output
    assert "the GPUs are declared, not real" in output, output


@pytest.mark.slow
def test_with_allow_node_faults_nodes_of_the_suites_own_are_added_faulted_and_gone(head,
                                                                                 tmp_path):
    address, env = head
    result = run("run", "--impl", "ray", "--ray-address", address, "--allow-node-faults",
                 "--out", str(tmp_path), "--progress", "off", "--", "-k",
                 "check_ranks_contiguous_per_node or check_elastic_grows_onto_new_node", "-rs",
                 env=env)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    # 4 workers on the 2 nodes it added (2 CPUs each), none on the head's 4 CPUs
    assert "1 passed, 1 skipped" in output, output
    assert "_count_possible_workers" in output, output  # why elastic runs are left out
    # a node of its own killed under a running fit, through the matrix
    matrix = run("matrix", "--impl", "ray", "--faults", "node-loss", "--jobs", "noop",
                 "--ray-address", address, "--allow-node-faults",
                 "--json", str(tmp_path / "m.json"), env=env)
    assert matrix.returncode == 0, matrix.stdout + matrix.stderr
    (cell,) = json.loads((tmp_path / "m.json").read_text())["cells"]
    assert cell["verdict"] == "pass", cell
    after = _survey(address, env)
    assert after["cpus"] == 4.0 and after["nodes"] == 1, after  # the head alone again
    assert after["actors"] == [] and after["groups"] == [], after
    assert _processes_of("trainspec.io/nodes") == []  # no `ray start` of its own left


@pytest.mark.slow
def test_without_the_clusters_token_the_suite_stops_at_once_saying_how_to_pass_it(head,
                                                                                  tmp_path):
    address, env = head
    stranger = {**env, "HOME": str(tmp_path)}  # no ~/.ray/auth_token there
    for name in ("RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"):
        stranger.pop(name, None)
    result = run("run", "--impl", "ray", "--ray-address", address, "--out", str(tmp_path),
                 "--progress", "off", "--", "-k", "check_result_fields", env=stranger)
    output = result.stdout + result.stderr
    assert result.returncode == 4, output  # a usage error, not 1 failure per check
    assert f"--ray-address '{address}': cannot connect" in output, output
    assert "RAY_AUTH_TOKEN" in output and "passed" not in output, output


def test_nobody_at_the_address_is_one_clear_usage_error(tmp_path):
    address = f"127.0.0.1:{_free_port()}"
    result = run("run", "--impl", "ray", "--ray-address", address, "--out", str(tmp_path),
                 "--progress", "off", "--", "-k", "check_result_fields",
                 env={"RAY_AUTH_MODE": "disabled"})
    output = result.stdout + result.stderr
    assert result.returncode == 4, output
    assert f"--ray-address '{address}': cannot connect" in output, output
    assert output.count("cannot connect") == 1 and "Traceback" not in output, output


def test_the_option_is_refused_for_another_implementation():
    result = run("run", "--impl", "reference", "--ray-address", "127.0.0.1:6379")
    assert result.returncode == 2
    assert "--ray-address '127.0.0.1:6379': only --impl ray runs on a Ray cluster" in \
        result.stderr


