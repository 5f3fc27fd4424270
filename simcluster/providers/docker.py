"""The `docker` provider: each node a container, through the Docker SDK (`pip install
'trainspec[docker]'`), imported only when this provider is used.

Design note. A node's container runs this machine's interpreter and packages, bind-mounted
read-only at the same paths into `image`, with `pid_mode="host"` so the supervisor's pid
is a host pid: the driver kills a node's processes at one instant as on the other
providers (and the container ends with its first process), and a worker's pid means the
same everywhere. A pause is `docker pause` (the engine freezes the container's cgroup).
A container runs as the driver's uid and gid, never as root: what its workers write to the
shared folders is the driver's user's, and the driver can signal its processes. A fault
that could not be delivered (a node's process is another user's: EPERM) is an error, never
a silent no-op. Each cluster has its own bridge network
`sc-<tag>` with 10.214.<k>.0/24; the driver listens on its gateway, node i gets .i+2. The
secret reaches a node through the cluster's key file, mounted read-only, never through the
container's environment (which `docker inspect` shows). A partition disconnects the
container from the network; a heal reconnects it with the same address.

The default image is built here, from nothing, on first use (no registry is needed): a
layer holding only `/etc/passwd` and `/etc/group` (this user's entries), `/tmp`, and the
usual `/bin`, `/lib`, `/lib64`, `/sbin` links into `/usr`, which is this machine's, mounted
read-only (so the C library is the host's, the one the interpreter was built against). It
is tagged `simcluster-node:<hash of its content>` and kept between clusters; `docker rmi
$(docker images -q simcluster-node)` removes it. `DockerProvider(image=...)` (or
`Cluster(provider=DockerProvider(image="python:3.11-slim"))`) uses another image instead:
then nothing of `/usr` is mounted, and the image must run this interpreter.

Storage: the nodes share `shared` read-write (the temp folder and ~/ray_results by
default), as the nodes of a real cluster share a network file system, so a worker's
checkpoint is the file the driver reads; the rest of a node's file system is its own.

Cleanup: a supervisor that loses its driver kills its group, which ends the container
(auto-removed); `close` force-removes the cluster's containers and network; every new
docker cluster removes containers and networks labelled with a dead owner
(`pid:start time:PID namespace`; an owner in another PID namespace is never judged dead,
and a label without the namespace, from an older cluster, is judged by pid and start time).
"""

from __future__ import annotations

import grp
import hashlib
import importlib
import io
import json
import os
import pwd
import sys
import tarfile
import tempfile
import threading

from .. import _owner
from .._errors import SimclusterError
from .._keys import key_path
from .._proc import import_modules
from .base import Provider, base36

LABEL = "simcluster.owner"
IMAGE_REPOSITORY = "simcluster-node"
_counter = 0


def base_layer() -> bytes:
    """The tar of the default image: this user's passwd/group entries, /tmp, links into /usr."""
    user = pwd.getpwuid(os.getuid())
    group = grp.getgrgid(os.getgid())
    files = {
        "etc/passwd": f"{user.pw_name}:x:{user.pw_uid}:{user.pw_gid}::{user.pw_dir}:/bin/sh\n",
        "etc/group": f"{group.gr_name}:x:{group.gr_gid}:\n",
    }
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name in ("etc", "tmp"):
            info = tarfile.TarInfo(name)
            info.type, info.mode = tarfile.DIRTYPE, 0o1777 if name == "tmp" else 0o755
            tar.addfile(info)
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
        for link in ("bin", "lib", "lib64", "sbin"):
            info = tarfile.TarInfo(link)
            info.type, info.linkname = tarfile.SYMTYPE, f"usr/{link}"
            tar.addfile(info)
    return buffer.getvalue()


