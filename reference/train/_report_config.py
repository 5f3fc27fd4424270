"""Options of ``report()`` and ``get_checkpoint()`` that choose how checkpoints move."""

from enum import Enum


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
