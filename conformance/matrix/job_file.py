"""The user's own training code as a matrix job: `--job path/to/script.py`.

The contract of a job file (docs/fault_matrix.md has it with a worked example):

- `train_func(config)`: the training function, as it would be passed to a trainer as
  `train_loop_per_worker`. It calls `train.report(metrics, checkpoint=...)` of the
  implementation under test, and every report's `metrics["step"]` is the 0-based index of
  that report in the whole run, so a run resumed from the checkpoint of step k reports
  k + 1 next. It resumes from `train.get_checkpoint()` when that is not None.
- `config` is the file's `CONFIG` (a dict, optional) with two keys set by the matrix:
  `steps`, run steps `0 .. config["steps"] - 1` and return; `impl`, the import root of the
  implementation ("reference", "ray"), for a job that runs on several
  (`importlib.import_module(config["impl"] + ".train")`, as docs/examples do). (A function that goes on is ended at its next
  report, as is one whose elastic cell has seen enough steps at the final world size.)
- `TRAINER` (optional): the trainer class as a name inside the implementation's train
  module, "DataParallelTrainer" (the default) or "torch.TorchTrainer"; one the
  implementation lacks makes the job's cells unsupported.
- Importing the file must be cheap and free of side effects; its folder is put on
  `sys.path`, so it may import modules beside it.

Design note. The matrix's faults and expectations need the same journal the probe writes
(start / report / reported / fault / end events), and worker faults must strike just before
a report, without the user's code knowing. So the function that actually runs on each
worker is `run_job_file`: it journals the start (with the step of the checkpoint it
restores), replaces `report` in the implementation's train module by a `_Reporter` (which
paces the steps, fires the cell's worker faults, marks each reported checkpoint with its
step and journals the report), and only then loads the user's file from its path, so that
`from <root>.train import report` at the top of the file binds the reporter too. The file
is loaded again in every worker process from its absolute path rather than pickled: the
matrix runs its clusters on one machine (the probe's journal folder makes the same
assumption), and a fresh load keeps the user's module-level state per worker as it would
be under the real launcher.

The marker. The reporter writes `MARKER` ({"step", "attempt"}) into every checkpoint folder
the job reports, before the report uploads it: it is how a restarted attempt (and the
failed-upload expectation) tells which step a checkpoint holds without knowing the user's
format. Every rank of a round writes the same content, so merging rank folders is harmless.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import importlib.util
import inspect
import json
import os
import sys
import time
from typing import Any

from conformance.journal_checks import Verdict, attempts
from conformance.probe import Journal, Script, begin, fire_due_faults, record_start

MARKER = ".trainspec-matrix.json"
DEFAULT_TRAINER = "DataParallelTrainer"


class JobFileError(ValueError):
    """Raised when a job file breaks the contract (named by its path, with the fix)."""


@dataclasses.dataclass(frozen=True)
class JobFile:
    """A job file, checked on the driver: where it is and what it asks for."""

    path: str
    trainer: str = DEFAULT_TRAINER
    config: dict = dataclasses.field(default_factory=dict)

    @property
    def name(self) -> str:
        return os.path.basename(self.path)

    def config_for(self, script: Script) -> dict:
        impl = script.train_module.rpartition(".")[0] or script.train_module
        return {**self.config, "steps": script.steps, "impl": impl}


def load_module(path: str):
    """Execute the file at `path` as a fresh module (a name of its own per path)."""
    folder = os.path.dirname(path)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    digest = hashlib.sha1(path.encode()).hexdigest()[:10]
    name = f"trainspec_job_{os.path.splitext(os.path.basename(path))[0]}_{digest}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise JobFileError(f"--job={path!r}: not a Python file; pass a .py file that defines "
                           "train_func(config)")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def load_job(path: str) -> JobFile:
    """The job file at `path`, imported once here to check the contract."""
    full = os.path.abspath(path)
    if not os.path.isfile(full):
        raise JobFileError(f"--job={path!r}: no such file; pass the path of a Python file "
                           "that defines train_func(config)")
    try:
        module = load_module(full)
    except JobFileError:
        raise
    except Exception as exc:  # noqa: BLE001 - the user's import error, named
        raise JobFileError(f"--job={path!r}: importing it raised {type(exc).__name__}: "
                           f"{exc}") from exc
    fn = getattr(module, "train_func", None)
    if not callable(fn):
        raise JobFileError(f"--job={path!r}: defines no train_func; define "
                           "`def train_func(config): ...` (the training function)")
    try:
        inspect.signature(fn).bind({})
    except (TypeError, ValueError):
        raise JobFileError(f"--job={path!r}: train_func{inspect.signature(fn)} cannot be "
                           "called with one argument; define `def train_func(config)`") from None
    trainer = getattr(module, "TRAINER", DEFAULT_TRAINER)
    if not isinstance(trainer, str) or not trainer or trainer.startswith("."):
        raise JobFileError(f"--job={path!r}: TRAINER={trainer!r}; expected the trainer's name "
                           "inside the train module, e.g. 'DataParallelTrainer' or "
                           "'torch.TorchTrainer'")
    config = getattr(module, "CONFIG", {})
    if not isinstance(config, dict):
        raise JobFileError(f"--job={path!r}: CONFIG={config!r}; expected a dict (the "
                           "train_loop_config the matrix extends with 'steps')")
    return JobFile(full, trainer, dict(config))


def trainer_class(impl, job: JobFile):
    """The implementation's class named by `job.trainer`; raises LookupError naming it."""
    if job.trainer == DEFAULT_TRAINER:
        return impl.DataParallelTrainer
    module_part, _, attr = job.trainer.rpartition(".")
    module_name = f"{impl.train.__name__}.{module_part}" if module_part else impl.train.__name__
    try:
        return getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise LookupError(f"{job.name}: TRAINER={job.trainer!r}: {module_name}.{attr} is not "
                          f"available ({type(exc).__name__}: {exc})") from exc


