"""Run storage: paths (`StorageContext`), atomic persistence, retention and the run snapshot."""

from reference.train._internal.storage.checkpoint_manager import (
    CheckpointManager,
    CheckpointRecord,
    flatten_metrics,
)
from reference.train._internal.storage.persist import (
    delete_checkpoint_dir,
    persist_as_checkpoint,
    persist_checkpoint,
    remove_temporaries,
)
from reference.train._internal.storage.snapshot import (
    CheckpointManagerInitializationError,
    ManagerSnapshot,
    ResultState,
    SnapshotEntry,
    read_result_state,
    read_snapshot,
    write_snapshot,
)
from reference.train._internal.storage.storage_context import (
    CHECKPOINT_MANAGER_SNAPSHOT_FILENAME,
    VALIDATE_STORAGE_MARKER_FILENAME,
    StorageContext,
    validate_checkpoint_dir_name,
)

__all__ = [
    "CHECKPOINT_MANAGER_SNAPSHOT_FILENAME",
    "VALIDATE_STORAGE_MARKER_FILENAME",
    "CheckpointManager",
    "CheckpointManagerInitializationError",
    "CheckpointRecord",
    "ManagerSnapshot",
    "ResultState",
    "SnapshotEntry",
    "StorageContext",
    "delete_checkpoint_dir",
    "flatten_metrics",
    "persist_as_checkpoint",
    "persist_checkpoint",
    "read_result_state",
    "read_snapshot",
    "remove_temporaries",
    "validate_checkpoint_dir_name",
    "write_snapshot",
]
