"""The `docker` provider: each node a container, through the Docker SDK (`pip install
'trainspec[docker]'`), imported only when this provider is used.

Design note. A node's container runs this machine's interpreter and packages, bind-mounted
read-only at the same paths into `image` (default: the official python image of the same
minor version, for a compatible C library), with `pid_mode="host"` so the supervisor's pid
is a host pid: the driver's killpg / SIGSTOP work on containers as on processes, and a
worker's pid means the same everywhere. Each cluster has its own bridge network
`sc-<tag>` with 10.214.<k>.0/24; the driver listens on its gateway, node i gets .i+2. The
secret reaches a node through the cluster's key file, mounted read-only, never through the
container's environment (which `docker inspect` shows). A partition disconnects the
container from the network; a heal reconnects it with the same address.

Cleanup: a supervisor that loses its driver kills its group, which ends the container
(auto-removed); `close` force-removes the cluster's containers and network; every new
docker cluster removes containers and networks labelled with a dead owner pid.
"""

from __future__ import annotations

import json
import os
import sys
import threading

from .._errors import SimclusterError
from .._keys import key_path
from ..procfs import start_time
from .base import Provider, base36

LABEL = "simcluster.owner"
_counter = 0


def client_or_reason():
    """(docker client, None), or (None, why no Docker engine can be used here)."""
    try:
        import docker
    except ImportError:
        return None, "the docker SDK is not installed (pip install 'trainspec[docker]')"
    try:
        client = docker.from_env(timeout=5)
        client.ping()
    except Exception as exc:
        where = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
        return None, f"no Docker engine answered at {where} ({type(exc).__name__}: {exc})"
    return client, None


class DockerProvider(Provider):
    name = "docker"
    partitions = True

    def __init__(self, image: str | None = None) -> None:
        global _counter
        _counter += 1
        self.image = image or f"python:{sys.version_info[0]}.{sys.version_info[1]}-slim"
        self.tag = base36(os.getpid()) + base36(_counter)
        self.owner = f"{os.getpid()}:{start_time(os.getpid())}"
        self.client = self.network = None
        self.subnet = ""
        self.containers: dict[str, object] = {}
        self._lock = threading.Lock()

    def open(self, host: str) -> str:
        client, why = client_or_reason()
        if client is None:
            raise SimclusterError(f"Cluster(provider='docker') cannot run here: {why}; start "
                                  "a Docker engine or use provider='process'")
        import docker.types

        self.client = client
        reap_stale(client)
        used = {cfg.get("Subnet") for net in client.networks.list()
                for cfg in (net.attrs.get("IPAM") or {}).get("Config") or []}
        k = next(k for k in range(1, 255) if f"10.214.{k}.0/24" not in used)
        self.subnet = f"10.214.{k}"
        pool = docker.types.IPAMPool(subnet=f"{self.subnet}.0/24", gateway=f"{self.subnet}.1")
        self.network = client.networks.create(
            f"sc-{self.tag}", driver="bridge", ipam=docker.types.IPAMConfig(pool_configs=[pool]),
            labels={LABEL: self.owner})
        return f"{self.subnet}.1"

    def node_address(self, index: int) -> str:
        if index > 250:
            raise SimclusterError(f"provider='docker' has room for 251 nodes (index {index})")
        return f"{self.subnet}.{index + 2}"

    def spawn(self, node, fields, factory, report) -> None:
        threading.Thread(target=self._run, args=(node, fields, report), daemon=True,
                         name=f"simcluster-docker-{node.id}").start()

    def _run(self, node, fields, report) -> None:
        boot = {**fields, "sys_path": [os.path.abspath(p or os.curdir) for p in sys.path]}
        mounts = {p for p in {sys.prefix, sys.base_prefix, *boot["sys_path"]} if os.path.exists(p)}
        key = key_path(boot["address"])
        volumes = {p: {"bind": p, "mode": "ro"} for p in sorted(mounts)}
        volumes[str(key)] = {"bind": str(key), "mode": "ro"}
        env = {k: v for k, v in fields["env"].items() if k != "PYTHONPATH"}
        env["SIMCLUSTER_BOOT"] = json.dumps({k: v for k, v in boot.items() if k != "env"})
        try:
            endpoint = self.client.api.create_endpoint_config(ipv4_address=node.address)
            container = self.client.containers.run(
                self.image, [sys.executable, "-m", "simcluster.providers.docker"], detach=True,
                auto_remove=True, pid_mode="host", name=f"sc-{self.tag}-{node.index}",
                environment=env, volumes=volumes, labels={LABEL: self.owner},
                network=self.network.name, working_dir=os.getcwd(),
                networking_config={self.network.name: endpoint})
        except Exception as exc:
            report({"node_id": node.id, "error": f"docker run failed: {exc}"})
            return
        with self._lock:
            self.containers[node.id] = container

    def set_cut(self, node, cut: bool) -> None:
        container = self.containers[node.id]
        if cut:
            self.network.disconnect(container)
        else:
            self.network.connect(container, ipv4_address=node.address)

    def close(self) -> None:
        if self.client is None:
            return
        for container in list(self.containers.values()):
            try:
                container.remove(force=True)
            except Exception:
                pass  # auto-removed already
        if self.network is not None:
            try:
                self.network.remove()
            except Exception:
                pass
        self.client.close()
        self.client = None


def reap_stale(client) -> None:
    """Remove containers and networks whose owner (pid:start time) is no longer alive."""
    def dead(labels) -> bool:
        pid, _, start = (labels or {}).get(LABEL, "0:").partition(":")
        return start_time(int(pid or 0)) != start
    for container in client.containers.list(all=True, filters={"label": LABEL}):
        if dead(container.labels):
            container.remove(force=True)
    for network in client.networks.list(filters={"label": LABEL}):
        if dead(network.attrs.get("Labels")):
            network.remove()


def node_main() -> None:
    """A node in a container: boot from the environment, secret from the mounted key."""
    boot = json.loads(os.environ.pop("SIMCLUSTER_BOOT"))
    sys.path[:0] = [p for p in boot["sys_path"] if p not in sys.path]
    boot["secret"] = key_path(boot["address"]).read_text().split()[0]  # line 1: the secret
    os.setsid()
    from ..node.supervisor import run_node

    run_node(boot)
    os._exit(0)


if __name__ == "__main__":
    node_main()
