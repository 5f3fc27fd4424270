"""The `netns` provider: each node in its own network namespace, on a bridge.

Design note. The driver makes a bridge `scb<tag>` with 10.213.<k>.1/24 and listens there;
node i gets namespace `sc-<tag>-<i>` with a veth pair (`sch<tag>x<i>` on the bridge,
`eth0` inside) and the address 10.213.<k>.<i+2>. The node's supervisor is forked by the
node factory as usual and enters its namespace with setns(2) before it connects, so its
workers are born inside it. A partition takes the node's host-side link down: it is cut
from the driver and from every other node until healed (TCP connections stall, as on a real
network, and resume after the heal).

Cleanup must survive a SIGKILLed driver, so it has two layers. (1) A reaper process in its
own session holds the read end of a pipe from the driver; when the driver exits, however
it exits, the pipe closes and the reaper deletes everything recorded for the cluster.
(2) The tag is derived from the driver's pid, and a state file
`<state dir>/netns-<tag>.json` names the owner (pid, start time and PID namespace) and every
namespace and link *before* it is created; each new netns cluster deletes the leftovers of
dead owners (an owner in another PID namespace is never judged dead; a state file without
the namespace, from an older cluster, is judged by pid and start time). Subnets are picked
under a lock file, skipping those of live clusters.

The state dir is `simcluster-netns-<uid>` in /run (where it is writable), else in the temp
dir: this user's, 0700, and reached only through folders no other user can change
(`simcluster._private_dir`); a planted one is refused, never used.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from .. import _owner
from .._errors import SimclusterError
from .._private_dir import open_private
from .base import Provider, base36

PREFIX = "10.213"
_counter = 0


def state_dir(base: str | None = None) -> Path:
    """The folder of this user's netns state files in `base` (None: /run where it is
    writable, else the temp dir; see the module note), made if missing."""
    if base is None:
        base = "/run" if os.access("/run", os.W_OK) else tempfile.gettempdir()
    path = Path(base) / f"simcluster-netns-{os.getuid()}"
    os.close(open_private(path, what="netns state files",
                          fix="have its owner or root remove it (in the temp dir: or set "
                              "TMPDIR to a folder of your own)"))
    return path


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run(["ip", *args], capture_output=True, text=True)
    if check and done.returncode != 0:
        raise SimclusterError(f"`ip {' '.join(args)}` failed: {done.stderr.strip()}")
    return done


def unavailable() -> str | None:
    """Why the netns provider cannot run here, or None."""
    if not sys.platform.startswith("linux"):
        return "network namespaces are Linux-only"
    if shutil.which("ip") is None:
        return "the `ip` command (iproute2) is not installed"
    if os.geteuid() != 0:
        return "creating network namespaces needs root"
    probe = f"sc-probe-{os.getpid()}"
    if _ip("netns", "add", probe, check=False).returncode != 0:
        return "`ip netns add` is not permitted here"
    _ip("netns", "del", probe, check=False)
    return None


class NetnsProvider(Provider):
    name = "netns"
    partitions = True

    def __init__(self) -> None:
        global _counter
        _counter += 1
        self.tag = base36(os.getpid()) + base36(_counter)  # <= 8 chars: "sch" + tag + "x" + index
        if len(self.tag) > 8:
            raise SimclusterError("provider='netns': this process made too many clusters")
        self.bridge = f"scb{self.tag}"
        pid, start, namespace = _owner.this_process()
        self.state: dict = {"pid": pid, "start": start, "pidns": namespace,
                            "tag": self.tag, "links": [], "namespaces": []}
        self.path = state_dir() / f"netns-{self.tag}.json"
        self.subnet: str | None = None
        self._reaper: subprocess.Popen | None = None

    def open(self, host: str) -> str:
        why = unavailable()
        if why:
            raise SimclusterError(f"Cluster(provider='netns') cannot run here: {why}; use "
                                  "provider='process'")
        with open(state_dir() / "netns.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            reap_stale()
            self.subnet = _free_subnet()
            self.state.update(subnet=self.subnet, links=[self.bridge])
            self._save()
        self._reaper = subprocess.Popen(
            [sys.executable, "-m", "simcluster.providers.netns", str(self.path)], stdin=subprocess.PIPE,
            start_new_session=True, env={**os.environ, "PYTHONPATH": _package_root()})
        _ip("link", "add", self.bridge, "type", "bridge")
        _ip("addr", "add", f"{self.subnet}.1/24", "dev", self.bridge)
        _ip("link", "set", self.bridge, "up")
        return f"{self.subnet}.1"

    def node_address(self, index: int) -> str:
        if index > 250:
            raise SimclusterError(f"provider='netns' has room for 251 nodes (index {index})")
        return f"{self.subnet}.{index + 2}"

    def namespace(self, index: int) -> str:
        return f"sc-{self.tag}-{index}"

    def prepare(self, node) -> dict:
        ns, host_link, peer = self.namespace(node.index), f"sch{self.tag}x{node.index}", \
            f"scp{self.tag}x{node.index}"
        self.state["namespaces"].append(ns)
        self.state["links"].append(host_link)
        self._save()  # before creating them: a reaper must know every name
        _ip("netns", "add", ns)
        _ip("link", "add", host_link, "type", "veth", "peer", "name", peer)
        _ip("link", "set", peer, "netns", ns)
        _ip("link", "set", host_link, "master", self.bridge, "up")
        _ip("-n", ns, "link", "set", peer, "name", "eth0")
        _ip("-n", ns, "addr", "add", f"{node.address}/24", "dev", "eth0")
        _ip("-n", ns, "link", "set", "eth0", "up")
        _ip("-n", ns, "link", "set", "lo", "up")
        _ip("-n", ns, "route", "add", "default", "via", f"{self.subnet}.1")
        return {"netns": f"/run/netns/{ns}"}

    def set_cut(self, node, cut: bool) -> None:
        _ip("link", "set", f"sch{self.tag}x{node.index}", "down" if cut else "up")

    def close(self) -> None:
        cleanup(self.state)
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass
        if self._reaper is not None:
            self._reaper.stdin.close()
            self._reaper.wait(10)
            self._reaper = None

    def _save(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.state))
        os.replace(tmp, self.path)


def _package_root() -> str:
    return str(Path(__file__).resolve().parent.parent)


def _free_subnet() -> str:
    used = set()
    for f in state_dir().glob("netns-*.json"):
        try:
            used.add(json.loads(f.read_text()).get("subnet"))
        except (OSError, ValueError):
            pass
    addrs = _ip("-4", "-o", "addr").stdout
    for k in range(1, 255):
        subnet = f"{PREFIX}.{k}"
        if subnet not in used and f" {subnet}." not in addrs:
            return subnet
    raise SimclusterError(f"no free {PREFIX}.x.0/24 subnet left for provider='netns'")


def cleanup(state: dict) -> None:
    """Delete a cluster's links and namespaces (idempotent; links first: deleting a veth end
    deletes both, even while processes still hold the namespace)."""
    for link in reversed(state.get("links", [])):
        _ip("link", "del", link, check=False)
    for ns in state.get("namespaces", []):
        _ip("netns", "del", ns, check=False)


def owner_alive(state: dict) -> bool:
    """False only for an owner known to be gone (see the module note)."""
    pid, start = state.get("pid", 0), state.get("start")
    if not isinstance(pid, int) or not start:
        return False
    return _owner.judge(pid, start, str(state.get("pidns") or "")) != _owner.DEAD


def reap_stale() -> list[str]:
    """Delete what dead netns clusters left behind (state files, and stray `sc-` names of
    tags whose pid is gone); returns the tags reaped."""
    reaped = []
    for f in state_dir().glob("netns-*.json"):
        try:
            state = json.loads(f.read_text())
        except (OSError, ValueError):
            continue
        if not owner_alive(state):
            cleanup(state)
            f.unlink(missing_ok=True)
            reaped.append(state.get("tag"))
    live = {json.loads(f.read_text()).get("tag") for f in state_dir().glob("netns-*.json")}
    for line in _ip("netns", "list", check=False).stdout.splitlines():
        name = line.split()[0] if line.split() else ""
        if name.startswith("sc-") and name.count("-") == 2 and name.split("-")[1] not in live:
            _ip("netns", "del", name, check=False)
    return reaped


def reaper_main(path: str) -> None:
    """Wait for the driver to go (stdin closes), then clean up after it."""
    try:
        while os.read(0, 4096):
            pass
    except OSError:
        pass
    try:
        state = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return  # the driver closed cleanly and removed its state
    cleanup(state)
    Path(path).unlink(missing_ok=True)


if __name__ == "__main__":
    reaper_main(sys.argv[1])
