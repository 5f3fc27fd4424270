"""Which checkpoints a run keeps, in what order, and the snapshot that records them.

Design note
-----------
Ordering: checkpoint_order.py (Ray Train 2.60's rules, and where the reference departs).

Retention: after each registration, with `num_to_keep = k`, the first len - k entries are
evicted except the latest checkpoint, which always stays (so k + 1 folders can exist).
`best_checkpoint_results` is the last k entries (all when k is None); it can omit the latest.

Ordering hazard: the snapshot naming the new state is written (atomically) before the
registration counts in memory (the lists are put back when the write fails), and evicted
folders are deleted only after it. A registration that fails (a full disk) changes nothing, in
memory or on storage, so it can simply be retried; a crash after the snapshot leaves extra
whole folders, never a snapshot naming a deleted one. A folder shared by two entries (a
reused name) is not deleted while another retained entry names it.

Cost per report: each entry's JSON is encoded once, when it is registered or restored, and
its score is computed once; a report encodes its own entry, finds its place by bisection
(a linear scan only for a restored list that is not in score order), and writes the snapshot
assembled from the encoded entries. Only the bytes written grow with the number of kept
checkpoints, so large metrics cost their size on every later report (warned once per run).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from reference.train._internal.storage import checkpoint_order, confine, persist, snapshot
from reference.train._internal.storage.checkpoint_order import flatten_metrics
from reference.train._internal.storage.snapshot import (
    CheckpointManagerInitializationError,
    ManagerSnapshot,
    SnapshotEntry,
)
from reference.train._internal.storage.storage_context import (
    CHECKPOINT_MANAGER_SNAPSHOT_FILENAME,
    StorageContext,
)

logger = logging.getLogger(__name__)

# A settled validation's status -> the snapshot list that records it.
_TERMINAL_STATUSES = {
    "VALIDATED": "validated_checkpoint_dir_names",
    "VALIDATION_TIMEOUT": "timed_out_validation_checkpoint_dir_names",
    "VALIDATION_FAILED": "failed_validation_checkpoint_dir_names",
}

# An entry's encoded metrics above this size are warned about (once per manager).
LARGE_METRICS_BYTES = 1_000_000


@dataclass(eq=False)
class CheckpointRecord:
    """One registered checkpoint. Identity, not value, distinguishes records."""

    dir_name: str
    fs_path: str
    metrics: dict
    report_index: int
    restored: bool = False
    checkpoint: Any = field(default=None, repr=False)
    # Cached when registered or restored: the snapshot entry's JSON, and the ordering key.
    encoded: bytes = field(default=b"", repr=False)
    key: tuple = field(default=(), repr=False)


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
        # Kept in step with _results, so that a snapshot is a few C-level joins.
        self._encoded: list[bytes] = []
        self._indices: list[bytes] = []
        self._keys: list[tuple] = []
        self._in_order = True  # _keys ascending (false only for some restored lists)
        self._name_counts: dict[str, int] = {}
        self._latest: CheckpointRecord | None = None
        self._current_report_index = 0
        # dir name -> (record, validation spec) of checkpoints whose validation is pending,
        # in registration order; the terminal statuses' name lists are in _carried.
        self._pending: dict[str, tuple[CheckpointRecord, Any]] = {}
        self._carried: dict[str, list] = {}
        self._warned_large = False
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

    def register_checkpoint(self, checkpoint: Any, metrics: dict,
                            validation: Any = False) -> CheckpointRecord:
        """Register a checkpoint already persisted in the run folder.

        `checkpoint` is a Checkpoint (or anything with `.path`) or its fs path. A truthy
        `validation` (True or a ValidationTaskConfig) registers it PENDING_VALIDATION until
        `record_validation` settles it. All or nothing: when it raises (bad metrics, a
        failed snapshot write) nothing has changed.
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
        self._prepare(record)
        self._warn_if_large(record)
        position = self._insert_position(record)

        # Change the lists in place (O(1) amortised) and undo that if the snapshot write fails.
        lists = (self._results, self._encoded, self._indices, self._keys)
        for lst, item in zip(lists, self._columns(record), strict=True):
            lst.insert(position, item)
        doomed = self._retention(self._results, latest=record)
        removed = [(i, [lst.pop(i) for lst in lists]) for i in reversed(doomed)]
        evicted = [items[0] for _, items in removed]
        delta = {dir_name: 1}
        for old in evicted:
            delta[old.dir_name] = delta.get(old.dir_name, 0) - 1
        replaced = self._pending.pop(dir_name, None)  # a reused name: the new entry counts
        if validation:
            self._pending[dir_name] = (record, validation)
        try:
            snapshot.write_snapshot(self._storage, self._snapshot_bytes(
                record, self._current_report_index + 1, delta))
        except BaseException:
            self._pending.pop(dir_name, None)
            if replaced is not None:
                self._pending[dir_name] = replaced
            for i, items in reversed(removed):
                for lst, item in zip(lists, items, strict=True):
                    lst.insert(i, item)
            for lst in lists:
                del lst[position]
            raise

        self._latest = record
        self._current_report_index += 1
        self._apply_counts(delta, evicted)
        return record

    def _apply_counts(self, delta: dict[str, int], evicted: list[CheckpointRecord]) -> None:
        """After a snapshot write: count the names it changed, delete unnamed folders."""
        counts = self._name_counts
        for name, change in delta.items():
            counts[name] = counts.get(name, 0) + change
            if not counts[name]:
                del counts[name]
        for old in evicted:
            if old.dir_name not in counts:
                persist.delete_checkpoint_dir(self._storage, old.fs_path)

    # ----- validation ---------------------------------------------------------------------

    @property
    def pending_validations(self) -> list[tuple[CheckpointRecord, Any]]:
        """(record, validation spec) of every checkpoint still PENDING_VALIDATION, in the
        order they were registered (a resumed run's come from the snapshot, where a spec
        that was a ValidationTaskConfig is its JSON dict)."""
        return list(self._pending.values())

    def record_validation(self, dir_name: str, status: str, metrics: dict | None = None) -> None:
        """Settle the pending validation of checkpoint `dir_name` as Ray's
        CheckpointManager.update_checkpoints_with_validation_result does: "VALIDATED"
        merges `metrics` into the checkpoint's metrics and moves it to its new place in the
        score order; "VALIDATION_TIMEOUT" / "VALIDATION_FAILED" leave metrics and place as
        they were. Retention then runs again (the checkpoint is no longer protected as
        pending) and the snapshot is rewritten. All or nothing, like a registration."""
        if status not in _TERMINAL_STATUSES:
            raise ValueError(f"status={status!r}: expected one of {sorted(_TERMINAL_STATUSES)}")
        pending = self._pending.get(dir_name)
        if pending is None:  # Ray's message
            logger.warning("Checkpoint %s not found in pending training results. ", dir_name)
            return
        record = pending[0]
        lists = (self._results, self._encoded, self._indices, self._keys)
        saved = ([list(lst) for lst in lists], dict(self._pending),
                 {k: list(v) for k, v in self._carried.items()},
                 dict(record.metrics), record.key, record.encoded)
        try:
            del self._pending[dir_name]
            if status == "VALIDATED":
                record.metrics.update(metrics or {})
                self._prepare(record)  # may raise: the merged metrics must be storable
                at = next(i for i, r in enumerate(self._results) if r is record)
                for lst in lists:
                    del lst[at]
                position = self._insert_position(record)
                for lst, item in zip(lists, self._columns(record), strict=True):
                    lst.insert(position, item)
            self._carried.setdefault(_TERMINAL_STATUSES[status], []).append(dir_name)
            doomed = self._retention(self._results, latest=self._latest)
            evicted = [self._results[i] for i in doomed]
            for i in reversed(doomed):
                for lst in lists:
                    del lst[i]
            delta: dict[str, int] = {}
            for old in evicted:
                delta[old.dir_name] = delta.get(old.dir_name, 0) - 1
            snapshot.write_snapshot(self._storage, self._snapshot_bytes(
                self._latest, self._current_report_index, delta))
        except BaseException:
            columns, self._pending, self._carried = saved[0], saved[1], saved[2]
            for lst, old in zip(lists, columns, strict=True):
                lst[:] = old
            record.metrics.clear()
            record.metrics.update(saved[3])
            record.key, record.encoded = saved[4], saved[5]
            raise
        self._apply_counts(delta, evicted)

    @staticmethod
    def _columns(record: CheckpointRecord) -> tuple:
        """What the parallel lists hold for `record`, in their order."""
        return (record, record.encoded, str(record.report_index).encode(),
                (record.key, record.report_index))

    def _prepare(self, record: CheckpointRecord) -> None:
        """Compute `record`'s ordering key and snapshot entry once (both may raise)."""
        if self._score_attribute is not None:
            flat = flatten_metrics(record.metrics)
            record.key = checkpoint_order.score_key(flat, self._score_attribute, self._factor,
                                                    record.dir_name, record.restored)
            if self._score_attribute not in flat and not record.restored:
                logger.error(
                    "Checkpoint %r has no metric %r (reported keys: %s); it scores -inf "
                    "before the score order is applied.",
                    record.dir_name, self._score_attribute, sorted(flat),
                )
        record.encoded = snapshot.encode_entry(record.dir_name, record.metrics)

    def _warn_if_large(self, record: CheckpointRecord) -> None:
        if self._warned_large or len(record.encoded) < LARGE_METRICS_BYTES:
            return
        self._warned_large = True
        logger.warning(
            "The metrics of checkpoint %r take %.1f MB in %s. The snapshot holds the metrics "
            "of every kept checkpoint and is rewritten whole on every report, so each later "
            "report writes them again. Save large values (arrays, histograms, per-sample "
            "results) as files in the checkpoint folder and report only small numbers as "
            "metrics; CheckpointConfig(num_to_keep=...) bounds what the snapshot holds.",
            record.dir_name, len(record.encoded) / 1e6, CHECKPOINT_MANAGER_SNAPSHOT_FILENAME,
        )

    def _snapshot_bytes(self, latest: CheckpointRecord | None, current_report_index: int,
                        delta: dict[str, int]) -> bytes:
        """The snapshot of the current lists; `delta` is the change to the name counts that
        the registration being written makes."""
        counts = self._name_counts

        def kept(name: str) -> bool:
            return counts.get(name, 0) + delta.get(name, 0) > 0

        carried = {
            key: [n for n in names if kept(n)]
            for key, names in self._carried.items()
            if key.endswith("_dir_names")
        }
        pending = list(self._pending.values())
        return snapshot.assemble(
            results=self._encoded,
            report_indices=self._indices,
            current_report_index=current_report_index,
            latest=None if latest is None else latest.encoded,
            pending=[r.encoded for r, _ in pending],
            pending_validation_specs=[spec for _, spec in pending],
            validated=carried.get("validated_checkpoint_dir_names", []),
            timed_out=carried.get("timed_out_validation_checkpoint_dir_names", []),
            failed=carried.get("failed_validation_checkpoint_dir_names", []),
        )

    def _insert_position(self, record: CheckpointRecord) -> int:
        if self._score_attribute is None:
            return len(self._results)
        return checkpoint_order.insert_position(self._keys, (record.key, record.report_index),
                                                self._in_order)

    def _retention(self, results: list[CheckpointRecord], latest: CheckpointRecord) -> list[int]:
        """Positions in `results` to evict: the worst len - k, except the latest checkpoint and
        those with a pending validation. Looks only at those len - k entries."""
        k = self._num_to_keep
        if k is None or len(results) <= k:
            return []
        pending = self._pending_names()
        return [i for i in range(len(results) - k)
                if results[i] is not latest and results[i].dir_name not in pending]

    def _pending_names(self) -> set[str]:
        return set(self._pending)

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

    def checkpoint_of(self, record: CheckpointRecord) -> Any:
        """The Checkpoint of a retained record (made once)."""
        if record.checkpoint is None:
            from reference.train._checkpoint import Checkpoint

            record.checkpoint = Checkpoint(
                record.fs_path, filesystem=self._storage.storage_filesystem
            )
        return record.checkpoint

    @property
    def latest_checkpoint(self) -> Any:
        return None if self._latest is None else self.checkpoint_of(self._latest)

    @property
    def best_checkpoints(self) -> list[tuple[Any, dict]]:
        return [(self.checkpoint_of(r), r.metrics) for r in self.best_checkpoint_results]

    def get_all_reported_checkpoints(self) -> list[tuple[Any, dict]]:
        """(Checkpoint, metrics) of every retained checkpoint, worst -> best."""
        return [(self.checkpoint_of(r), r.metrics) for r in self._results]

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
            pending_training_results=[entry(r) for r, _ in self._pending.values()],
            pending_validation_specs=[spec for _, spec in self._pending.values()],
            **carried,
        )

    def _restore(self) -> None:
        storage = self._storage
        fs, run = storage.storage_filesystem, storage.experiment_fs_path
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
                fs_path=confine.inside(  # a forged snapshot may name a path through a link
                    storage, storage.build_checkpoint_path_from_name(entry.checkpoint_dir_name),
                    "restoring the run snapshot's checkpoint"),
                metrics=entry.metrics,
                report_index=index,
                restored=True,
            )
            self._prepare(record)
            by_name[record.dir_name] = record
            for lst, item in zip((self._results, self._encoded, self._indices, self._keys),
                                 self._columns(record), strict=True):
                lst.append(item)
            self._name_counts[record.dir_name] = self._name_counts.get(record.dir_name, 0) + 1
        self._in_order = all(a <= b for a, b in zip(self._keys, self._keys[1:], strict=False))
        if state.latest_checkpoint_result is not None:
            self._latest = by_name[state.latest_checkpoint_result.checkpoint_dir_name]
        self._current_report_index = state.current_report_index
        for entry, spec in zip(state.pending_training_results, state.pending_validation_specs,
                               strict=True):
            record = by_name.get(entry.checkpoint_dir_name)
            if record is None:  # Ray's loader would fail here; one entry is not worth that
                logger.warning("The run snapshot lists a pending validation of %r, which is "
                               "not among its checkpoints; it is dropped.",
                               entry.checkpoint_dir_name)
                continue
            self._pending[record.dir_name] = (record, spec)
        self._carried = {
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
