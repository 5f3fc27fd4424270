"""Running a function as another local user, for the tests of what other users can plant:
`as_user(uid, fn, *args)` forks, switches to `uid` (and to gid `gid=`, by default `uid`;
supplementary groups only those of `groups=`) without exec (this interpreter's files need not be readable by that user), and returns
("ok", value) or ("error", "<Type>: message")."""

from __future__ import annotations

import os
import pickle
import select
import shutil
import signal
import tempfile
from pathlib import Path

import pytest

ATTACKER, VICTIM = 65534, 65533
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="switching to other users needs root")


def as_user(uid: int, fn, *args, timeout: float = 20.0, gid: int | None = None,
            groups: tuple[int, ...] = ()):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r)
            os.setgroups(list(groups))
            os.setgid(uid if gid is None else gid)
            os.setuid(uid)
            outcome = ("ok", fn(*args))
        except BaseException as exc:  # noqa: B036 - everything goes back to the test
            outcome = ("error", f"{type(exc).__name__}: {exc}")
        os.write(w, pickle.dumps(outcome))
        os._exit(0)
    os.close(w)
    try:
        data = b""
        while True:
            ready, _, _ = select.select([r], [], [], timeout)
            if not ready:
                os.kill(pid, signal.SIGKILL)
                raise AssertionError(f"{fn.__name__}{args} as uid {uid}: no answer in {timeout} s")
            chunk = os.read(r, 1 << 16)
            if not chunk:
                break
            data += chunk
    finally:
        os.close(r)
        os.waitpid(pid, 0)
    return pickle.loads(data)


def shared_base() -> Path:
    """A new root-owned 0755 folder the unprivileged users can traverse (pytest's own temp
    folders are 0700); the caller removes it."""
    base = Path(tempfile.mkdtemp(prefix="simcluster-usertest-"))
    base.chmod(0o755)
    return base


def remove(base: Path) -> None:
    shutil.rmtree(base, ignore_errors=True)
