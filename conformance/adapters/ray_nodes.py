"""Nodes the suite adds to a Ray cluster it joined and does not own (`--ray-address ADDR
--allow-node-faults`), so that the checks and fault-matrix cells that add, remove and kill
nodes can run there without touching a node of the operator's.

Each node is a `ray start --address ADDR --block` process started here, in a process group
of its own, labelled `trainspec.io/nodes=<this cluster's id>`. While such nodes are up the
adapter gives every fit's ScalingConfig that label selector (unless it has one), so the
workers run on the suite's nodes only, as they would on a cluster the suite built. Removing
a node stops its process group (SIGTERM, so Ray drains it); killing one SIGKILLs the group
and, on a loopback head, every process of that node's IP. Leaving the block kills every
node still up. The GCS keeps the dead nodes in its table, as it keeps any node that left.

This machine must be able to host a node of the cluster: the same Ray version, and the
head and the other nodes able to reach it (on a loopback head each node gets a loopback
address 127.A.B.N of its own).

Without `--allow-node-faults` the accelerator checks use the cluster's own nodes as they
are: `matching_nodes` picks one like each node a check asked for, and `ExistingNodes` is
the handle that changes none of them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid

from conformance.adapters.base import ClusterHandle, NodeSpec, Unsupported

LABEL = "trainspec.io/nodes"
JOIN_TIMEOUT_S = 120.0


@dataclasses.dataclass(eq=False)
class JoinedNode:
    spec: NodeSpec
    ip: str | None
    proc: subprocess.Popen
    log: str
    node_id: str | None = None


def _ray_bin() -> str:
    beside = os.path.join(os.path.dirname(sys.executable), "ray")
    return beside if os.path.exists(beside) else (shutil.which("ray") or "ray")


def _is_loopback(address: str) -> bool:
    host = address.split("://", 1)[-1].rpartition(":")[0].strip("[]")
    return host in ("localhost", "::1") or host.startswith("127.")


def pin(make_trainer, label_value: str):
    """`make_trainer` (a conformance TrainerFactory) with its ScalingConfig's label_selector
    set to the suite's nodes, when it has a ScalingConfig without one; else as it is."""
    kwargs = getattr(make_trainer, "kwargs", None)
    scaling = kwargs.get("scaling_config") if isinstance(kwargs, dict) else None
    if scaling is None or getattr(scaling, "label_selector", None) or \
            not dataclasses.is_dataclass(make_trainer):
        return make_trainer
    scaling = dataclasses.replace(scaling, label_selector={LABEL: label_value})
    return dataclasses.replace(make_trainer, kwargs={**kwargs, "scaling_config": scaling})


