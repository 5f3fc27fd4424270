"""One owner per run folder: the lock fit() holds on `<storage_path>/<name>/`.

Design note
-----------
Why: two fits on one `(storage_path, name)` would both restore the same snapshot, overwrite
each other's (last writer wins), delete each other's checkpoints through retention and each
other's in-progress files through start-up clean-up. Ray does not check this; the reference
refuses the second fit with RunFolderInUseError naming the first (host, pid, start time).

When: taken right after the StorageContext exists (which only creates the marker), before the
start-up clean-up and the snapshot restore; released when fit() ends, however it ends. A
process that dies without releasing is handled by the backend:

- local and mounted file systems (local_lock.py): `flock` on the storage marker, which the
  kernel drops with the process; a dead owner's record is replaced with a warning.
- S3 (s3_lease.py): a lease object created only if absent (`If-None-Match: *`); a lease of a
  process this host can prove dead is taken over (warning); otherwise delete the object
  named in the error, or set REFERENCE_TRAIN_TAKE_OVER_RUN=1 for one fit. A store that
  refuses or fails the lease (AccessDenied, 503, unreachable) fails the fit closed with
  RunFolderLockError, unless REFERENCE_TRAIN_RUN_UNLOCKED=1 asks to run unlocked.
- other filesystems (GCS, HDFS, custom ones): not locked; a warning says so.

The two variables are read by fit() when it starts, in the process that runs it.
REFERENCE_TRAIN_TAKE_OVER_RUN is consumed there (removed from os.environ), so it takes over
one run folder, not every later fit of the process; REFERENCE_TRAIN_RUN_UNLOCKED is not (a
store that keeps refusing the lease keeps refusing it), and it never overrides a lease that
another fit holds.

What it leaves: `<run>/.run_owner.json` (run_owner.OWNER_FILENAME) while a fit owns the
folder; nothing once it ended (a killed owner's record stays until the next fit). Readers
(`Result.from_path`, Ray's and ours) only read the snapshot, so they are not affected, and
they take no lock: reading a running fit's folder is fine.
"""

from __future__ import annotations

import logging
import os

import pyarrow.fs as pafs

from reference.train._internal.storage import fs_utils, local_lock, s3_lease
from reference.train._internal.storage.run_owner import (
    OWNER_FILENAME,
    TAKE_OVER_ENV,
    RunLock,
    RunOwner,
    Unlocked,
)
from reference.train._internal.storage.storage_context import (
    VALIDATE_STORAGE_MARKER_FILENAME,
    StorageContext,
)

logger = logging.getLogger(__name__)

#: Set to 1 to run a fit unlocked when its store refuses or fails the run-folder lease.
UNLOCKED_ENV = "REFERENCE_TRAIN_RUN_UNLOCKED"


def take_over_requested(environ=None) -> bool:
    """Whether TAKE_OVER_ENV asks to take over a run folder from an owner not proven dead;
    the variable is consumed (removed), so it applies to the one fit that reads it."""
    return (os.environ if environ is None else environ).pop(TAKE_OVER_ENV, "") == "1"


def unlocked_allowed(environ=None) -> bool:
    """Whether UNLOCKED_ENV asks to run unlocked when the store fails the lease."""
    return (os.environ if environ is None else environ).get(UNLOCKED_ENV, "") == "1"


