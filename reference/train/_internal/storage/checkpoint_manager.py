"""Which checkpoints a run keeps, in what order, and the snapshot that records them.

Design note
-----------
Ordering (Ray Train 2.60's rules): registered checkpoints form one list ordered worst -> best.
Without `checkpoint_score_attribute` that is report order. With one, each checkpoint's score
is looked up in its metrics flattened with '/' (`{"a": {"b": 1}}` -> `"a/b"`); a missing key
scores -inf (logged, not raised); the score is multiplied by -1 under `"min"`, so a missing
key becomes the *best* under "min" (Ray's quirk, kept); NaN sorts below everything; equal
scores are ordered by report index (later = better). A value that is not a number raises
TypeError (or ValueError for array-likes), before any state changes. Deviations from Ray,
both where Ray's behaviour is a defect: Ray only notices a non-numeric score when it compares
two checkpoints (so the first one slips through); and a NaN score comes back from the snapshot
as null, which makes Ray's resumed run fail at its next checkpoint, so a null score of a
*restored* checkpoint is scored as NaN here.

Retention: after each registration, with `num_to_keep = k`, the first len - k entries are
evicted except the latest checkpoint, which always stays (so k + 1 folders can exist).
`best_checkpoint_results` is the last k entries (all when k is None); it can omit the latest.

Ordering hazard: state is updated, then the snapshot is written (atomically), then evicted
folders are deleted. A crash after the snapshot leaves extra whole folders, never a snapshot
naming a deleted one. A folder shared by two entries (a reused name) is not deleted while
another retained entry names it.
"""

from __future__ import annotations

import logging
import numbers
from dataclasses import dataclass, field
from typing import Any

from reference.train._internal.storage import persist, snapshot
from reference.train._internal.storage.snapshot import (
    CheckpointManagerInitializationError,
    ManagerSnapshot,
    SnapshotEntry,
)
from reference.train._internal.storage.storage_context import StorageContext

logger = logging.getLogger(__name__)


def flatten_metrics(metrics: dict, delimiter: str = "/") -> dict:
    """`{"a": {"b": 1}}` -> `{"a/b": 1}`, level by level; a flattened key replaces an
    existing key of the same spelling (as Ray's flatten does)."""
    flat = dict(metrics)
    while True:
        nested = [k for k, v in flat.items() if isinstance(v, dict)]
        if not nested:
            return flat
        added = {}
        for key in nested:
            for sub, value in flat[key].items():
                added[f"{key}{delimiter}{sub}"] = value
        flat.update(added)
        for key in nested:
            del flat[key]


@dataclass(eq=False)
class CheckpointRecord:
    """One registered checkpoint. Identity, not value, distinguishes records."""

    dir_name: str
    fs_path: str
    metrics: dict
    report_index: int
    restored: bool = False
    checkpoint: Any = field(default=None, repr=False)


def _config_value(config: Any, name: str, default: Any) -> Any:
    return default if config is None else getattr(config, name, default)


