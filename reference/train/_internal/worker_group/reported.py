"""`get_all_reported_checkpoints()` on a worker: the run snapshot read as reported checkpoints.

Exact without asking the controller: `report()` returns only after its round was
acknowledged, and the controller writes the snapshot before it acknowledges (worker.py's
design note). In VALIDATED mode the snapshot is read again until no checkpoint is pending
validation.
"""

from __future__ import annotations

import logging

from reference.train._internal.storage.snapshot import read_snapshot
from reference.train._report_config import (
    CheckpointConsistencyMode,
    ReportedCheckpoint,
    ReportedCheckpointStatus,
)


def reported_checkpoints(storage) -> list[ReportedCheckpoint]:
    """The checkpoints the run snapshot lists, worst to best, with their status."""
    from reference.train._checkpoint import Checkpoint

    fs = storage.storage_filesystem
    snapshot = read_snapshot(fs, storage.experiment_fs_path)
    if snapshot is None:
        return []
    by_status = [  # the first set holding a checkpoint decides its status
        ({e.checkpoint_dir_name for e in snapshot.pending_training_results},
         ReportedCheckpointStatus.PENDING_VALIDATION),
        (set(snapshot.timed_out_validation_checkpoint_dir_names),
         ReportedCheckpointStatus.VALIDATION_TIMEOUT),
        (set(snapshot.failed_validation_checkpoint_dir_names),
         ReportedCheckpointStatus.VALIDATION_FAILED),
        (set(snapshot.validated_checkpoint_dir_names), ReportedCheckpointStatus.VALIDATED),
    ]

    def status(name: str) -> ReportedCheckpointStatus:
        return next((s for names, s in by_status if name in names),
                    ReportedCheckpointStatus.COMMITTED)

    return [
        ReportedCheckpoint(
            checkpoint=Checkpoint(storage.build_checkpoint_path_from_name(e.checkpoint_dir_name),
                                  filesystem=fs),
            metrics=e.metrics, status=status(e.checkpoint_dir_name))
        for e in snapshot.checkpoint_results
    ]


#: how often get_all_reported_checkpoints(VALIDATED) reads the snapshot while it waits
VALIDATED_POLL_S = 0.05


def wait_for_validations(storage, timeout_s: float | None) -> list[ReportedCheckpoint]:
    """The reported checkpoints once none is PENDING_VALIDATION, or at `timeout_s` (logged
    every RAY_TRAIN_COLLECTIVE_WARN_INTERVAL_S while it waits, as in Ray)."""
    import threading
    import time

    from reference.train._internal.controller.controller import (
        COLLECTIVE_WARN_INTERVAL_S_ENV_VAR,
        collective_warn_interval_s,
    )

    warn_interval_s = collective_warn_interval_s()
    start = time.monotonic()
    deadline = None if timeout_s is None else start + timeout_s
    warn_at = start + warn_interval_s
    pause = threading.Event()  # never set: a bounded wait between reads
    while True:
        found = reported_checkpoints(storage)
        if not any(r.status is ReportedCheckpointStatus.PENDING_VALIDATION for r in found):
            return found
        now = time.monotonic()
        if deadline is not None and now >= deadline:
            return found
        if now >= warn_at:  # Ray's message
            logging.getLogger(__name__).warning(
                "`get_all_reported_checkpoints` has been waiting for all checkpoints to get "
                "to the %s state for %.2f s.\nYou can set the %s environment variable to "
                "change the frequency of this warning (current value: %s s).",
                CheckpointConsistencyMode.VALIDATED, now - start,
                COLLECTIVE_WARN_INTERVAL_S_ENV_VAR, warn_interval_s)
            warn_at = now + warn_interval_s
        pause.wait(VALIDATED_POLL_S if deadline is None
                   else max(0.0, min(VALIDATED_POLL_S, deadline - now)))


__all__ = ["VALIDATED_POLL_S", "reported_checkpoints", "wait_for_validations"]
