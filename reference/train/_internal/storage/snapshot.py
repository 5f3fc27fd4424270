"""`checkpoint_manager_snapshot.json`: the record of a run's retained checkpoints.

Design note
-----------
What: the JSON document Ray Train 2.60 writes into the run folder, field for field, so that
Ray and this package can each resume or read a run written by the other:

    {"ray_version": "2.60.0",
     "checkpoint_results": [{"version": 0, "checkpoint_dir_name": str, "metrics": {...}}, ...],
     "checkpoint_report_indices": [int, ...],      # one per entry, the report it came from
     "latest_checkpoint_result": entry | null,
     "pending_training_results": [entry, ...], "pending_validation_specs": [...],
     "current_report_index": int,
     "validated_checkpoint_dir_names": [str], "timed_out_validation_checkpoint_dir_names": [str],
     "failed_validation_checkpoint_dir_names": [str]}

`checkpoint_results` is ordered worst -> best. Metrics are written as Ray writes them
(compact separators, non-ASCII kept, tuples as lists, and NaN / +-inf as `null`: a NaN score
read back from a snapshot is `None`, see checkpoint_manager.py for how it is scored).

Cost: the format is one JSON document, so every registration rewrites it whole, metrics of
every kept checkpoint included (Ray does the same). What is avoidable is re-encoding: each entry
is encoded once (`encode_entry`) and the document is assembled from the encoded entries
(`assemble`), so a report costs one entry's encoding plus writing the bytes. Large metrics
still cost their size on every later report; they belong in the checkpoint's files.

Why it matters: the snapshot is the only thing that makes a checkpoint exist for a resumed run
or for `Result.from_path`. It is replaced atomically (persist.write_bytes_atomically) and the
manager writes it after a checkpoint is persisted and before evicted folders are deleted, so
every name it lists refers to a whole folder.
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import enum
import json
import math
import pathlib
import uuid
from dataclasses import dataclass, field
from typing import Any

import pyarrow.fs as pafs

from reference.train._internal.storage import fs_utils
from reference.train._internal.storage.storage_context import (
    CHECKPOINT_MANAGER_SNAPSHOT_FILENAME,
    validate_checkpoint_dir_name,
)

# The Ray release whose snapshot format this is; written so that Ray accepts our snapshots.
RAY_COMPAT_VERSION = "2.60.0"


class CheckpointManagerInitializationError(RuntimeError):
    """Raised when a run's snapshot cannot be loaded (corrupt, or names a missing folder)."""


@dataclass(eq=False)
class SnapshotEntry:
    checkpoint_dir_name: str
    metrics: dict
    version: int = 0


