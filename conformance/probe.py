"""Instrumented training functions: what every rank did, recorded as data.

A check builds a `Script` (steps, which ranks checkpoint, faults to inject) and hands
`run_script` to the implementation's trainer with `train_loop_config={"script": script}`.
Each rank appends JSON events to a journal file in a folder shared by all workers of the
test (one `write()` per line with O_APPEND, so lines from several processes never tear).
The journal is the portable record of a run that the checkers in `conformance.journal_checks` read.

The instruments must never fail the implementation under test. A reader may catch a line
while another rank is still writing it (a write becomes visible a page at a time), so a
final line without its newline is left for the next read. What goes wrong inside the probe
itself (a journal that cannot be read or written, a torn line) is caught in the rank and kept
as a `probe_error` event; `Journal.events()`, which checks read, then raises `ProbeError`, and
the check is reported as not judged (skipped, "suite error: ..."), not as failed.

Attempts are counted without help from the implementation (see `Journal.next_attempt`).

Faults are portable too: "rank r raises / calls os._exit / is SIGKILLed just before its
k-th report (0-based, counted within the attempt) on attempt a".
"""

from __future__ import annotations

import contextlib
import dataclasses
import faulthandler
import fcntl
import functools
import importlib
import json
import os
import posixpath
import shutil
import signal
import sys
import tempfile
import time
import traceback
import unittest
import uuid
from typing import Any, Callable, Literal

FaultKind = Literal["raise", "exit", "sigkill"]


PROBE_ERROR = "probe_error"
#: how long `Script.late_rank` arrives after its peers at every report: ages for a report
#: that does not wait for its peers (it returns in milliseconds), so its rank journals
#: what had arrived before the late rank did
LATE_S = 0.5


class InjectedFault(RuntimeError):
    """The exception a `raise` fault throws inside the training function."""


class ProbeError(unittest.SkipTest):
    """The suite's own instruments failed during a run, so its journal cannot be trusted.

    A SkipTest: pytest reports the check as skipped with this message (Hypothesis re-raises
    it at once), so a broken instrument is never counted as the implementation's failure.
    """

    PREFIX = "suite error:"


@dataclasses.dataclass(frozen=True)
class Fault:
    kind: FaultKind
    rank: int
    report: int
    attempt: int = 0

    def __str__(self) -> str:
        return f"{self.kind}(rank={self.rank}, report={self.report}, attempt={self.attempt})"


@dataclasses.dataclass(frozen=True)
class Script:
    journal_dir: str
    train_module: str
    steps: int = 3
    #: step -> ranks that pass a checkpoint at that step; steps not listed: no checkpoint.
    #: None means every rank checkpoints at every step.
    checkpoints: dict | None = None
    #: step -> extra metrics for that step (e.g. scores); merged into every rank's metrics
    metrics: dict = dataclasses.field(default_factory=dict)
    faults: tuple = ()
    node_id: Callable[[], str] | None = None
    #: seconds to sleep before each report (lets a cluster change under a running fit)
    step_sleep_s: float = 0.0
    #: rank that sleeps LATE_S before writing its "arrived" marker (report barrier check)
    late_rank: int | None = None
    #: stop once this many steps ran at this world size (elastic checks); None: run all steps
    stop_at_world_size: int | None = None
    stack_dump_after_s: float = 50.0
    #: step -> ranks that write their checkpoint straight into the run folder and report it
    #: with CheckpointUploadMode.NO_UPLOAD
    in_place: dict = dataclasses.field(default_factory=dict)
    #: journal get_all_reported_checkpoints() at the start and after every report, and the
    #: files of get_checkpoint()'s folder after every report
    list_reported: bool = False
    #: step -> rank 0's checkpoint_dir_name (default 'ckpt-<step>')
    dir_names: dict = dataclasses.field(default_factory=dict)
    #: at the start, journal what <train>.collective.broadcast_from_rank_zero and barrier
    #: return on each rank
    collectives: bool = False
    #: steps whose report asks for validation (report(..., validation=True)); the run's
    #: ValidationConfig then runs `validate_checkpoint`
    validate: tuple = ()
    #: every checkpoint also holds more/a-<rank>.json and more/b-<rank>.json (the same
    #: state as its shard): a checkpoint with a subfolder of several files
    nested: bool = False
    #: step -> a tree ({name: bytes, or a dict for a folder, or ("symlink", bytes or dict):
    #: a symbolic link to that file or folder written outside the checkpoint, in
    #: <checkpoint folder>-targets}): what rank 0's checkpoint of that step holds besides
    #: its shard
    trees: dict = dataclasses.field(default_factory=dict)
    #: steps whose report passes delete_local_checkpoint_after_upload=True
    delete_local: tuple = ()

    def checkpointing_ranks(self, step: int, world_size: int) -> tuple:
        if self.checkpoints is None:
            return tuple(range(world_size))
        return tuple(self.checkpoints.get(step, ()))


