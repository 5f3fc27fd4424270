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

A name another user took first (a folder of theirs, a symlink, a file) would block this
user's clusters, so then the keys live in `$XDG_RUNTIME_DIR/simcluster` instead, when that
variable names a folder of this user's that nobody else may enter (what `pam_systemd`
makes: `/run/user/<uid>`, 0700). Reader and writer choose the same way, and the error says
who holds the name, its mode, and the fix when there is no such runtime folder either.

A key file holds the secret in hex on its first line and its owner on the second: the pid,
start time (`procfs.start_time`) and PID namespace of the driver (`simcluster._owner`). A
SIGKILLed driver cannot remove its key, so every cluster that starts removes the keys (and
half-written temporary files) of owners that are gone; an owner in another PID namespace
(a cluster in a container sharing this temp dir) is never judged gone, and an owner line
without a namespace (an older key) is judged by pid and start time alone. The folder itself
stays when empty: holding the name is what keeps anyone else from taking it.
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from pathlib import Path

from . import _owner

_OPEN = os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK  # NONBLOCK: a planted FIFO cannot hang us
_ELSEWHERE = "set TMPDIR to a folder of your own"


def key_folder() -> Path:
    """`<temp dir>/simcluster-<uid>`, or `$XDG_RUNTIME_DIR/simcluster` when another user
    holds that name and the runtime folder is safe (see the module note)."""
    folder = Path(tempfile.gettempdir()) / f"simcluster-{os.getuid()}"
    return (_held_by_another(folder) and _runtime_folder()) or folder


def _held_by_another(folder: Path) -> bool:
    try:
        st = os.lstat(folder)
    except OSError:
        return False
    return not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid()


def _runtime_folder() -> Path | None:
    """`$XDG_RUNTIME_DIR/simcluster` if the variable names a folder (not a link) of this
    user's that nobody else may enter; else None."""
    runtime = os.environ.get("XDG_RUNTIME_DIR", "")
    try:
        st = os.lstat(runtime) if os.path.isabs(runtime) else None
    except OSError:
        return None
    if st is None or not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() \
            or st.st_mode & 0o077:
        return None
    return Path(runtime) / "simcluster"


def key_path(address: str) -> Path:
    host, _, port = address.rpartition(":")
    return key_folder() / f"{host}_{port}.key"


def write_key(address: str, secret: bytes) -> Path:
    """Store the secret of the cluster at `address`; returns the key file's path. Removes
    the keys of dead owners first."""
    path = key_path(address)
    me, start, namespace = _owner.this_process()
    try:
        folder = _open_folder(path.parent, create=True)
    except PermissionError:  # taken since key_path looked? then the runtime folder
        runtime = _runtime_folder()
        if runtime is None or runtime == path.parent or not _held_by_another(path.parent):
            raise
        path = runtime / path.name
        folder = _open_folder(runtime, create=True)
    try:
        remove_stale_keys(folder)
        temp = f".{path.name}.{me}-{start}-{namespace}.tmp"
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _OPEN, 0o600, dir_fd=folder)
        try:
            _check_file(fd, path.parent / temp)
            os.write(fd, f"{secret.hex()}\n{me} {start} {namespace}\n".encode())
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
        folder = _open_folder(path.parent, create=False)
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
    folder `folder`; returns their names. Keys without an owner line count as stale; keys
    of owners in another PID namespace are kept (their pid means nothing here)."""
    removed = []
    for name in os.listdir(folder):
        if name.endswith(".tmp") and name.startswith("."):
            pid, start, namespace = (name.rsplit(".", 2)[-2].split("-", 2) + ["", ""])[:3]
            owner = (int(pid), start, namespace) if pid.isdigit() else None
        elif name.endswith(".key"):
            owner = _owner_of(folder, name)
            if owner is False:
                continue  # not a regular file of ours: not for us to judge
        else:
            continue
        if owner is None or _owner.judge(*owner) == _owner.DEAD:
            try:
                os.unlink(name, dir_fd=folder)
                removed.append(name)
            except FileNotFoundError:
                pass  # another starting cluster removed it first
    return removed


# -- helpers -------------------------------------------------------------------------------------
def _open_folder(folder: Path, *, create: bool) -> int:
    """The key folder, opened without following a symlink and checked; FileNotFoundError
    if it does not exist and `create` is false."""
    if create:
        try:
            os.mkdir(folder, 0o700)
        except FileExistsError:
            pass
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EACCES):
            raise PermissionError(_taken(folder, exc.errno)) from None
        raise
    st = os.fstat(fd)
    if st.st_uid != os.getuid():
        os.close(fd)
        raise PermissionError(f"{folder} belongs to uid {st.st_uid}, not to uid {os.getuid()} (mode "
                     f"{stat.S_IMODE(st.st_mode):o}; another user may have made it first); "
                     f"refusing to keep or read cluster keys there: {_fix(folder)}")
    if st.st_mode & 0o077:
        os.close(fd)
        raise PermissionError(
            f"{folder} has mode {stat.S_IMODE(st.st_mode):o}, so other users may enter it; "
            f"refusing to keep or read cluster keys there: chmod 700 {folder}")
    return fd


def _taken(folder: Path, err: int) -> str:
    try:
        st = os.lstat(folder)
        what = ("a symlink" if stat.S_ISLNK(st.st_mode) else
                "a folder" if stat.S_ISDIR(st.st_mode) else "not a folder")
        held = f"is {what} of uid {st.st_uid} with mode {stat.S_IMODE(st.st_mode):o}"
    except OSError:
        held = "cannot be examined"
    why = f" (uid {os.getuid()} may not open it)" if err == errno.EACCES else ""
    return (f"{folder} {held}{why}: another user may have taken the name first; refusing to "
            f"keep or read cluster keys there: {_fix(folder)}")


def _fix(folder: Path) -> str:
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if not runtime:
        also = "or set XDG_RUNTIME_DIR to a folder of yours with mode 0700"
    else:
        also = f"XDG_RUNTIME_DIR={runtime} is no folder of yours with mode 0700 (fix it)"
    return f"{_ELSEWHERE}, {also}, or have its owner or root remove {folder}"


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


def _parse(data: bytes) -> tuple[bytes | None, tuple[int, str, str] | None]:
    lines = data.decode("ascii", "replace").split("\n")
    try:
        secret = bytes.fromhex(lines[0].strip())
    except ValueError:
        secret = None
    pid, start, namespace = ((lines[1] if len(lines) > 1 else "").split() + ["", "", ""])[:3]
    return secret, ((int(pid), start, namespace) if pid.isdigit() and start else None)


def _owner_of(folder: int, name: str):
    """(pid, start time, PID namespace or "") of a key file's owner; None if it names none;
    False if the entry is not a regular file of ours."""
    try:
        fd = os.open(name, os.O_RDONLY | _OPEN, dir_fd=folder)
    except OSError:
        return False
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid():
            return False
        return _parse(f.read(4096))[1]
