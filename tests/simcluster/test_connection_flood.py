"""A flood of connections that never authenticate: the driver holds only a few of them, does
not spin when it runs out of descriptors, and a peer with the cluster's key still gets in.

The driver runs in a child process with a low descriptor limit (128), so that the flood
reaches it quickly and nothing of this process's limits changes."""

from __future__ import annotations

import os
import resource
import select
import socket
import subprocess
import sys
import time

import pytest

import simcluster
from simcluster._wire import parse_address

slow = pytest.mark.slow
LIMIT = 128

CHILD = r"""
import os, resource, sys, threading
resource.setrlimit(resource.RLIMIT_NOFILE,
                   (int(sys.argv[1]), resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
from simcluster import Cluster, NodeSpec
with Cluster(nodes=[NodeSpec(cpus=1)], history_path=sys.argv[2]) as cluster:
    loop = next(t for t in threading.enumerate() if t.name == "simcluster-loop")
    print(cluster.address, loop.native_id, cluster._driver.loop.max_unauthenticated, flush=True)
    eaten = []
    for line in sys.stdin:
        if line.strip() == "eat":  # every descriptor left: the next accept gets EMFILE
            try:
                while True:
                    eaten.append(os.open("/dev/null", os.O_RDONLY))
            except OSError:
                pass
        elif line.strip() == "free":
            for fd in eaten:
                os.close(fd)
            eaten = []
        print("ok", flush=True)
"""


def _line(proc, timeout: float = 30.0) -> str:
    if not select.select([proc.stdout], [], [], timeout)[0]:
        raise AssertionError(f"the driver process said nothing within {timeout} s")
    return proc.stdout.readline().strip()


def _tell(proc, command: str) -> None:
    proc.stdin.write(command + "\n")
    proc.stdin.flush()
    assert _line(proc) == "ok"


def _cpu_s(pid: int, tid: int) -> float:
    """User + system time of one thread so far."""
    with open(f"/proc/{pid}/task/{tid}/stat") as f:
        fields = f.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _flood(address: str, n: int) -> list[socket.socket]:
    """n connections that send nothing (those the backlog cannot take time out: skipped)."""
    out = []
    for _ in range(n):
        try:
            out.append(socket.create_connection(parse_address(address), timeout=0.5))
        except OSError:
            pass
    return out


def _close(socks) -> None:
    for s in socks:
        s.close()


@pytest.fixture
def driver_process(tmp_path):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < 1500:  # room here for the flood's 1,100
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(LIMIT),
                             str(tmp_path / "history.jsonl")],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        address, tid, cap = _line(proc).split()
        yield proc, address, int(tid), int(cap)
    finally:
        proc.stdin.close()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


@slow
def test_idle_connections_are_capped_and_a_keyed_peer_gets_in_meanwhile(driver_process):
    proc, address, tid, cap = driver_process
    assert cap == LIMIT // 4
    cpu0 = _cpu_s(proc.pid, tid)
    flood = _flood(address, 1100)
    try:
        start = time.monotonic()
        with simcluster.connect(address, timeout_s=5) as client:
            assert client.nodes[0].state == "up"
        assert time.monotonic() - start < 5
        held = len(os.listdir(f"/proc/{proc.pid}/fd"))
        assert held < LIMIT - 16, f"the driver holds {held} descriptors of {LIMIT}"
    finally:
        _close(flood)
    assert _cpu_s(proc.pid, tid) - cpu0 < 1.0


@slow
def test_out_of_descriptors_the_driver_rests_and_lets_a_keyed_peer_in_afterwards(
        driver_process):
    proc, address, tid, _ = driver_process
    _tell(proc, "eat")
    flood = _flood(address, 20)
    try:
        cpu0 = _cpu_s(proc.pid, tid)
        time.sleep(1.0)  # what the loop does in a second out of descriptors, not a wait
        busy = _cpu_s(proc.pid, tid) - cpu0
        assert busy < 0.2, f"the event loop used {busy:.2f} s of CPU in 1 s out of descriptors"
    finally:
        _close(flood)
        _tell(proc, "free")
    with simcluster.connect(address, timeout_s=5) as client:
        assert client.nodes[0].state == "up"