def acquire_run_lock(storage: StorageContext, *, take_over: bool = False,
                     allow_unlocked: bool = False) -> RunLock:
    """Own `storage`'s run folder until `.release()`, or raise RunFolderInUseError (another
    fit owns it) or RunFolderLockError (the store refused or failed the lock).

    `take_over` (S3 only) takes a lease whose owner cannot be proven dead from this host;
    `allow_unlocked` runs unlocked, with a warning, where RunFolderLockError would be raised.
    """
    fs, run = fs_utils.innermost(storage.storage_filesystem, storage.experiment_fs_path)
    if isinstance(fs, pafs.LocalFileSystem):
        where = "lock"
        lock, holder, unsupported = local_lock.acquire(
            run, os.path.join(run, VALIDATE_STORAGE_MARKER_FILENAME))
    elif fs.type_name == "s3":
        bucket, _, prefix = run.partition("/")
        key = fs_utils.join(prefix, OWNER_FILENAME) if prefix else OWNER_FILENAME
        where = f"s3://{bucket}/{key}"
        try:
            lock, holder, unsupported = s3_lease.acquire(fs, bucket, key, take_over)
        except s3_lease.LeaseError as e:
            if not allow_unlocked:
                raise lock_error(storage, where, e) from e
            lock, holder, unsupported = None, None, f"{UNLOCKED_ENV}=1 is set and {e}"
    else:
        lock, holder, where = None, None, ""
        unsupported = f"run folders on {fs.type_name!r} filesystems cannot be locked"
    if lock is not None:
        return lock
    if unsupported:
        logger.warning(
            "The run folder %r is not locked: %s. Make sure that no other fit uses "
            "RunConfig(storage_path=%r, name=%r) at the same time: two fits on one run folder "
            "overwrite each other's snapshot and delete each other's checkpoints.",
            storage.experiment_fs_path, unsupported, storage.storage_path,
            storage.experiment_dir_name,
        )
        return Unlocked(unsupported)
    raise in_use_error(storage, holder, where)


def lock_error(storage: StorageContext, where: str, error: Exception):
    from reference.train._exceptions import RunFolderLockError

    run = storage.experiment_fs_path
    if getattr(error, "code", "") in {"AccessDenied", "403", "AllAccessDisabled"}:
        fix = (f"Give these credentials s3:GetObject, s3:PutObject and s3:DeleteObject on "
               f"{where}, or ")
    else:
        fix = "Retry when the store answers again, or "
    message = (
        f"RunConfig(storage_path={storage.storage_path!r}, name={storage.experiment_dir_name!r}):"
        f" the run-folder lease {where} could not be taken: {error}. The fit does not run "
        "unlocked: another fit on the same run folder would overwrite its snapshot and delete "
        f"its checkpoints. {fix}set {UNLOCKED_ENV}=1 to run without the lock, making sure "
        "that no other fit uses this run folder meanwhile."
    )
    return RunFolderLockError(message, run_path=run)


def in_use_error(storage: StorageContext, holder: RunOwner | None, where: str):
    from reference.train._exceptions import RunFolderInUseError

    run = storage.experiment_fs_path
    who = "another fit (its owner record is not readable yet)" if holder is None \
        else holder.describe()
    if where == "lock":
        note = " (the lock is released when its process ends"
        if holder is not None and holder.is_dead():
            marker = os.path.join(run, VALIDATE_STORAGE_MARKER_FILENAME)
            note += (f"; pid {holder.pid} has ended, so a process it started holds the lock: "
                     f"`fuser {marker}` names it")
        fix = f"Wait for that fit to end{note}), or choose another RunConfig(name=...)."
    else:
        fix = ("Wait for that fit to end, or choose another RunConfig(name=...); if that fit "
               f"is gone for good (its node was lost), delete {where} or set {TAKE_OVER_ENV}=1 "
               "for one fit to take the folder over.")
    message = (
        f"RunConfig(storage_path={storage.storage_path!r}, name={storage.experiment_dir_name!r}) "
        f"is in use: its run folder {run!r} is owned by {who}. Two fits on one run folder "
        "overwrite each other's snapshot and delete each other's checkpoints, so a folder has "
        f"one owner at a time. {fix}"
    )
    return RunFolderInUseError(message, run_path=run, owner=holder)


__all__ = ["UNLOCKED_ENV", "acquire_run_lock", "in_use_error", "lock_error",
           "take_over_requested", "unlocked_allowed"]
