"""Functions a training function calls: report, get_context, get_checkpoint, ..."""

from __future__ import annotations

from typing import Any, Callable

from reference.train._internal.session import get_session
from reference.train._report_config import (
    CheckpointConsistencyMode,
    CheckpointUploadMode,
    ReportedCheckpoint,
)


def report(
    metrics: dict[str, Any],
    checkpoint=None,
    checkpoint_dir_name: str | None = None,
    checkpoint_upload_mode: CheckpointUploadMode = CheckpointUploadMode.SYNC,
    delete_local_checkpoint_after_upload: bool | None = None,
    checkpoint_upload_fn: Callable | None = None,
    validation=False,
) -> None:
    """Report metrics, and optionally a checkpoint, for this round. Every rank must call it
    the same number of times: each call is one consolidated round across ranks."""
    session = get_session("report")
    if validation and not checkpoint:  # Ray's message, then the fix
        raise ValueError("Validation requires a checkpoint to be provided. Got "
                         f"report(validation={validation!r}) without one: pass `checkpoint=`.")
    session.report(metrics, checkpoint, checkpoint_dir_name, checkpoint_upload_mode,
                   delete_local_checkpoint_after_upload, checkpoint_upload_fn, validation)


def get_context():
    """The TrainContext of this worker (ranks, world size, experiment name)."""
    return get_session("get_context").context


def get_preemption_info():
    """A `PreemptionInfo` while a node of the run is being preempted, else None (always None
    in local mode). A collective: every rank must call it the same number of times, and all
    get rank 0's view."""
    return get_session("get_preemption_info").collective("preemption", None)


def get_checkpoint():
    """The checkpoint to resume from: the latest one this run (or a run of the same name)
    registered, or None in a fresh run."""
    return get_session("get_checkpoint").get_checkpoint()


def get_dataset_shard(dataset_name: str | None = None):
    """This worker's shard of the dataset passed as `datasets={dataset_name: ...}`."""
    return get_session("get_dataset_shard").get_dataset_shard(dataset_name)


def get_all_reported_checkpoints(
    consistency_mode: CheckpointConsistencyMode = CheckpointConsistencyMode.VALIDATED,
    timeout_s: float | None = None,
) -> list[ReportedCheckpoint]:
    """The checkpoints the run holds (retained ones, worst to best) as `ReportedCheckpoint`s:
    the checkpoint, rank 0's metrics of the report that carried it, and its status. A report's
    checkpoint is listed as soon as that report() has returned; `[]` in local mode."""
    return get_session("get_all_reported_checkpoints").get_all_reported_checkpoints(
        consistency_mode, timeout_s)