def ensure_image(client) -> str:
    """The default image's tag, importing it first if this engine does not have it."""
    layer = base_layer()
    tag = hashlib.sha256(layer).hexdigest()[:12]
    name = f"{IMAGE_REPOSITORY}:{tag}"
    try:
        client.images.get(name)
    except Exception:  # noqa: BLE001 - docker.errors.ImageNotFound; the SDK is optional
        client.api.import_image_from_data(layer, repository=IMAGE_REPOSITORY, tag=tag)
        client.images.get(name)  # raises if the import did not work
    return name


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

    def __init__(self, image: str | None = None, shared: tuple[str, ...] | None = None) -> None:
        global _counter
        _counter += 1
        #: None: the image built here (`ensure_image`), with this machine's /usr mounted
        self.image = image
        #: folders every node mounts read-write, as a real cluster's nodes share a network
        #: file system: by default the temp folder and ~/ray_results (the default storage
        #: path), so checkpoints a worker writes are the files the driver reads
        self.shared = tuple(os.path.abspath(os.path.expanduser(p)) for p in (
            shared if shared is not None else (tempfile.gettempdir(), "~/ray_results")))
        self.tag = base36(os.getpid()) + base36(_counter)
        self.owner = ":".join(map(str, _owner.this_process()))
        self.client = self.network = None
        self.subnet = ""
        self.containers: dict[str, object] = {}
        self.paused: set[str] = set()   # node ids frozen with `docker pause`
        self._mount_usr = False
        self._lock = threading.Lock()

    def open(self, host: str) -> str:
        client, why = client_or_reason()
        if client is None:
            raise SimclusterError(f"Cluster(provider='docker') cannot run here: {why}; start "
                                  "a Docker engine or use provider='process'")
        import docker.errors
        import docker.types

        self.client = client
        reap_stale(client)
        if self.image is None:
            self._mount_usr = True
            self.image = ensure_image(client)
        used = {cfg.get("Subnet") for net in client.api.networks()
                for cfg in (net.get("IPAM") or {}).get("Config") or []}
        for k in (k for k in range(1, 255) if f"10.214.{k}.0/24" not in used):
            pool = docker.types.IPAMPool(subnet=f"10.214.{k}.0/24", gateway=f"10.214.{k}.1")
            try:
                self.network = client.networks.create(
                    f"sc-{self.tag}", driver="bridge",
                    ipam=docker.types.IPAMConfig(pool_configs=[pool]), labels={LABEL: self.owner})
            except docker.errors.APIError as exc:
                if "overlap" in str(exc):
                    continue  # another cluster took it since the listing: the next one
                raise
            self.subnet = f"10.214.{k}"
            break
        else:
            raise SimclusterError("provider='docker': every subnet 10.214.1-254.0/24 is in use")
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
        mounts = _covering({sys.prefix, sys.base_prefix, *boot["sys_path"], *_source_roots()})
        key = boot["key_path"] = str(key_path(boot["address"]))
        if self._mount_usr:
            mounts.add("/usr")
        for folder in self.shared:
            os.makedirs(folder, exist_ok=True)
        mounts = {p for p in mounts if not _inside(p, self.shared)}
        volumes = {p: {"bind": p, "mode": "ro"} for p in sorted(mounts)}
        volumes.update({p: {"bind": p, "mode": "rw"} for p in self.shared})
        volumes[key] = {"bind": key, "mode": "ro"}
        env = {k: v for k, v in fields["env"].items() if k != "PYTHONPATH"}
        env["SIMCLUSTER_BOOT"] = json.dumps({k: v for k, v in boot.items() if k != "env"})
        try:
            endpoint = self.client.api.create_endpoint_config(ipv4_address=node.address)
            container = self.client.containers.run(
                self.image, [sys.executable, "-m", "simcluster.providers.docker"], detach=True,
                auto_remove=True, pid_mode="host", name=f"sc-{self.tag}-{node.index}",
                user=f"{os.getuid()}:{os.getgid()}",
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

    def pause(self, node, pids, paused: bool) -> None:
        """`docker pause` / `unpause`: the engine freezes the container's cgroup, so the
        supervisor and its workers stop at one instant, and the engine shows it Paused."""
        container = self.containers.get(node.id)
        try:
            (container.pause if paused else container.unpause)()
        except Exception as exc:  # noqa: BLE001 - docker.errors.*: gone in the meantime
            if _alive(container):
                raise SimclusterError(f"docker {'pause' if paused else 'unpause'} of "
                                      f"{node.id} failed: {exc}") from exc
            return
        with self._lock:
            (self.paused.add if paused else self.paused.discard)(node.id)

    def kill(self, pids: dict[str, int]) -> None:
        """The group-stop-then-SIGKILL of the other providers, from this machine (the pids
        are host pids); a frozen container is thawed after, so the pending SIGKILLs land.
        The container ends with its first process and the engine removes it. A node whose
        supervisor this process may not signal raises SimclusterError, before any signal."""
        self.check_kill(pids)
        super().kill(pids)
        for node_id in pids:
            with self._lock:
                frozen = node_id in self.paused
                self.paused.discard(node_id)
            if frozen:
                try:
                    self.containers[node_id].unpause()
                except Exception:  # noqa: BLE001 - gone already
                    pass

    def check_kill(self, pids: dict[str, int]) -> None:
        for node_id, pid in pids.items():
            _check_signallable(node_id, pid)

    def close(self) -> None:
        if self.client is None:
            return
        ids = []
        for container in list(self.containers.values()):
            ids.append(container.id)
            try:
                container.remove(force=True)
            except Exception:  # noqa: BLE001 - auto-removed already, or being removed
                pass
        _wait_gone(self.client, ids)
        if self.network is not None:
            try:
                self.network.remove()
            except Exception:
                pass
        self.client.close()
        self.client = None


def _wait_gone(client, ids: list[str], deadline_s: float = 20.0) -> None:
    """Wait until the engine lists none of the containers `ids`: one the engine was still
    removing (auto-remove after a kill, answered "removal in progress") has not outlived
    close(). After the deadline, those still listed are named in a warning."""
    import time
    import warnings

    until = time.monotonic() + deadline_s
    left = list(ids)
    while left:
        try:
            listed = {c["Id"] for c in client.api.containers(all=True)}
        except Exception:  # noqa: BLE001 - the engine went away: nothing more to wait for
            return
        left = [i for i in left if i in listed]
        for container_id in left:
            try:
                client.api.remove_container(container_id, force=True)
            except Exception:  # noqa: BLE001 - gone meanwhile, or still being removed
                pass
        if not left:
            return
        if time.monotonic() > until:
            warnings.warn(f"docker containers still listed {deadline_s:.0f} s after close(): "
                          f"{', '.join(i[:12] for i in left)}", RuntimeWarning, stacklevel=3)
            return
        time.sleep(0.1)


def _check_signallable(node_id: str, pid: int | None) -> None:
    """SimclusterError if a signal to `pid` (a node's supervisor) would fail with EPERM:
    the fault would silently do nothing."""
    if not pid:
        return
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return  # gone already: the node is down, which is what the kill wants
    except PermissionError:
        try:
            owner = f"uid {os.stat(f'/proc/{pid}').st_uid}"
        except OSError:
            owner = "another user"
        raise SimclusterError(
            f"cannot kill {node_id}: its supervisor (pid {pid}) runs as {owner} and this "
            f"driver (uid {os.getuid()}) may not signal it, so the fault would do nothing (an "
            "engine that remaps users, e.g. rootless or userns-remap, runs containers as "
            "other host uids): use an engine without user remapping, or provider='process'"
        ) from None


def _alive(container) -> bool:
    try:
        container.reload()
    except Exception:  # noqa: BLE001 - docker.errors.NotFound
        return False
    return container.status in ("running", "paused")


def _source_roots() -> set[str]:
    """The folders this process imports its top-level modules from, including those an
    editable install's import hook finds outside sys.path (a node must import them too)."""
    roots = set()
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None)
        if "." in name or not path:
            continue
        folder = os.path.dirname(os.path.abspath(path))
        if os.path.basename(path).startswith("__init__."):
            folder = os.path.dirname(folder)  # a package: the folder that holds it
        roots.add(folder)
    return roots


