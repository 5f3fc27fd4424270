"""Folders no other user can change: where simcluster keeps what outlives a cluster
(histories, the netns provider's state).

Design note. A file created through a link another user planted lands where they chose: a
root driver whose HOME, XDG_STATE_HOME, SIMCLUSTER_STATE_DIR or TMPDIR lies in a folder
others can write would create or append to a file of their choosing. So `open_private`
walks to a folder from `/` one name at a time, each opened with O_NOFOLLOW through the
descriptor of the one above (a name cannot be swapped between its check and its use), and
every folder on the way must be one that no other user can change:

- owned by root or by this user, and
- writable by nobody else, unless it is sticky (/tmp: there only an entry's owner can
  rename or remove it, and a next folder that someone else made is refused in turn).
  Group write counts as nobody else's only for this user's private group (a group named
  after the user, with no other members: the default of many distributions).

A symbolic link on the way is followed only when it is root's or this user's (the folder
holding it passed the check, so no one else put it there). Missing folders are made 0700.
The last folder must be this user's, and nobody else may enter it (mode 0700 or tighter),
or, with `readable=True`, nobody else may write it (mode 0755 or tighter).
A folder failing a check is refused, never repaired, with an error naming it, its owner and
mode, and the fix. Once a path passed, path-based calls on it are safe from other users:
nothing on it can be changed by them.
"""

from __future__ import annotations

import errno
import grp
import os
import pwd
import stat

_DIR = os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_PATH = getattr(os, "O_PATH", os.O_RDONLY)  # O_PATH (Linux): search permission is enough
_MAX_LINKS = 40


class UnsafeFolderError(PermissionError):
    """Raised when a folder on the way could be changed by another user."""


def open_private(path, *, what: str, fix: str, create: bool = True,
                 readable: bool = False) -> int:
    """A descriptor (O_RDONLY) of the folder `path`, after the checks of the module note;
    `what` (e.g. "histories") and `fix` go into the error. FileNotFoundError when a folder
    is missing and `create` is false; NotADirectoryError for a name that is no folder."""
    me = os.getuid()
    loose = 0o022 if readable else 0o077
    pending = [name for name in str(os.path.abspath(path)).split("/") if name][::-1]
    fd, where, links = os.open("/", _PATH | _DIR), "/", 0
    try:
        _check(fd, where, not pending and loose, what, fix)
        while pending:
            name = pending.pop()
            if name == ".":
                continue
            here = os.path.dirname(where) if name == ".." else os.path.join(where, name)
            if name != "..":
                st = _lstat_or_make(fd, name, here, create)
                if stat.S_ISLNK(st.st_mode):
                    if st.st_uid not in (0, me):
                        raise UnsafeFolderError(_message(
                            here, f"is a symlink of uid {st.st_uid} (neither root nor uid {me}: "
                                  "that user chose where it leads)", what, fix))
                    links += 1
                    if links > _MAX_LINKS:
                        raise OSError(errno.ELOOP, f"too many symlinks on the way to {path}")
                    target = os.readlink(name, dir_fd=fd)
                    if target.startswith("/"):
                        os.close(fd)
                        fd, where = os.open("/", _PATH | _DIR), "/"
                    pending.extend(n for n in reversed(target.split("/")) if n)
                    continue
            try:
                nxt = os.open(name, _PATH | _DIR, dir_fd=fd)
            except NotADirectoryError:
                raise NotADirectoryError(errno.ENOTDIR, f"{here} is not a folder") from None
            os.close(fd)
            fd, where = nxt, here
            _check(fd, where, not pending and loose, what, fix)
        out = os.open(".", os.O_RDONLY | _DIR, dir_fd=fd)
    finally:
        os.close(fd)
    return out


def _lstat_or_make(fd: int, name: str, here: str, create: bool) -> os.stat_result:
    try:
        return os.stat(name, dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
        if not create:
            raise FileNotFoundError(errno.ENOENT, f"{here} does not exist") from None
    try:
        os.mkdir(name, 0o700, dir_fd=fd)
    except FileExistsError:
        pass  # made meanwhile, by us or not: the checks that follow judge it
    return os.stat(name, dir_fd=fd, follow_symlinks=False)


def _check(fd: int, where: str, last: int, what: str, fix: str) -> None:
    """`last`: 0 for a folder on the way, else the mode bits the last folder may not have."""
    st, me = os.fstat(fd), os.getuid()
    mode = stat.S_IMODE(st.st_mode)
    if last:
        if st.st_uid != me:
            raise UnsafeFolderError(_message(
                where, f"belongs to uid {st.st_uid}, not to uid {me} (mode {mode:o})", what, fix))
        if mode & last:
            private = last == 0o077
            raise UnsafeFolderError(_message(
                where, f"has mode {mode:o}, so other users may {'enter' if private else 'write'} "
                       "it", what, f"chmod {'700' if private else 'go-w'} {where}, or {fix}"))
    elif st.st_uid not in (0, me):
        raise UnsafeFolderError(_message(
            where, f"belongs to uid {st.st_uid} (neither root nor uid {me}; mode {mode:o}), "
                   "who can plant links in it", what, fix))
    elif not mode & stat.S_ISVTX and (mode & 0o002 or (mode & 0o020 and not _private(st))):
        raise UnsafeFolderError(_message(
            where, f"has mode {mode:o} (group {st.st_gid}), so other users can plant links "
                   "in it", what, fix))


def _private(st: os.stat_result) -> bool:
    """Whether the folder's group is this user's own private group."""
    if st.st_gid != os.getgid():
        return False
    try:
        group, user = grp.getgrgid(st.st_gid), pwd.getpwuid(os.getuid())
    except KeyError:
        return False
    return group.gr_name == user.pw_name and set(group.gr_mem) <= {user.pw_name}


def _message(where: str, problem: str, what: str, fix: str) -> str:
    return f"{where} {problem}; refusing to keep {what} under it: {fix}"


__all__ = ["UnsafeFolderError", "open_private"]