class CheckpointManager:
    """Registers persisted checkpoints, applies retention and keeps the snapshot current.

    `checkpoint_config` is any object with `num_to_keep`, `checkpoint_score_attribute` and
    `checkpoint_score_order` (a `CheckpointConfig`), or None for the defaults.
    """

    def __init__(self, storage_context: StorageContext, checkpoint_config: Any = None):
        self._storage = storage_context
        self._config = checkpoint_config
        self._num_to_keep = _config_value(checkpoint_config, "num_to_keep", None)
        self._score_attribute = _config_value(checkpoint_config, "checkpoint_score_attribute", None)
        order = _config_value(checkpoint_config, "checkpoint_score_order", "max")
        if self._num_to_keep is not None and self._num_to_keep <= 0:
            raise ValueError(
                f"CheckpointConfig(num_to_keep={self._num_to_keep!r}) must be None or an "
                "integer >= 1."
            )
        if order not in ("max", "min"):
            raise ValueError(
                f"CheckpointConfig(checkpoint_score_order={order!r}) must be 'max' or 'min'."
            )
        self._factor = 1.0 if order == "max" else -1.0
        self._results: list[CheckpointRecord] = []
        self._latest: CheckpointRecord | None = None
        self._current_report_index = 0
        self._carried: dict[str, list] = {}  # validation bookkeeping kept for Ray's readers
        self._restore()

    # ----- registration -------------------------------------------------------------------

    @property
    def checkpoint_config(self) -> Any:
        return self._config

    @property
    def current_report_index(self) -> int:
        """Reports seen so far, with or without a checkpoint (continues across resumes)."""
        return self._current_report_index

    def record_report_without_checkpoint(self) -> None:
        """Count a report that carried no checkpoint (it shifts later report indices)."""
        self._current_report_index += 1

    def register_checkpoint(self, checkpoint: Any, metrics: dict) -> CheckpointRecord:
        """Register a checkpoint already persisted in the run folder.

        `checkpoint` is a Checkpoint (or anything with `.path`) or its fs path.
        """
        if not isinstance(metrics, dict):
            raise TypeError(
                f"metrics={metrics!r} must be a dict (metrics reported with a checkpoint are "
                "stored in the run snapshot); report a dict such as {'loss': 0.1}."
            )
        fs_path = checkpoint if isinstance(checkpoint, str) else checkpoint.path
        dir_name = self._storage.extract_checkpoint_dir_name_from_path(fs_path)
        record = CheckpointRecord(
            dir_name=dir_name,
            fs_path=self._storage.build_checkpoint_path_from_name(dir_name),
            metrics=metrics,
            report_index=self._current_report_index,
            checkpoint=None if isinstance(checkpoint, str) else checkpoint,
        )
        # Both checks raise before anything changes; scoring first, as in Ray.
        position = self._insert_position(record)
        snapshot.to_jsonable(metrics, f"metrics of checkpoint {dir_name!r}")

        self._results.insert(position, record)
        self._latest = record
        self._current_report_index += 1
        evicted = self._apply_retention()
        snapshot.write_snapshot(self._storage, self.to_snapshot())
        kept_names = {r.dir_name for r in self._results}
        for old in evicted:
            if old.dir_name not in kept_names:
                persist.delete_checkpoint_dir(self._storage, old.fs_path)
        return record

    def _score(self, record: CheckpointRecord) -> tuple[bool, float]:
        attribute = self._score_attribute
        flat = flatten_metrics(record.metrics)
        if attribute not in flat:
            value: Any = float("-inf")
        else:
            value = flat[attribute]
            if value is None and record.restored:
                value = float("nan")  # written as null by the snapshot, see the design note
        try:
            score = self._factor * value
        except TypeError:
            raise TypeError(
                f"checkpoint_score_attribute={attribute!r} of checkpoint {record.dir_name!r} "
                f"is {value!r} ({type(value).__name__}); it must be a number. Report a "
                f"numeric {attribute!r} with every checkpoint or choose another "
                "CheckpointConfig(checkpoint_score_attribute=...)."
            ) from None
        if not isinstance(score, numbers.Real):
            raise ValueError(
                f"checkpoint_score_attribute={attribute!r} of checkpoint {record.dir_name!r} "
                f"is {value!r}; it must be a single number (use .item() for tensors/arrays)."
            )
        if score != score:  # NaN
            return (False, float("-inf"))
        return (True, score)

    def _insert_position(self, record: CheckpointRecord) -> int:
        if self._score_attribute is None:
            return len(self._results)
        key = self._score(record)
        if self._score_attribute not in flatten_metrics(record.metrics):
            logger.error(
                "Checkpoint %r has no metric %r (reported keys: %s); it scores -inf before "
                "the score order is applied.",
                record.dir_name,
                self._score_attribute,
                sorted(flatten_metrics(record.metrics)),
            )
        # A linear scan, not a bisection: a restored list is used in its stored order even when
        # the score settings changed since it was written, and the insertion point must be
        # the same as Ray's then too.
        for i, other in enumerate(self._results):
            other_key = self._score(other)
            if other_key > key or (other_key == key and other.report_index > record.report_index):
                return i
        return len(self._results)

    def _apply_retention(self) -> list[CheckpointRecord]:
        k = self._num_to_keep
        if k is None or len(self._results) <= k:
            return []
        protected = {id(self._latest)} | {
            id(r) for r in self._results if r.dir_name in self._pending_names()
        }
        evicted = [r for r in self._results[:-k] if id(r) not in protected]
        gone = {id(r) for r in evicted}
        self._results = [r for r in self._results if id(r) not in gone]
        return evicted

    def _pending_names(self) -> set[str]:
        return {e.checkpoint_dir_name for e in self._carried.get("pending_training_results", [])}

    # ----- views --------------------------------------------------------------------------

    @property
    def checkpoint_results(self) -> list[CheckpointRecord]:
        """Every retained checkpoint, worst -> best."""
        return list(self._results)

    @property
    def latest_checkpoint_result(self) -> CheckpointRecord | None:
        return self._latest

    @property
    def best_checkpoint_results(self) -> list[CheckpointRecord]:
        if self._num_to_keep is None:
            return list(self._results)
        return self._results[-self._num_to_keep :]

    def _checkpoint_of(self, record: CheckpointRecord) -> Any:
        if record.checkpoint is None:
            from reference.train._checkpoint import Checkpoint

            record.checkpoint = Checkpoint(
                record.fs_path, filesystem=self._storage.storage_filesystem
            )
        return record.checkpoint

    @property
    def latest_checkpoint(self) -> Any:
        return None if self._latest is None else self._checkpoint_of(self._latest)

    @property
    def best_checkpoints(self) -> list[tuple[Any, dict]]:
        return [(self._checkpoint_of(r), r.metrics) for r in self.best_checkpoint_results]

    def get_all_reported_checkpoints(self) -> list[tuple[Any, dict]]:
        """(Checkpoint, metrics) of every retained checkpoint, worst -> best."""
        return [(self._checkpoint_of(r), r.metrics) for r in self._results]

    # ----- snapshot -----------------------------------------------------------------------

    def to_snapshot(self) -> ManagerSnapshot:
        def entry(r: CheckpointRecord) -> SnapshotEntry:
            return SnapshotEntry(r.dir_name, r.metrics)

        kept = {r.dir_name for r in self._results}
        carried = {
            key: [n for n in names if n in kept]
            for key, names in self._carried.items()
            if key.endswith("_dir_names")
        }
        return ManagerSnapshot(
            checkpoint_results=[entry(r) for r in self._results],
            checkpoint_report_indices=[r.report_index for r in self._results],
            current_report_index=self._current_report_index,
            latest_checkpoint_result=None if self._latest is None else entry(self._latest),
            pending_training_results=list(self._carried.get("pending_training_results", [])),
            pending_validation_specs=list(self._carried.get("pending_validation_specs", [])),
            **carried,
        )

    def _restore(self) -> None:
        storage = self._storage
        fs, run = storage.storage_filesystem, storage.experiment_fs_path
        if not storage.read_only:
            persist.remove_temporaries(storage)
        state = snapshot.read_snapshot(fs, run)
        if state is None:
            return
        snapshot.check_checkpoints_exist(fs, run, state)
        by_name = {}
        for entry, index in zip(
            state.checkpoint_results, state.checkpoint_report_indices, strict=True
        ):
            record = CheckpointRecord(
                dir_name=entry.checkpoint_dir_name,
                fs_path=storage.build_checkpoint_path_from_name(entry.checkpoint_dir_name),
                metrics=entry.metrics,
                report_index=index,
                restored=True,
            )
            by_name[record.dir_name] = record
            self._results.append(record)
        if state.latest_checkpoint_result is not None:
            self._latest = by_name[state.latest_checkpoint_result.checkpoint_dir_name]
        self._current_report_index = state.current_report_index
        self._carried = {
            "pending_training_results": state.pending_training_results,
            "pending_validation_specs": state.pending_validation_specs,
            "validated_checkpoint_dir_names": state.validated_checkpoint_dir_names,
            "timed_out_validation_checkpoint_dir_names": (
                state.timed_out_validation_checkpoint_dir_names
            ),
            "failed_validation_checkpoint_dir_names": state.failed_validation_checkpoint_dir_names,
        }
        logger.info(
            "Resuming from the run snapshot in %r (%d checkpoints, latest %r). To start a new "
            "run instead, choose a new RunConfig(name=...) or delete that folder.",
            run,
            len(self._results),
            self._latest.dir_name if self._latest else None,
        )


__all__ = [
    "CheckpointManager",
    "CheckpointManagerInitializationError",
    "CheckpointRecord",
    "flatten_metrics",
]