@dataclass(eq=False)
class ManagerSnapshot:
    checkpoint_results: list[SnapshotEntry]
    checkpoint_report_indices: list[int]
    current_report_index: int
    latest_checkpoint_result: SnapshotEntry | None = None
    pending_training_results: list[SnapshotEntry] = field(default_factory=list)
    pending_validation_specs: list[Any] = field(default_factory=list)
    validated_checkpoint_dir_names: list[str] = field(default_factory=list)
    timed_out_validation_checkpoint_dir_names: list[str] = field(default_factory=list)
    failed_validation_checkpoint_dir_names: list[str] = field(default_factory=list)
    ray_version: str = RAY_COMPAT_VERSION

    def to_json(self) -> str:
        return self.to_bytes().decode("utf-8")

    def to_bytes(self) -> bytes:
        def entries(items: list[SnapshotEntry]) -> list[bytes]:
            return [encode_entry(e.checkpoint_dir_name, e.metrics, e.version) for e in items]

        latest = self.latest_checkpoint_result
        return assemble(
            results=entries(self.checkpoint_results),
            report_indices=[str(int(i)).encode() for i in self.checkpoint_report_indices],
            current_report_index=self.current_report_index,
            latest=None if latest is None else entries([latest])[0],
            pending=entries(self.pending_training_results),
            pending_validation_specs=self.pending_validation_specs,
            validated=self.validated_checkpoint_dir_names,
            timed_out=self.timed_out_validation_checkpoint_dir_names,
            failed=self.failed_validation_checkpoint_dir_names,
            ray_version=self.ray_version,
        )

    @classmethod
    def from_json(cls, text: str, where: str = CHECKPOINT_MANAGER_SNAPSHOT_FILENAME):
        """Parse and check a snapshot; CheckpointManagerInitializationError says what is wrong."""
        doc: Any = None
        try:
            doc = json.loads(text)
            return cls._from_doc(doc)
        except (ValueError, TypeError, KeyError) as e:
            problem = f"{type(e).__name__}: {e}"
            version = doc.get("ray_version") if isinstance(doc, dict) else None
            if version not in (None, RAY_COMPAT_VERSION):
                problem += (
                    f" (it was written by Ray {version}; this reads the format of Ray "
                    f"{RAY_COMPAT_VERSION}, so use the version that wrote it)"
                )
            raise CheckpointManagerInitializationError(
                f"The run snapshot {where!r} is corrupt: {problem}. To start this run over, "
                f"delete {where!r} (its checkpoint folders stay on storage but are no longer "
                "tracked), or choose a new, unique RunConfig(name=...)."
            ) from e

    @classmethod
    def _from_doc(cls, doc: Any) -> ManagerSnapshot:
        if not isinstance(doc, dict):
            raise ValueError(f"expected a JSON object, found {type(doc).__name__}")
        results = [_entry(x, "checkpoint_results") for x in _get(doc, "checkpoint_results", list)]
        indices = _get(doc, "checkpoint_report_indices", list)
        if len(indices) != len(results) or not all(_is_int(i) for i in indices):
            raise ValueError("checkpoint_report_indices must hold one integer per checkpoint")
        names = {e.checkpoint_dir_name for e in results}
        latest_doc = doc.get("latest_checkpoint_result")
        latest = None if latest_doc is None else _entry(latest_doc, "latest_checkpoint_result")
        pending = [
            _entry(x, "pending_training_results")
            for x in _get(doc, "pending_training_results", list)
        ]
        specs = _get(doc, "pending_validation_specs", list)
        if len(specs) != len(pending):
            raise ValueError("pending_validation_specs must match pending_training_results")
        for e in ([latest] if latest else []) + pending:
            if e.checkpoint_dir_name not in names:
                raise ValueError(
                    f"{e.checkpoint_dir_name!r} is referenced but not in checkpoint_results"
                )
        current = _get(doc, "current_report_index", int)
        lists = {}
        for key in (
            "validated_checkpoint_dir_names",
            "timed_out_validation_checkpoint_dir_names",
            "failed_validation_checkpoint_dir_names",
        ):
            lists[key] = _get(doc, key, list)
            if not all(isinstance(n, str) for n in lists[key]):
                raise ValueError(f"{key} must be a list of strings")
        return cls(
            checkpoint_results=results,
            checkpoint_report_indices=list(indices),
            current_report_index=current,
            latest_checkpoint_result=latest,
            pending_training_results=pending,
            pending_validation_specs=list(specs),
            ray_version=str(doc.get("ray_version", RAY_COMPAT_VERSION)),
            **lists,
        )


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _get(doc: dict, key: str, kind: type) -> Any:
    if key not in doc:
        raise KeyError(f"field {key!r} is missing")
    value = doc[key]
    if not isinstance(value, kind) or (kind is int and not _is_int(value)):
        raise TypeError(f"field {key!r} must be a {kind.__name__}, found {value!r}")
    return value


def _entry(doc: Any, where: str) -> SnapshotEntry:
    if not isinstance(doc, dict):
        raise TypeError(f"an entry of {where} must be an object, found {doc!r}")
    name = _get(doc, "checkpoint_dir_name", str)
    validate_checkpoint_dir_name(name)
    version = doc.get("version", 0)
    if not _is_int(version):
        raise TypeError(f"version of {name!r} must be an integer, found {version!r}")
    return SnapshotEntry(name, _get(doc, "metrics", dict), version)


_PLAIN = {int, float, bool, str, type(None)}  # exact types: subclasses take the long way


def _all_finite(values, kinds: set) -> bool:
    if kinds <= {int, float, bool}:
        return all(map(math.isfinite, values))
    return all(math.isfinite(v) for v in values if type(v) is float)