#: never bind-mounted over the container's own (a script run from /tmp puts it on sys.path)
_SYSTEM = {"/", "/tmp", "/etc", "/dev", "/proc", "/sys", "/run", "/var", "/home",
           tempfile.gettempdir()}


def _inside(path: str, folders) -> bool:
    return any(path == f or path.startswith(f.rstrip("/") + "/") for f in folders)


def _covering(paths) -> set[str]:
    """The existing paths, less those inside another one (one mount covers them) and the
    system folders of `_SYSTEM`."""
    found = sorted(p for p in {os.path.abspath(p) for p in paths}
                   if os.path.exists(p) and p not in _SYSTEM)
    kept: list[str] = []
    for p in found:
        if not _inside(p, kept):
            kept.append(p)
    return set(kept)


def reap_stale(client) -> None:
    """Remove containers and networks whose owner (pid:start time) is no longer alive.
    Listed with the low-level API (one call, no inspection of each): another cluster's
    containers come and go meanwhile, and one removed under us is no error."""
    def dead(labels) -> bool:
        pid, start, namespace = ((labels or {}).get(LABEL, "0:").split(":", 2) + [""])[:3]
        return _owner.judge(int(pid) if pid.isdigit() else 0, start, namespace) == _owner.DEAD
    for container in client.api.containers(all=True, filters={"label": LABEL}):
        if dead(container.get("Labels")):
            _ignore_gone(client.api.remove_container, container["Id"], force=True)
    for network in client.api.networks(filters={"label": LABEL}):
        if dead(network.get("Labels")):
            _ignore_gone(client.api.remove_network, network["Id"])


def _ignore_gone(call, *args, **kwargs) -> None:
    import docker.errors

    try:
        call(*args, **kwargs)
    except docker.errors.NotFound:
        pass  # removed meanwhile
    except docker.errors.APIError as exc:
        if "already in progress" not in str(exc):
            raise


def node_main() -> None:
    """A node in a container: boot from the environment, secret from the mounted key."""
    boot = json.loads(os.environ.pop("SIMCLUSTER_BOOT"))
    sys.path[:0] = [p for p in boot["sys_path"] if p not in sys.path]
    key = boot.get("key_path") or key_path(boot["address"])  # the driver's key file, mounted
    with open(key) as f:
        boot["secret"] = f.read().split()[0]  # line 1: the secret
    if os.getpgid(0) != os.getpid():
        os.setsid()  # the driver's killpg(pid) must reach the whole node
    # (a container's first process already leads its own session and group: setsid fails)
    for module in boot.get("preload", ()):  # as the node factory does for process nodes:
        importlib.import_module(module)      # each worker forks with them imported
    import_modules(boot.get("requested", ()))  # `preload()` requests, as the factory does
    from ..node.supervisor import run_node

    run_node(boot)
    os._exit(0)


if __name__ == "__main__":
    node_main()