class JoinedNodes(ClusterHandle):
    """The nodes this suite added to the cluster at `address` (see the module docstring)."""

    def __init__(self, address: str):
        self.address = address
        self.label_value = uuid.uuid4().hex[:12]
        self.nodes: list[JoinedNode] = []
        self._loopback = _is_loopback(address)
        # loopback addresses of this cluster's own (127.A.B.N): a dead node's address is
        # not reused, since a node that starts at it later times out during startup
        self._ip_base = f"127.{random.randint(1, 254)}.{random.randint(0, 255)}"
        self._next_ip = 1
        self._logs = tempfile.mkdtemp(prefix="trainspec-nodes-")

    # ---------------------------------------------------------------- nodes
    def add_node(self, spec: NodeSpec, wait: bool = True) -> JoinedNode:
        """Start a node of `spec` and (`wait`) return once it is alive in the GCS. Start
        them one at a time: here two `ray start`s at once on one machine made one time out
        ("The current node timed out during startup")."""
        ip = None
        cmd = [_ray_bin(), "start", "--address", self.address, "--block",
               "--num-cpus", str(spec.cpus), "--num-gpus", str(spec.gpus),
               "--labels", f"{LABEL}={self.label_value}", "--disable-usage-stats"]
        resources = spec.custom_resources()
        if resources:
            cmd += ["--resources", json.dumps(resources)]
        if self._loopback:
            ip = f"{self._ip_base}.{self._next_ip}"
            self._next_ip += 1
            cmd += ["--node-ip-address", ip]
        log = os.path.join(self._logs, f"node-{len(self.nodes)}.log")
        with open(log, "w") as out:
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                    start_new_session=True)
        node = JoinedNode(spec, ip, proc, log)
        self.nodes.append(node)
        if wait:
            self.wait_for_nodes()
        return node

    def wait_for_nodes(self, timeout_s: float = JOIN_TIMEOUT_S) -> None:
        """Until every node added is alive in the GCS (each then knows its node id)."""
        import ray

        deadline = time.monotonic() + timeout_s
        while True:
            mine = [n for n in ray.nodes()
                    if n.get("Alive") and n.get("Labels", {}).get(LABEL) == self.label_value]
            known = {n.node_id for n in self.nodes if n.node_id}
            for node in self.nodes:
                if node.node_id:
                    continue
                found = [n["NodeID"] for n in mine if n["NodeID"] not in known
                         and (node.ip is None or n.get("NodeManagerAddress") == node.ip)]
                if found:
                    node.node_id = found[0]
                    known.add(found[0])
            if all(n.node_id for n in self.nodes):
                return
            stopped = [n for n in self.nodes if n.proc.poll() is not None and not n.node_id]
            if stopped or time.monotonic() > deadline:
                why = "exited" if stopped else f"did not join in {timeout_s:.0f} s"
                tail = _tail((stopped or self.nodes)[0].log)
                raise RuntimeError(f"--allow-node-faults: a node this suite started {why} "
                                   f"(`ray start --address {self.address}`): {tail}")
            time.sleep(0.3)

    def remove_node(self, node: JoinedNode) -> None:
        self._stop(node, graceful=True)

    def kill_node(self, node: JoinedNode) -> None:
        self._stop(node, graceful=False)

    def close(self) -> None:
        """Kill every node still up, then wait until the GCS shows none of them alive."""
        gone = [n.node_id for n in self.nodes if n.node_id]
        for node in list(self.nodes):
            self._stop(node, graceful=False, wait=False)
        for node_id in gone:
            _wait_dead(node_id)
        shutil.rmtree(self._logs, ignore_errors=True)

    # ---------------------------------------------------------------- helpers
    def _stop(self, node: JoinedNode, graceful: bool, wait: bool = True) -> None:
        if graceful:
            _signal_group(node.proc, signal.SIGTERM)
            try:
                node.proc.wait(30)
            except subprocess.TimeoutExpired:
                graceful = False
        if not graceful:
            _signal_group(node.proc, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                node.proc.wait(10)
        if node.ip:  # what left the group: Ray's workers of that node carry its address
            for pid in processes_mentioning(f"={node.ip}\0"):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        self.nodes.remove(node)
        if node.node_id and wait:
            _wait_dead(node.node_id)


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, sig)


def processes_mentioning(marker: str) -> list[int]:
    """Pids of the processes (this one left out) whose command line holds `marker`."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if marker.encode() in f.read():
                    found.append(int(pid))
        except OSError:
            pass
    return [p for p in found if p != os.getpid()]


def _wait_dead(node_id: str, timeout_s: float = 60.0) -> None:
    """Until the GCS no longer shows the node alive (it notices a killed raylet at once,
    through the closed connection, or after its health checks)."""
    import ray

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not any(n["NodeID"] == node_id and n.get("Alive") for n in ray.nodes()):
            return
        time.sleep(0.3)


def _tail(path: str, lines: int = 3) -> str:
    try:
        with open(path) as f:
            return " | ".join(line.strip() for line in f.readlines()[-lines:])
    except OSError:
        return "(no log)"


class ExistingNodes(ClusterHandle):
    """The nodes of a cluster the suite joined that are like the ones a check asked for; it
    changes none of them."""

    existing = True

    def __init__(self, address: str, nodes: list[dict]):
        self._address, self.nodes = address, nodes

    def add_node(self, spec: NodeSpec):
        raise Unsupported(f"--ray-address {self._address}: the suite adds no nodes there")

    def remove_node(self, node) -> None:
        raise Unsupported(f"--ray-address {self._address}: the suite removes no nodes there")


def matching_nodes(address: str, wanted: list[NodeSpec]) -> list[dict]:
    """One distinct alive node of the joined cluster per spec, with at least its GPUs, TPU
    chips and custom resources; Unsupported, saying what is missing, where there is none."""
    import ray

    if any(spec.accelerator not in (None, "CUDA") for spec in wanted):
        raise Unsupported(f"--ray-address {address}: the suite cannot tell which of the "
                          "cluster's GPUs are AMD (Ray counts every kind as GPU)")
    alive = [n for n in ray.nodes() if n.get("Alive")]
    chosen: list[dict] = []
    for spec in wanted:
        need = {k: v for k, v in {**spec.custom_resources(), "GPU": spec.gpus}.items() if v}
        fits = [n for n in alive if n not in chosen
                and all(n.get("Resources", {}).get(k, 0) >= v for k, v in need.items())]
        if not fits:
            raise Unsupported(f"--ray-address {address}: no node of the cluster has "
                              f"{', '.join(f'{v:g} {k}' for k, v in need.items())} for this "
                              "check (it uses the cluster's nodes as they are)")
        chosen.append(fits[0])
    return chosen