def to_jsonable(value: Any, where: str) -> Any:
    """The JSON form Ray's snapshot gives `value` (non-finite floats become None)."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {_key(k, where): to_jsonable(v, f"{where}[{k!r}]") for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        kinds = set(map(type, value))
        if kinds <= _PLAIN and (float not in kinds or _all_finite(value, kinds)):
            return list(value)  # nothing in it to convert: copied at C speed (large metrics)
        return [to_jsonable(v, where) for v in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return to_jsonable(dataclasses.asdict(value), where)
    # What Ray's pydantic snapshot also stores, spelled as pydantic's JSON mode spells it.
    # Not numpy scalars other than np.float64 (a float): Ray 2.60 cannot store np.float32,
    # np.int64, np.bool_ or a 0-d array, so they fail here as in any run on Ray.
    if isinstance(value, enum.Enum):
        return to_jsonable(value.value, where)
    if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, (decimal.Decimal, pathlib.Path, uuid.UUID)):
        return str(value)
    if isinstance(value, complex):
        return str(value).strip("()")
    if isinstance(value, (bytes, bytearray)):
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            pass
    raise TypeError(
        f"{where} holds {value!r} of type {type(value).__name__}, which cannot be stored in "
        f"{CHECKPOINT_MANAGER_SNAPSHOT_FILENAME}. Report metrics made of numbers, strings, "
        "booleans, None, lists and dicts (convert tensors and arrays with .item()/.tolist())."
    )


def _key(key: Any, where: str) -> str:
    """A dict key as Ray's pydantic snapshot spells it: the key's JSON value as text (True is
    'true', None and non-finite floats are 'None', an Enum its value, a tuple '1,2')."""
    if isinstance(key, str):
        return key
    value = to_jsonable(key, f"a key of {where}")
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(_key(v, where) for v in value)
    return str(value)


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def _str_keys_only(value: Any) -> bool:
    """True when every dict inside `value` has only str keys. Other keys are spelled
    differently by `json` than by Ray's snapshot (None -> "null" vs "None"), so only documents
    without them may skip `to_jsonable`. Scans containers by element type, not element by
    element, so a long list of numbers costs little."""
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if not all(isinstance(k, str) for k in node):
                return False
            items: Any = node.values()
        elif isinstance(node, (list, tuple)):
            items = node
        else:
            continue
        nested = {t for t in set(map(type, items)) if issubclass(t, (dict, list, tuple))}
        if nested:
            stack.extend(v for v in items if type(v) in nested)
    return True


def encode_json(value: Any, where: str) -> str:
    """`value` in the snapshot's JSON form: `_dumps(to_jsonable(value, where))`, computed by the
    C encoder alone when that gives the same text (no NaN/inf, no non-JSON types, str keys)."""
    if _str_keys_only(value):
        try:
            return _dumps(value)
        except (TypeError, ValueError):
            pass  # NaN/inf or a type only to_jsonable converts (tuples in keys, dataclasses)
    return _dumps(to_jsonable(value, where))


def encode_entry(checkpoint_dir_name: str, metrics: dict, version: int = 0) -> bytes:
    """One entry of `checkpoint_results` as the snapshot spells it (UTF-8). Raises TypeError
    naming the key of a value that cannot be stored."""
    body = encode_json(metrics, f"metrics of checkpoint {checkpoint_dir_name!r}")
    name = _dumps(checkpoint_dir_name)
    return f'{{"version":{int(version)},"checkpoint_dir_name":{name},"metrics":{body}}}'.encode()


def assemble(*, results: list[bytes], report_indices: list[bytes], current_report_index: int,
             latest: bytes | None, pending: list[bytes] = (), pending_validation_specs=(),
             validated=(), timed_out=(), failed=(), ray_version: str = RAY_COMPAT_VERSION
             ) -> bytes:
    """The snapshot document from encoded entries (`encode_entry`) and report indices
    (ASCII digits), byte for byte what `json.dumps` of the whole document gives."""
    specs = encode_json(list(pending_validation_specs), "pending_validation_specs")
    return b"".join((
        b'{"ray_version":', _dumps(ray_version).encode(),
        b',"checkpoint_results":[', b",".join(results),
        b'],"checkpoint_report_indices":[', b",".join(report_indices),
        b'],"latest_checkpoint_result":', b"null" if latest is None else latest,
        b',"pending_training_results":[', b",".join(pending),
        b'],"pending_validation_specs":', specs.encode(),
        b',"current_report_index":', str(int(current_report_index)).encode(),
        b',"validated_checkpoint_dir_names":', _dumps(list(validated)).encode(),
        b',"timed_out_validation_checkpoint_dir_names":', _dumps(list(timed_out)).encode(),
        b',"failed_validation_checkpoint_dir_names":', _dumps(list(failed)).encode(),
        b"}",
    ))


def write_snapshot(storage, snapshot: ManagerSnapshot | bytes) -> None:
    """Atomically replace the run's snapshot (`storage` is a StorageContext; `snapshot` a
    ManagerSnapshot or its encoded bytes). An OSError names the file and the run."""
    from reference.train._internal.storage.persist import write_bytes_atomically

    data = snapshot if isinstance(snapshot, bytes) else snapshot.to_bytes()
    write_bytes_atomically(storage, storage.checkpoint_manager_snapshot_path, data,
                           what="the run snapshot")


def read_snapshot(fs: pafs.FileSystem, run_fs_path: str) -> ManagerSnapshot | None:
    """The snapshot in `run_fs_path`, or None when the run has none yet."""
    path = fs_utils.join(run_fs_path, CHECKPOINT_MANAGER_SNAPSHOT_FILENAME)
    if fs_utils.file_type(fs, path) != pafs.FileType.File:
        return None
    with fs.open_input_stream(path) as f:
        raw = f.read()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        text = f"<{e}>"  # reported as corrupt by from_json
    return ManagerSnapshot.from_json(text, where=path)


def check_checkpoints_exist(fs: pafs.FileSystem, run_fs_path: str, snapshot: ManagerSnapshot):
    """Raise CheckpointManagerInitializationError if a listed checkpoint folder is gone."""
    names = [e.checkpoint_dir_name for e in snapshot.checkpoint_results]
    paths = [fs_utils.join(run_fs_path, n) for n in names]
    for name, info in zip(names, fs.get_file_info(paths) if paths else [], strict=True):
        if info.type == pafs.FileType.NotFound:
            raise CheckpointManagerInitializationError(
                f"The run snapshot in {run_fs_path!r} lists checkpoint {name!r}, but the "
                f"folder {info.path!r} does not exist anymore. Restore that folder, or start "
                f"over by deleting {CHECKPOINT_MANAGER_SNAPSHOT_FILENAME} (or the whole run "
                "folder), or choose a new, unique RunConfig(name=...)."
            )


@dataclass
class ResultState:
    """What `Result.from_path` needs: `(checkpoint fs path, metrics)` pairs."""

    experiment_fs_path: str
    latest: tuple[str, dict] | None
    best: list[tuple[str, dict]]


def read_result_state(fs: pafs.FileSystem, fs_path: str) -> ResultState:
    """Read a finished (or crashed) run's checkpoints from its snapshot.

    `best` is worst -> best and holds every entry the snapshot lists (Ray's
    `Result.from_path` applies no `num_to_keep` either).
    """
    fs_path = fs_path.rstrip("/") or "/"
    if not fs_utils.exists(fs, fs_path):
        raise RuntimeError(f"Experiment folder {fs_path} doesn't exist.")
    snapshot = read_snapshot(fs, fs_path)
    if snapshot is None:
        raise RuntimeError(
            f"Failed to restore the Result object: {CHECKPOINT_MANAGER_SNAPSHOT_FILENAME} "
            f"doesn't exist in the experiment folder {fs_path!r}. Make sure that this is an "
            "output directory created by a Ray Train run that reported at least one checkpoint."
        )
    check_checkpoints_exist(fs, fs_path, snapshot)

    def pair(e: SnapshotEntry) -> tuple[str, dict]:
        return fs_utils.join(fs_path, e.checkpoint_dir_name), e.metrics

    by_name = {e.checkpoint_dir_name: e for e in snapshot.checkpoint_results}
    latest = snapshot.latest_checkpoint_result
    best = [pair(e) for e in snapshot.checkpoint_results]
    return ResultState(
        experiment_fs_path=fs_path,
        latest=None if latest is None else pair(by_name[latest.checkpoint_dir_name]),
        best=best,
    )
