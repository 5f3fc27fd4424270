"""Options of ``report()`` and ``get_checkpoint()`` that choose how checkpoints move, and what
``get_all_reported_checkpoints()`` returns."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any


class CheckpointUploadMode(Enum):
    """How ``report(checkpoint=...)`` persists the checkpoint.

    ASYNC: upload in the background; report() returns before the upload is done.
    SYNC: upload before report() returns.
    NO_UPLOAD: the checkpoint already lives in storage; only register it.
    """

    ASYNC = "ASYNC"
    SYNC = "SYNC"
    NO_UPLOAD = "NO_UPLOAD"

    def default_delete_local_checkpoint_after_upload(self) -> bool:
        # Only an async upload owns the local copy after report() returns; with a sync
        # upload the caller still holds (and may reuse) its directory.
        return self is CheckpointUploadMode.ASYNC


class CheckpointConsistencyMode(Enum):
    """What ``get_checkpoint()`` waits for during a run.

    COMMITTED: the checkpoint of the latest report has been uploaded and registered.
    VALIDATED: it has also been validated.
    """

    COMMITTED = "COMMITTED"
    VALIDATED = "VALIDATED"


class ReportedCheckpointStatus(Enum):
    """Where a registered checkpoint stands.

    COMMITTED: saved, and no validation was requested.
    PENDING_VALIDATION: saved; its validation is still running.
    VALIDATED: saved and validated.
    VALIDATION_TIMEOUT: saved; its validation ran out of time.
    VALIDATION_FAILED: saved; its validation failed.
    """

    COMMITTED = "COMMITTED"
    PENDING_VALIDATION = "PENDING_VALIDATION"
    VALIDATED = "VALIDATED"
    VALIDATION_TIMEOUT = "VALIDATION_TIMEOUT"
    VALIDATION_FAILED = "VALIDATION_FAILED"


@dataclass
class ReportedCheckpoint:
    """One checkpoint the run holds, as ``get_all_reported_checkpoints()`` lists it: the
    persisted checkpoint, rank 0's metrics of the report that carried it, and its status."""

    checkpoint: Any
    metrics: dict[str, Any]
    status: ReportedCheckpointStatus