def _instrument(default: Any = None) -> Callable:
    """Run a probe helper whose first argument is the journal; a failure is noted there and
    `default` returned, so the training function goes on and the check reports a suite
    error instead of a failure of the run."""

    def wrap(fn: Callable) -> Callable:
        @functools.wraps(fn)
        def guarded(journal: Journal, *args, **kwargs):
            try:
                return fn(journal, *args, **kwargs)
            except Exception as exc:  # noqa: BLE001 - the suite's failure, not the run's
                journal.note_error(fn.__name__, exc)
                return default
        return guarded
    return wrap


class Journal:
    def __init__(self, folder: str):
        self.folder = folder
        self.path = os.path.join(folder, "journal.jsonl")

    def record(self, **event: Any) -> bool:
        """Append one event; never raises (a failure is kept by `note_error`)."""
        try:
            self._append(event)
            return True
        except Exception as exc:  # noqa: BLE001 - the suite's failure, not the run's
            self.note_error("Journal.record", exc)
            return False

    def _append(self, event: dict) -> None:
        event.setdefault("t", time.monotonic())
        line = (json.dumps(event, default=str) + "\n").encode()
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            written = os.write(fd, line)  # one write: O_APPEND keeps lines whole
        finally:
            os.close(fd)
        if written != len(line):
            raise OSError(f"short write to {self.path}: {written} of {len(line)} bytes; the "
                          "journal now holds a torn line")

    def note_error(self, where: str, exc: BaseException) -> None:
        """Keep a failure of the probe itself: a `probe_error` event or, when the journal
        cannot be written, a file next to it (or at least a line on stderr)."""
        detail = dict(ev=PROBE_ERROR, where=where, error=f"{type(exc).__name__}: {exc}",
                      traceback="".join(traceback.format_exception(exc))[-4000:],
                      pid=os.getpid())
        try:
            self._append(dict(detail))
        except Exception:  # noqa: BLE001
            try:
                name = f"probe-error-{os.getpid()}-{uuid.uuid4().hex[:8]}.json"
                with open(os.path.join(self.folder, name), "w") as f:
                    json.dump(detail, f, default=str)
            except Exception:  # noqa: BLE001
                sys.stderr.write(f"conformance probe error in {where}: {detail['error']}\n")

    def read(self) -> tuple[list[dict], list[str]]:
        """(events, problems). A final line without its newline is still being written and
        is left out; a complete line that does not parse is a problem (a torn write)."""
        try:
            with open(self.path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return [], []
        lines = data.split(b"\n")
        lines.pop()  # what follows the last newline: nothing, or a line being written
        rows, problems = [], []
        for number, raw in enumerate(lines, 1):
            if not raw.strip():
                continue
            try:
                rows.append(json.loads(raw))
            except ValueError as exc:
                problems.append(f"{self.path} line {number} is not an event ({exc}): "
                                f"{raw[:200]!r}")
        return rows, problems

    def events(self, ev: str | None = None) -> list[dict]:
        """The events (of kind `ev`) for a check; raises ProbeError when the probe failed."""
        rows, problems = self.read()
        problems += [f"{r.get('where')} in pid {r.get('pid')}: {r.get('error')}\n"
                     f"{r.get('traceback', '')}" for r in rows if r.get("ev") == PROBE_ERROR]
        for name in sorted(os.listdir(self.folder) if os.path.isdir(self.folder) else ()):
            if name.startswith("probe-error-"):
                with open(os.path.join(self.folder, name)) as f:
                    problems.append(f"{name}: {f.read()[:4000]}")
        if problems:
            raise ProbeError(f"{ProbeError.PREFIX} the conformance probe failed during this run, so "
                             f"its journal {self.path} cannot be trusted (not a failure of "
                             f"the implementation):\n" + "\n".join(problems)[:6000])
        return _of_kind(rows, ev)

    def events_so_far(self, ev: str | None = None) -> list[dict]:
        """The events written so far, for the ranks themselves; never raises."""
        return _of_kind(self.read()[0], ev)

    @_instrument(default=-1)
    def next_attempt(self, rank: int) -> int:
        """This worker's attempt number.

        A new attempt begins when a worker starts while a worker of the current attempt is
        gone: implementations restart a group only after the previous one is torn down,
        and within an attempt every rank starts before any report can complete. Counting
        per rank would not do: after an elastic resize, new ranks appear.
        """
        state_path = os.path.join(self.folder, "attempts.json")
        with open(os.path.join(self.folder, "attempts.lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                with open(state_path) as f:
                    state = json.load(f)
            except FileNotFoundError:
                state = {"attempt": 0, "pids": []}
            if state["pids"] and not all(_alive(p) for p in state["pids"]):
                state = {"attempt": state["attempt"] + 1, "pids": []}
            state["pids"].append(os.getpid())
            with open(state_path + ".tmp", "w") as f:
                json.dump(state, f)
            os.replace(state_path + ".tmp", state_path)
            return state["attempt"]

    def stacks(self) -> str:
        parts = []
        for name in sorted(os.listdir(self.folder)):
            if name.startswith("stacks-"):
                with open(os.path.join(self.folder, name)) as f:
                    text = f.read()
                if text.strip():
                    parts.append(f"=== {name}\n{text}")
        return "\n".join(parts)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def fire(fault: Fault) -> None:
    if fault.kind == "raise":
        raise InjectedFault(str(fault))
    if fault.kind == "exit":
        os._exit(1)
    if fault.kind == "sigkill":
        os.kill(os.getpid(), signal.SIGKILL)
    raise ValueError(f"Fault.kind={fault.kind!r}: expected 'raise', 'exit' or 'sigkill'")


def exit_after_registered(train, journal: Journal, event: str, rank: int, attempt: int,
                          at: int, **where) -> None:
    """Exit this worker (a `Fault("exit")`) after its latest report: first wait, through
    `get_all_reported_checkpoints()` (it returns once every report in flight is processed),
    until that report's checkpoint is registered, so the restart must restore it; the
    journal records `event` with how many were registered."""
    try:
        registered = len(train.get_all_reported_checkpoints())
    except Exception as exc:  # noqa: BLE001 - not what the checks judge
        registered = f"{type(exc).__name__}: {exc}"
        time.sleep(0.5)
    journal.record(ev=event, rank=rank, attempt=attempt, registered=registered, **where)
    time.sleep(0.2)
    fire(Fault("exit", rank, at, attempt))


@contextlib.contextmanager
def _checkpoint_files(checkpoint):
    """A local folder with the checkpoint's files. A local checkpoint is read in place
    (as_directory); one on another filesystem is downloaded into a folder of this rank's
    own. (Ray 2.60's as_directory on such a checkpoint shares one temporary folder among
    the ranks of a node: when one rank leaves it, the folder is deleted while another
    rank waits on its lock, and that rank raises "Checkpoint directory ... does not
    exist". The checks judge storage, not that race, so they do not run into it.)"""
    if type(checkpoint.filesystem).__name__ == "LocalFileSystem":
        with checkpoint.as_directory() as d:
            yield d
        return
    own = tempfile.mkdtemp(prefix="probe-read-")
    try:
        yield checkpoint.to_directory(own)
    finally:
        shutil.rmtree(own, ignore_errors=True)


def read_state(train, checkpoint) -> dict | None:
    """The state a scripted checkpoint holds: {'step', 'ranks': {rank: attempt}}."""
    if checkpoint is None:
        return None
    with _checkpoint_files(checkpoint) as d:
        shards = sorted(n for n in os.listdir(d) if n.startswith("shard-"))
        states = []
        for n in shards:
            with open(os.path.join(d, n)) as f:
                states.append(json.load(f))
    if not states:
        return {"step": None, "ranks": {}, "path": checkpoint.path}
    return {
        "step": states[0]["step"],
        "ranks": {s["rank"]: s["attempt"] for s in states},
        "path": checkpoint.path,
    }


def write_checkpoint(train, folder: str, step: int, rank: int, attempt: int,
                     nested: bool = False):
    names = [f"shard-{rank}.json"]
    if nested:
        os.makedirs(os.path.join(folder, "more"), exist_ok=True)
        names += [f"more/a-{rank}.json", f"more/b-{rank}.json"]
    os.makedirs(folder, exist_ok=True)
    for name in names:
        with open(os.path.join(folder, name), "w") as f:
            json.dump({"step": step, "rank": rank, "attempt": attempt}, f)
    return train.Checkpoint.from_directory(folder)


def write_tree(folder: str, tree: dict, targets: str) -> None:
    """Write `tree` (see Script.trees) into `folder`; link targets go under `targets`."""
    os.makedirs(folder, exist_ok=True)
    for name, node in tree.items():
        path = os.path.join(folder, name)
        if isinstance(node, tuple):  # ("symlink", what the link points to)
            os.makedirs(targets, exist_ok=True)
            target = os.path.join(tempfile.mkdtemp(dir=targets), name)
            if isinstance(node[1], dict):
                write_tree(target, node[1], targets)
            else:
                with open(target, "wb") as f:
                    f.write(node[1])
            os.symlink(target, path)
        elif isinstance(node, dict):
            write_tree(path, node, targets)
        else:
            with open(path, "wb") as f:
                f.write(node)


def validate_checkpoint(checkpoint, values: list) -> dict:
    """A ValidationConfig function: {"val": values[step]} for the checkpoint of `step`
    (read_state); a None value makes the validation fail."""
    step = read_state(None, checkpoint)["step"]
    if values[step] is None:
        raise RuntimeError(f"the validation of step {step} fails (as the check asks)")
    return {"val": values[step]}


def record_start(s: Script, ctx, journal: Journal, attempt: int, restored) -> None:
    """The `start` event every instrumented training function writes first."""
    journal.record(
        ev="start", rank=ctx.get_world_rank(), attempt=attempt,
        world_size=ctx.get_world_size(), local_rank=ctx.get_local_rank(),
        local_world_size=ctx.get_local_world_size(), node_rank=ctx.get_node_rank(),
        node_id=s.node_id() if s.node_id else None, pid=os.getpid(),
        experiment=ctx.get_experiment_name(), restored=restored,
    )


def fire_due_faults(s: Script, journal: Journal, rank: int, world: int, attempt: int,
                    index: int, step: int) -> None:
    """Fire the script's fault for (rank, report index, attempt), if there is one."""
    for fault in s.faults:
        if (fault.rank, fault.report, fault.attempt) == (rank, index, attempt):
            # A fault could otherwise strike before a peer of this attempt started, and
            # blur where attempts begin; or before a peer recorded that its previous report
            # returned, and the journal would not show that report acknowledged on every
            # rank although it was (seen on a loaded machine).
            _await_starts(journal, attempt, world)
            if index > 0:
                _await_ranks(journal, "reported", attempt, world, step - 1, timeout_s=10.0)
            journal.record(ev="fault", rank=rank, attempt=attempt, step=step,
                           fault=str(fault))
            fire(fault)


@_instrument()
def _open_stack_file(journal: Journal, rank: int, attempt: int, after_s: float):
    out = open(os.path.join(journal.folder, f"stacks-rank{rank}-a{attempt}.txt"), "w")
    faulthandler.dump_traceback_later(after_s, exit=False, file=out)
    return out


def describe_reported(train, listed) -> list[dict]:
    """get_all_reported_checkpoints() as journal data (folder name, metrics, status)."""
    return [{"name": posixpath.basename(r.checkpoint.path.rstrip("/")), "metrics": r.metrics,
             "status": getattr(r.status, "name", repr(r.status)),
             "types_ok": isinstance(r, train.ReportedCheckpoint)
             and isinstance(r.status, train.ReportedCheckpointStatus)} for r in listed]


def _list_reported(s: Script, train, journal: Journal, rank: int, attempt: int, step) -> None:
    if s.list_reported:
        listed = describe_reported(train, train.get_all_reported_checkpoints())
        journal.record(ev="listed", rank=rank, attempt=attempt, step=step, listed=listed)


def _report_step(s: Script, train, ctx, journal: Journal, rank: int, world: int,
                 attempt: int, step: int) -> None:
    checkpoint, options = None, {}
    if rank in s.in_place.get(step, ()):
        folder = posixpath.join(ctx.get_storage().experiment_fs_path, f"inplace-{step:04d}")
        checkpoint = write_checkpoint(train, folder, step, rank, attempt)
        options["checkpoint_upload_mode"] = train.CheckpointUploadMode.NO_UPLOAD
    elif rank in s.checkpointing_ranks(step, world):
        folder = os.path.join(s.journal_dir, "local", f"a{attempt}-r{rank}-s{step}")
        checkpoint = write_checkpoint(train, folder, step, rank, attempt, s.nested)
        if rank == 0 and step in s.trees:
            write_tree(folder, s.trees[step], f"{folder}-targets")
    metrics = {"step": step, "rank": rank, "attempt": attempt, **s.metrics.get(step, {})}
    if step in s.delete_local and checkpoint is not None:
        options["delete_local_checkpoint_after_upload"] = True
    if step in s.validate and checkpoint is not None:
        options["validation"] = True
    if s.late_rank == rank:
        time.sleep(LATE_S)
    dir_name = s.dir_names.get(step, f"ckpt-{step:04d}") if rank == 0 else f"r{rank}-x"
    journal.record(ev="report", rank=rank, attempt=attempt, step=step,
                   checkpoint=checkpoint is not None, world_size=world, dir_name=dir_name)
    train.report(metrics, checkpoint=checkpoint, checkpoint_dir_name=dir_name, **options)
    after = train.get_checkpoint()
    journal.record(ev="reported", rank=rank, attempt=attempt, step=step,
                   peers_arrived=_arrived(journal, attempt, step, world),
                   checkpoint_path=None if after is None else after.path,
                   same_object=checkpoint is not None and after is checkpoint,
                   **({"checkpoint_files": _files(after)} if s.list_reported else {}))
    _list_reported(s, train, journal, rank, attempt, step)


def _files(checkpoint) -> list | None:
    """The names in a local checkpoint's folder (None: no checkpoint, no such folder, or
    not on the local file system)."""
    if checkpoint is None or not os.path.isdir(checkpoint.path):
        return None
    return sorted(os.listdir(checkpoint.path))


def begin(config: dict):
    """What every probe worker starts with: (script, the implementation's train module, its
    context, world rank, world size, journal, this rank's attempt number)."""
    s: Script = config["script"]
    train = importlib.import_module(s.train_module)
    ctx = train.get_context()
    rank = ctx.get_world_rank()
    journal = Journal(s.journal_dir)
    return s, train, ctx, rank, ctx.get_world_size(), journal, journal.next_attempt(rank)


def run_script(config: dict) -> dict:
    s, train, ctx, rank, world, journal, attempt = begin(config)
    stack_file = _open_stack_file(journal, rank, attempt, s.stack_dump_after_s)
    try:
        restored = read_state(train, train.get_checkpoint())
        record_start(s, ctx, journal, attempt, restored)
        _list_reported(s, train, journal, rank, attempt, None)
        if s.collectives:
            collective = importlib.import_module(s.train_module + ".collective")
            got = collective.broadcast_from_rank_zero({"from_rank": rank})
            waited = collective.barrier()
            journal.record(ev="collective", rank=rank, attempt=attempt, broadcast=got,
                           barrier=repr(waited))
        first = 0 if restored is None or restored["step"] is None else restored["step"] + 1
        steps_at_this_size = 0
        for index, step in enumerate(range(first, s.steps)):
            if s.step_sleep_s:
                time.sleep(s.step_sleep_s)
            if index == 0:
                # A first report that fails (or a fault) could otherwise end the attempt
                # before a peer started, and the journal would miss a rank of it.
                _await_starts(journal, attempt, world)
            fire_due_faults(s, journal, rank, world, attempt, index, step)
            _report_step(s, train, ctx, journal, rank, world, attempt, step)
            steps_at_this_size += 1
            if s.stop_at_world_size is not None and world >= s.stop_at_world_size \
                    and steps_at_this_size >= 2:
                break
        journal.record(ev="end", rank=rank, attempt=attempt)
        return {"rank": rank, "attempt": attempt, "world_size": world}
    finally:
        if stack_file is not None:
            faulthandler.cancel_dump_traceback_later()
            stack_file.close()


@_instrument()
def _await_ranks(journal: Journal, ev: str, attempt: int, world: int, step: int | None = None,
                 timeout_s: float = 30.0) -> None:
    """Until every rank of the attempt wrote an `ev` event (of `step`, when given), or
    `timeout_s` passed: a rank that never does is the check's to judge."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        ranks = {e["rank"] for e in journal.events_so_far(ev)
                 if e["attempt"] == attempt and (step is None or e["step"] == step)}
        if len(ranks) >= world:
            return
        time.sleep(0.01)


def _await_starts(journal: Journal, attempt: int, world: int) -> None:
    _await_ranks(journal, "start", attempt, world)


@_instrument()
def _arrived(journal: Journal, attempt: int, step: int, world: int) -> list:
    """Ranks whose report event for (attempt, step) is in the journal."""
    return sorted({e["rank"] for e in journal.events_so_far("report")
                   if e["attempt"] == attempt and e["step"] == step})


def _of_kind(rows: list[dict], ev: str | None) -> list[dict]:
    return [r for r in rows if ev is None or r.get("ev") == ev]


def worker_environment(config: dict) -> dict:
    """A training function that returns (on rank 0: Result.return_value) the variables
    `config["names"]` of its worker's environment."""
    return {name: os.environ.get(name) for name in config["names"]}


# ------------------------------------------------------------------ a recording callback
_RECORDING_CLASSES: dict[str, type] = {}


def recording_callback(train_module: str, path: str):
    """A `<train_module>.UserCallback` that appends one JSON line to `path` per hook call:
    after_report (every rank's step and rank, the checkpoint's folder name or None, the
    run's name from run_context) and after_exception (the failed ranks, their exception
    types). It pickles as this call, so it reaches a controller in another process."""
    cls = _RECORDING_CLASSES.get(train_module)
    if cls is None:
        base = importlib.import_module(train_module).UserCallback

        def write(self, **entry):
            with open(self._path, "a") as f:
                f.write(json.dumps(entry) + "\n")

        def run_name(run_context):
            config = getattr(run_context, "get_run_config", lambda: None)()
            return getattr(config, "name", None)

        def after_report(self, run_context, metrics, checkpoint):
            self._write(hook="after_report", run=run_name(run_context),
                        reports=[[m.get("rank"), m.get("step")] for m in metrics],
                        checkpoint=None if checkpoint is None
                        else os.path.basename(checkpoint.path.rstrip("/")))

        def after_exception(self, run_context, worker_exceptions):
            self._write(hook="after_exception", run=run_name(run_context),
                        ranks=sorted(worker_exceptions),
                        types=[type(worker_exceptions[r]).__name__
                               for r in sorted(worker_exceptions)])

        def init(self, path):
            self._path = path

        cls = type("RecordingCallback", (base,), dict(
            __init__=init, _write=write, after_report=after_report,
            after_exception=after_exception,
            __reduce__=lambda self: (recording_callback, (train_module, self._path))))
        _RECORDING_CLASSES[train_module] = cls
    return cls(path)


def recorded_calls(path: str) -> list[dict]:
    """What a recording_callback wrote, in call order."""
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def _one_file_checkpoint(train, folder: str, name: str = "shard-0.json"):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, name), "w") as f:
        json.dump({"step": 0}, f)
    return train.Checkpoint.from_directory(folder)


def no_upload_probe(config: dict) -> dict:
    """A one-worker training function: report with NO_UPLOAD a folder outside the run
    folder; returns {"outside": the type name of what that report raised (None: none)}."""
    train = importlib.import_module(config["train"])
    outside = _one_file_checkpoint(train, tempfile.mkdtemp(prefix="trainspec-outside-"))
    try:
        train.report({"step": 0}, checkpoint=outside,
                     checkpoint_upload_mode=train.CheckpointUploadMode.NO_UPLOAD)
    except Exception as exc:  # noqa: BLE001 - what was raised is the observation
        return {"outside": type(exc).__name__}
    return {"outside": None}


def slow_validation(checkpoint, seconds: float) -> dict:
    """A ValidationConfig function that takes `seconds`."""
    time.sleep(seconds)
    return {"val": 1.0}


def validation_wait_probe(config: dict) -> dict:
    """A one-worker training function: report a checkpoint with validation=True (the
    validation takes longer than the waits below), then call get_all_reported_checkpoints
    with COMMITTED, with timeout_s=config["timeout_s"], and with the defaults; returns
    {label: [seconds the call took, [status names listed]]}."""
    train = importlib.import_module(config["train"])
    checkpoint = _one_file_checkpoint(train, tempfile.mkdtemp(prefix="trainspec-val-"))
    train.report({"step": 0}, checkpoint=checkpoint, validation=True)
    out = {}
    for label, kwargs in (
            ("committed", {"consistency_mode": train.CheckpointConsistencyMode.COMMITTED}),
            ("timeout", {"timeout_s": config["timeout_s"]}),
            ("validated", {})):
        start = time.monotonic()
        listed = train.get_all_reported_checkpoints(**kwargs)
        out[label] = [time.monotonic() - start, [r.status.name for r in listed]]
    return out
