"""Who owns a run folder: the owner record, and the interface the folder's locks implement.

The record names the fit that owns `<storage_path>/<name>/` (host, pid, start time, PID
namespace), so that a second fit can say whom it collided with, and so that an owner that
died without releasing (SIGKILL, a lost node) can be recognised: on the same host, in the
same boot and PID namespace, a pid that is gone, or that now belongs to a process started
at another time, is dead. A pid means nothing outside its PID namespace (a fit inside
`unshare --pid` or a `--network host` container shares the host name and boot), so an owner
recorded in another namespace is never judged dead: its folder is not taken over. A record
without the namespace (written before it was recorded) is judged as before, by pid and
start time.
"""

from __future__ import annotations

import abc
import json
import os
import socket
import time
import uuid
from dataclasses import asdict, dataclass
from datetime import datetime

from reference.train._internal.storage.storage_context import OWNER_FILENAME
from simcluster import procfs

# OWNER_FILENAME lies beside the checkpoints while a fit owns the folder and is removed when
# it ends: a dotfile outside the temporary prefix, so that start-up clean-up
# (persist.remove_temporaries) keeps it.

# Set to 1 to take over a run folder whose owner this host cannot prove dead (see run_lock).
TAKE_OVER_ENV = "REFERENCE_TRAIN_TAKE_OVER_RUN"


def _pid_namespace() -> str:
    try:
        return str(os.stat("/proc/self/ns/pid").st_ino)
    except OSError:
        return ""


def _boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip()
    except OSError:
        return ""


@dataclass(frozen=True)
class RunOwner:
    """One fit's claim on a run folder; `token` tells two claims of one process apart."""

    host: str
    pid: int
    started_at: float  # time.time() when the claim was made
    boot_id: str = ""
    process_start: str = ""  # /proc start time of `pid`: a pid is reused, this pair is not
    token: str = ""
    pid_namespace: str = ""  # inode of /proc/self/ns/pid: the namespace `pid` belongs to

    @classmethod
    def this_process(cls) -> RunOwner:
        pid = os.getpid()
        return cls(host=socket.gethostname(), pid=pid, started_at=time.time(),
                   boot_id=_boot_id(), process_start=procfs.start_time(pid) or "",
                   token=uuid.uuid4().hex, pid_namespace=_pid_namespace())

    def to_bytes(self) -> bytes:
        return json.dumps(asdict(self), sort_keys=True).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> RunOwner | None:
        """The record in `data`, or None when it is not one (a partial or foreign file)."""
        try:
            doc = json.loads(data.decode())
            return cls(host=str(doc["host"]), pid=int(doc["pid"]),
                       started_at=float(doc["started_at"]), boot_id=str(doc.get("boot_id", "")),
                       process_start=str(doc.get("process_start", "")),
                       token=str(doc.get("token", "")),
                       pid_namespace=str(doc.get("pid_namespace", "")))
        except (ValueError, KeyError, TypeError, UnicodeDecodeError):
            return None

    def describe(self) -> str:
        started = datetime.fromtimestamp(self.started_at).strftime("%Y-%m-%d %H:%M:%S")
        elsewhere = (" (in another PID namespace)" if self.pid_namespace
                     and self.pid_namespace != _pid_namespace() else "")
        return f"pid {self.pid}{elsewhere} on host {self.host!r}, owner since {started}"

    def is_dead(self) -> bool:
        """True only when this host can tell that the owning process is gone."""
        if self.host != socket.gethostname():
            return False
        if self.boot_id and _boot_id() and self.boot_id != _boot_id():
            return True  # the host rebooted since
        if self.pid_namespace and self.pid_namespace != _pid_namespace():
            return False  # its pid is another namespace's: this process cannot tell
        if procfs.state(self.pid) in (None, "Z", "X"):
            return True
        return bool(self.process_start) and procfs.start_time(self.pid) != self.process_start


class RunLock(abc.ABC):
    """A held claim on one run folder. `release()` gives it up (idempotent)."""

    owner: RunOwner | None = None

    @abc.abstractmethod
    def release(self) -> None:
        """Give the run folder up; a second call does nothing."""


class Unlocked(RunLock):
    """What a fit holds where the storage offers no way to lock (a warning was logged)."""

    def __init__(self, reason: str):
        self.reason = reason

    def release(self) -> None:
        pass


__all__ = ["OWNER_FILENAME", "TAKE_OVER_ENV", "RunLock", "RunOwner", "Unlocked"]