@dataclasses.dataclass(frozen=True)
class JobTrainer:
    """Stands in for the trainer class in `conformance.scenarios.run`: the real trainer
    with `run_job_file` as the training function and the job beside the probe's script."""

    trainer: Any
    job: JobFile

    def __call__(self, **kwargs):
        kwargs["train_loop_per_worker"] = run_job_file
        kwargs["train_loop_config"] = {**kwargs["train_loop_config"], "job": self.job}
        return self.trainer(**kwargs)


def read_marker(folder: str) -> dict | None:
    try:
        with open(os.path.join(folder, MARKER)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def _restored(journal: Journal, checkpoint) -> dict | None:
    """{'step', 'path'} of the checkpoint a worker starts from (step None: unmarked)."""
    if checkpoint is None:
        return None
    try:
        with checkpoint.as_directory() as d:
            marker = read_marker(d)
    except Exception as exc:  # noqa: BLE001 - the suite's failure, not the run's
        journal.note_error("read the restored checkpoint's marker", exc)
        marker = None
    return {"step": None if marker is None else marker["step"], "path": checkpoint.path}


class _Stop(BaseException):
    """Ends the user's function after the run's last step (a BaseException, so a broad
    `except Exception` in the user's loop does not swallow it)."""


class _Reporter:
    """`train.report` as the job sees it: the probe's pacing, faults and journal events
    around the implementation's own report."""

    def __init__(self, real, train, s: Script, journal: Journal, rank: int, world: int,
                 attempt: int):
        self.real, self.train, self.s, self.journal = real, train, s, journal
        self.rank, self.world, self.attempt = rank, world, attempt
        self.index = 0

    def __call__(self, metrics, *args, **kwargs):
        s = self.s
        if self.index == 0:
            # A first report that fails (or a fault) could otherwise end the attempt before
            # a peer started, and the journal would miss a rank of it.
            self._await_peers()
        step = metrics.get("step") if isinstance(metrics, dict) else None
        if isinstance(step, bool) or not isinstance(step, int):
            raise TypeError(f"train.report(metrics={metrics!r}): a matrix job reports "
                            "metrics['step'], the report's 0-based index in the whole run; "
                            "add it (a resumed run continues at the restored step + 1)")
        if step >= s.steps or (s.stop_at_world_size is not None and self.index >= 2
                               and self.world >= s.stop_at_world_size):
            raise _Stop
        checkpoint = kwargs.get("checkpoint", args[0] if args else None)
        if s.step_sleep_s:
            time.sleep(s.step_sleep_s)
        fire_due_faults(s, self.journal, self.rank, self.world, self.attempt, self.index, step)
        if checkpoint is not None and os.path.isdir(str(checkpoint.path)):
            with open(os.path.join(checkpoint.path, MARKER), "w") as f:
                json.dump({"step": step, "attempt": self.attempt}, f)
        self.journal.record(ev="report", rank=self.rank, attempt=self.attempt, step=step,
                            checkpoint=checkpoint is not None, world_size=self.world)
        self.real(metrics, *args, **kwargs)
        after = self.train.get_checkpoint()
        self.journal.record(ev="reported", rank=self.rank, attempt=self.attempt, step=step,
                            checkpoint_path=None if after is None else after.path)
        self.index += 1

    def _await_peers(self, timeout_s: float = 30.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            started = {e["rank"] for e in self.journal.events_so_far("start")
                       if e["attempt"] == self.attempt}
            if len(started) >= self.world:
                return
            time.sleep(0.01)


def run_job_file(config: dict) -> Any:
    """The training function every worker runs for a job file (see the design note)."""
    job: JobFile = config["job"]
    s, train, ctx, rank, world, journal, attempt = begin(config)
    record_start(s, ctx, journal, attempt, _restored(journal, train.get_checkpoint()))
    real = train.report
    train.report = _Reporter(real, train, s, journal, rank, world, attempt)
    try:
        module = load_module(job.path)
        try:
            value = module.train_func(job.config_for(s))
        except _Stop:
            value = None
    finally:
        train.report = real
    journal.record(ev="end", rank=rank, attempt=attempt)
    return value


def resumed_where_restored(events: list[dict]) -> Verdict:
    """In every restarted attempt, each rank's first report is the step after the one its
    checkpoint held (step 0 when it restored nothing)."""
    name = "resumed_where_restored"
    groups = attempts(events)
    if len(groups) < 2:
        return Verdict(name, "unknown", "no restart happened")
    for a, starts in groups.items():
        if a == 0:
            continue
        for start in sorted(starts, key=lambda e: e["rank"]):
            restored = (start["restored"] or {}).get("step")
            first = next((e["step"] for e in events if e["ev"] == "report"
                          and e["attempt"] == a and e["rank"] == start["rank"]), None)
            want = 0 if restored is None else restored + 1
            if first is not None and first != want:
                held = "no checkpoint" if restored is None else f"the checkpoint of step {restored}"
                return Verdict(name, "invalid", (
                    f"attempt {a} rank {start['rank']} started from {held} and first reported "
                    f"step {first}, expected {want}: the job did not resume from "
                    "train.get_checkpoint()"))
    return Verdict(name, "valid")
