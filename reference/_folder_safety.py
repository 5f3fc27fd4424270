"""Folders a run or an experiment writes into, when others may write there too.

The parts of the storage rules (reference/train/_internal/storage/confine.py has the design
note) that are about a local folder rather than a run's storage: whose folder it is, how a
file is created in it without following a planted link, and the error that says so. Tune's
experiment folders use them as Train's run folders do.
"""

from __future__ import annotations

import logging
import os
import stat

logger = logging.getLogger(__name__)

ALLOW_FOREIGN_ENV = "REFERENCE_TRAIN_ALLOW_FOREIGN_RUN_FOLDER"


class UnsafeRunFolder(PermissionError):
    """Raised when a path the run would write, rename or delete leaves its run folder."""


_CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC


def _owner(uid: int) -> str:
    try:
        import pwd

        return f"{pwd.getpwuid(uid).pw_name!r} (uid {uid})"
    except (KeyError, ImportError):
        return f"uid {uid}"


def _trusted(uid: int) -> bool:
    return uid in (os.geteuid(), 0)


def check_owned(folder: str, what: str) -> None:
    """Rule 1 for a local folder a run or an experiment writes into; `what` names it in the
    error ("RunConfig(...): the run folder")."""
    st = os.lstat(folder)
    problem = None
    if stat.S_ISLNK(st.st_mode):
        if not _trusted(st.st_uid):
            problem = f"is a symbolic link made by {_owner(st.st_uid)}"
        st = os.stat(folder)
    if problem is None and not _trusted(st.st_uid):
        problem = f"belongs to {_owner(st.st_uid)}"
    if problem is not None:
        if os.environ.get(ALLOW_FOREIGN_ENV) == "1":
            logger.warning("The folder %r %s; used anyway (%s=1).", folder, problem,
                           ALLOW_FOREIGN_ENV)
            return
        raise UnsafeRunFolder(
            f"{what} {folder!r} {problem}, not to this user: whoever owns it can plant links "
            "that redirect writes and deletes out of it. Choose another RunConfig(name=...) "
            "or a storage_path of your own; if you share this folder with its owner on "
            f"purpose, set {ALLOW_FOREIGN_ENV}=1."
        )
    others = st.st_mode & stat.S_IWOTH or (st.st_mode & stat.S_IWGRP
                                           and st.st_gid != os.getegid())
    if others:
        logger.warning(
            "The folder %r (mode %o) can be written by users other than its owner: they "
            "could swap its entries for links while the run writes there. Restrict it with "
            "`chmod go-w` unless everyone who can write there is trusted.", folder,
            stat.S_IMODE(st.st_mode))


def planted(link: str, doing: str, fs_path: str) -> UnsafeRunFolder:
    try:
        target = f" -> {os.readlink(link)!r}"
    except OSError:
        target = ""
    return UnsafeRunFolder(
        f"Stopped before {doing} {fs_path!r}: {link!r}{target} is a symbolic link inside the "
        "run folder. The fit never creates links there, so someone who can write into the run "
        "folder planted it, and following it would write outside the folder. Remove the link "
        "(check who else can write there), then call fit() again."
    )


def create_file(path: str, *, exclusive: bool) -> int:
    """Open a new (or, unless `exclusive`, existing) local file for writing, never through a
    link and never truncating; returns the descriptor. A link raises UnsafeRunFolder."""
    flags = _CREATE_FLAGS | (os.O_EXCL if exclusive else 0)
    try:
        return os.open(path, flags, 0o644)
    except OSError as e:
        if os.path.islink(path):
            raise planted(path, "writing", path) from e
        raise


__all__ = ["ALLOW_FOREIGN_ENV", "UnsafeRunFolder", "check_owned", "create_file", "planted"]
