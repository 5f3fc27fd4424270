"""The cluster secret's home: one 0600 file per cluster in a 0700 folder of this user.

Design note. The folder is `<temp dir>/simcluster-<uid>`, a name every local user can guess
and take first in a shared temp dir: as a symlink to a world-writable folder, or as a folder
of theirs holding key files they pre-created and can read. So nothing here follows a symlink
or trusts a file it did not just make. The folder is opened with O_NOFOLLOW and must be a
directory of ours that nobody else may enter; everything inside goes through that
descriptor, so the folder cannot be swapped after the check. A key is written to a fresh
file (O_CREAT|O_EXCL|O_NOFOLLOW, mode 0600, owner and mode checked with fstat) and renamed
over its final name: a reader never sees a half-written key, and a stale file of ours at
that name is replaced in one step. A reader opens the key with O_NOFOLLOW and refuses one
that is not ours or that others may read or change. A folder failing a check is refused
with an error naming it, never repaired: a planted one is someone else's to remove.

A key file holds the secret in hex on its first line and its owner on the second: the pid
and start time (`procfs.start_time`) of the driver. A SIGKILLed driver cannot remove its
key, so every cluster that starts removes the keys (and half-written temporary files) of
owners that are gone. The folder itself stays when empty: holding the name is what keeps
anyone else from taking it.
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from pathlib import Path

from . import procfs

_OPEN = os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK  # NONBLOCK: a planted FIFO cannot hang us
_ELSEWHERE = "set TMPDIR to a folder of your own"


def key_folder() -> Path:
    return Path(tempfile.gettempdir()) / f"simcluster-{os.getuid()}"


def key_path(address: str) -> Path:
    host, _, port = address.rpartition(":")
    return key_folder() / f"{host}_{port}.key"


def write_key(address: str, secret: bytes) -> Path:
    """Store the secret of the cluster at `address`; returns the key file's path. Removes
    the keys of dead owners first."""
    path = key_path(address)
    me, start = os.getpid(), procfs.start_time(os.getpid())
    folder = _open_folder(create=True)
    try:
        remove_stale_keys(folder)
        temp = f".{path.name}.{me}-{start}.tmp"
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _OPEN, 0o600, dir_fd=folder)
        try:
            _check_file(fd, path.parent / temp)
            os.write(fd, f"{secret.hex()}\n{me} {start}\n".encode())
        finally:
            os.close(fd)
        os.rename(temp, path.name, src_dir_fd=folder, dst_dir_fd=folder)
    finally:
        os.close(folder)
    return path


def read_key(address: str) -> bytes:
    """The secret of this user's cluster at `address`; ConnectionError if there is none,
    PermissionError for a key (or folder) that another user could have made or read."""
    path = key_path(address)
    try:
        folder = _open_folder(create=False)
        try:
            fd = os.open(path.name, os.O_RDONLY | _OPEN, dir_fd=folder)
        finally:
            os.close(folder)
    except FileNotFoundError:
        raise ConnectionError(f"no simcluster is running at {address!r} for this user "
                              f"(no key at {path}); pass `secret=` if it runs elsewhere") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise PermissionError(f"{path} is a symlink; refusing it as a cluster key: "
                                  "remove it") from None
        raise
    with os.fdopen(fd, "rb") as f:
        _check_file(f.fileno(), path)
        secret, _owner = _parse(f.read(4096))
    if secret is None:
        raise PermissionError(f"{path} is not a simcluster key file; remove it")
    return secret


def remove_stale_keys(folder: int) -> list[str]:
    """Remove the key files (and temporary files) whose owner is gone from the open key
    folder `folder`; returns their names. Keys without an owner line count as stale."""
    removed = []
    for name in os.listdir(folder):
        if name.endswith(".tmp") and name.startswith("."):
            pid, _, start = name.rsplit(".", 2)[-2].partition("-")
            owner = (int(pid), start) if pid.isdigit() else None
        elif name.endswith(".key"):
            owner = _owner_of(folder, name)
            if owner is False:
                continue  # not a regular file of ours: not for us to judge
        else:
            continue
        if owner is None or procfs.start_time(owner[0]) != owner[1]:
            try:
                os.unlink(name, dir_fd=folder)
                removed.append(name)
            except FileNotFoundError:
                pass  # another starting cluster removed it first
    return removed


# -- helpers -------------------------------------------------------------------------------------
def _open_folder(*, create: bool) -> int:
    """The key folder, opened without following a symlink and checked; FileNotFoundError
    if it does not exist and `create` is false."""
    folder = key_folder()
    if create:
        try:
            os.mkdir(folder, 0o700)
        except FileExistsError:
            pass
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise PermissionError(
                f"{folder} is a symlink or not a folder (another user may have planted it); "
                f"refusing to keep or read cluster keys there: {_ELSEWHERE}") from None
        raise
    st = os.fstat(fd)
    problem = None
    if st.st_uid != os.getuid():
        problem = (f"{folder} belongs to uid {st.st_uid}, not to uid {os.getuid()}; refusing "
                   f"to keep or read cluster keys there: {_ELSEWHERE}")
    elif st.st_mode & 0o077:
        problem = (f"{folder} has mode {stat.S_IMODE(st.st_mode):o}, so other users may "
                   f"enter it; refusing to keep or read cluster keys there: chmod 700 {folder}")
    if problem:
        os.close(fd)
        raise PermissionError(problem)
    return fd


def _check_file(fd: int, path: Path) -> None:
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        raise PermissionError(f"{path} is not a regular file; refusing it as a cluster key: "
                              "remove it")
    if st.st_uid != os.getuid():
        raise PermissionError(f"{path} belongs to uid {st.st_uid}, not to uid {os.getuid()}; "
                              "refusing it as a cluster key: remove it")
    if st.st_mode & 0o077:
        raise PermissionError(f"{path} has mode {stat.S_IMODE(st.st_mode):o}: other users may "
                              "read or change it; refusing it as a cluster key: remove it")


def _parse(data: bytes) -> tuple[bytes | None, tuple[int, str] | None]:
    lines = data.decode("ascii", "replace").split("\n")
    try:
        secret = bytes.fromhex(lines[0].strip())
    except ValueError:
        secret = None
    pid, _, start = (lines[1] if len(lines) > 1 else "").strip().partition(" ")
    return secret, ((int(pid), start) if pid.isdigit() and start else None)


def _owner_of(folder: int, name: str):
    """(pid, start time) of a key file's owner; None if it names none; False if the entry
    is not a regular file of ours."""
    try:
        fd = os.open(name, os.O_RDONLY | _OPEN, dir_fd=folder)
    except OSError:
        return False
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid():
            return False
        return _parse(f.read(4096))[1]
