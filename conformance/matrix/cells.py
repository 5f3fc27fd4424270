"""Jobs, and running one cell of the matrix (implementation x fault kind x job).

A cell is driven only through the conformance machinery: the adapter's `cluster()`,
`scenarios.run(..., background=True)` for the fit, the probe's journal, and the history
checkers. `run_cell` never raises for a verdict: what the cell raised becomes a
`CellResult` (see `table.verdict_of`), and after a failed or hung cell the adapter
is reset, so the next cell starts clean.

Jobs say which training function runs and what follows the faulted fit: `noop` runs the
probe's `run_script` under DataParallelTrainer; `resume` then fits again with the same
(storage_path, name); `torch-ddp` runs `torch_job.train_ddp` under the implementation's
TorchTrainer, handed to `scenarios.run` through a view of the adapter whose
`DataParallelTrainer` is that TorchTrainer. A job file (`--job path.py`, see `job_file`)
is the user's `train_func` run the same way, through `job_file.run_job_file`.

After the fault's own expectations, every cell whose group restarted also checks
that each rank of a restarted attempt went on from the step its checkpoint held
(`job_file.resumed_where_restored`): the probe's jobs always do, a user's job that ignores
`get_checkpoint()` fails there.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import shutil
import time
from typing import Any, Callable

from conformance import assertions, journal_checks
from conformance.adapters.base import Outcome, Unsupported, require
from conformance.matrix.faults import FaultKind
from conformance.matrix.job_file import JobFile, JobTrainer, resumed_where_restored, trainer_class
from conformance.matrix.table import CellResult, verdict_of
from conformance.matrix.torch_job import DDPTrainer
from conformance.scenarios import Run, keep, new_script, run, verify_history, workspace


@dataclasses.dataclass
class Cell:
    """One cell while it runs; fault actions and expectations read and write it."""

    impl: Any
    fault: FaultKind
    job: Job
    folder: str
    deadline_s: float
    handle: Any = None
    run: Run | None = None
    setting: str = ""
    #: what the driver-side action did (the node it killed, when it resumed one, ...)
    facts: dict = dataclasses.field(default_factory=dict)
    #: the outcome of the cell's latest fit (names the fit's exception in a fail reason)
    last_outcome: Outcome | None = None


@dataclasses.dataclass(frozen=True)
class Job:
    name: str
    doc: str
    #: the adapter as `scenarios.run` should see it (raises Unsupported when it cannot be)
    view: Callable[[Any], Any]
    #: run after the first fit met its fault's expectations
    after: Callable[[Cell], None] | None = None
    #: the user's job file this job runs (None: a built-in job)
    job_file: JobFile | None = None


class TrainerView:
    """The adapter with another trainer class in place of its DataParallelTrainer."""

    def __init__(self, impl, trainer, label: str, history_checks: tuple | None = None):
        self._impl, self.DataParallelTrainer, self.label = impl, trainer, label
        if history_checks is not None:
            self.history_checks = history_checks

    def __getattr__(self, name):
        return getattr(self._impl, name)


def _same(impl):
    return impl


def _torch_view(impl):
    module_name = f"{impl.train.__name__}.torch"
    try:
        torch_trainer = importlib.import_module(module_name).TorchTrainer
    except (ImportError, AttributeError) as exc:
        raise Unsupported(f"{type(exc).__name__}: {exc}") from exc
    return TrainerView(impl, DDPTrainer(torch_trainer), f"{module_name}.TorchTrainer")


def _job_file_view(job: JobFile):
    def view(impl):
        try:
            trainer = trainer_class(impl, job)
        except LookupError as exc:
            raise Unsupported(str(exc)) from exc
        # checkpoints_whole reads the probe's shard files; a user's checkpoint has its own
        checks = tuple(c for c in impl.history_checks if c != "checkpoints_whole")
        label = f"{trainer.__module__}.{trainer.__qualname__}({job.name})"
        return TrainerView(impl, JobTrainer(trainer, job), label, history_checks=checks)
    return view


def job_of_file(job: JobFile, name: str | None = None) -> Job:
    """A matrix job that runs the user's job file (named by its file name by default)."""
    return Job(name or job.name, f"{job.path}: train_func under {job.trainer}",
               _job_file_view(job), job_file=job)


def _fit(cell: Cell, view, script, *, note: str, action: Callable[[Cell], None] | None = None,
         **run_kwargs) -> Run:
    """One fit in the background, `action` on this thread meanwhile; a hang raises
    HangVerdict, an action's error is raised once the fit is over. `note` ends the fit's
    setting (the text every assertion message carries)."""
    fit, r = run(view, script, folder=cell.folder, deadline_s=cell.deadline_s,
                 background=True, **run_kwargs)
    if isinstance(view, TrainerView):
        r.setting = r.setting.replace("DataParallelTrainer", view.label, 1)
    r.setting = cell.setting = f"{r.setting}; {note}"
    cell.run = cell.run or r
    action_error = None
    if action is not None:
        try:
            action(cell)
        except Exception as exc:  # noqa: BLE001 - raised below, after the fit is over
            action_error = exc
    r.outcome = cell.last_outcome = fit.wait()
    if r.outcome.hang:
        r.outcome.stacks = (r.outcome.stacks + "\n" + r.journal.stacks()).strip()
        assertions.succeeded(r.outcome, r.setting)
    if action_error is not None:
        raise action_error
    verify_history(view, r)
    return r


def _describe(fault: FaultKind) -> str:
    nodes = "default cluster" if fault.nodes is None else \
        f"nodes={[n.cpus for n in fault.nodes]} CPUs"
    return f"fault {fault.name}: {fault.doc}; {nodes}, max_failures={fault.max_failures}"


def _first_run(cell: Cell, view) -> None:
    f = cell.fault
    script = new_script(view, cell.folder, journal="first", steps=f.steps,
                        faults=f.probe_faults, step_sleep_s=f.step_sleep_s,
                        stop_at_world_size=f.stop_at_world_size)
    _fit(cell, view, script, note=_describe(f), action=f.action, num_workers=f.num_workers,
         failure_config=cell.impl.train.FailureConfig(max_failures=f.max_failures),
         elastic_interval_s=f.elastic_interval_s)


def _resume_by_name(cell: Cell) -> None:
    first = cell.run
    events = first.events()
    last = max(journal_checks.attempts(events))
    latest = max(e["step"] for e in events if e["ev"] == "reported" and e["attempt"] == last)
    script = new_script(cell.impl, cell.folder, journal="second", steps=latest + 3)
    r = _fit(cell, cell.impl, script, num_workers=2, name=first.name, storage=first.storage,
             note=f"second fit() of name={first.name!r} after {cell.fault.name}")
    setting = r.setting
    result = assertions.succeeded(r.outcome, setting)
    rank0 = [s for s in r.events("start") if s["rank"] == 0 and s["attempt"] == 0]
    assertions.equal(len(rank0), 1, "start events of rank 0 in the second fit's attempt 0",
                     setting)
    assertions.equal((rank0[0]["restored"] or {}).get("step"), latest,
                     "step of get_checkpoint() on rank 0 at the start of the second fit()",
                     setting)
    assertions.equal((result.metrics or {}).get("step"), latest + 2,
                     "result.metrics['step'] of the second fit()", setting)


JOBS: dict[str, Job] = {j.name: j for j in [
    Job("noop", "the probe's run_script under DataParallelTrainer, a checkpoint every step",
        _same),
    Job("resume", "noop, then a second fit() with the same (storage_path, name)", _same,
        after=_resume_by_name),
    Job("torch-ddp", "torch.nn.Linear in DistributedDataParallel (gloo) under TorchTrainer, "
                     "a checkpoint every step", _torch_view),
]}


def _cluster(impl, fault: FaultKind):
    if fault.nodes is None:
        impl.ensure_session()  # the default session, as a check without a cluster finds it
        return contextlib.nullcontext(None)
    return impl.cluster(list(fault.nodes))


def _needs(impl, fault: FaultKind) -> None:
    for capability in fault.needs:
        require(impl, capability, fault.needs_hint.get(capability))


def _play(cell: Cell) -> None:
    fault = cell.fault
    if fault.unsupported:
        raise Unsupported(fault.unsupported)
    view = cell.job.view(cell.impl)
    _needs(cell.impl, fault)
    with _cluster(cell.impl, fault) as handle:
        cell.handle = handle
        _first_run(cell, view)
        fault.expect(cell)
        resumed = resumed_where_restored(cell.run.events())
        if resumed.status == "invalid":
            assertions.verdict(resumed, cell.setting)
        if cell.job.after is not None:
            cell.job.after(cell)


def run_cell(impl, fault: FaultKind, job: Job) -> CellResult:
    """Run one cell to its verdict; reset the adapter after a failed or hung cell."""
    start = time.monotonic()
    cell = Cell(impl, fault, job, folder=workspace("trainspec-matrix-"),
                deadline_s=impl.fit_deadline_s * fault.deadline_scale)
    try:
        _play(cell)
        raised = None
    except Exception as exc:  # noqa: BLE001 - every error is a verdict
        raised = exc
    fit_error = cell.last_outcome.error if cell.last_outcome is not None else None
    verdict, reason, detail = verdict_of(raised, cell.setting, fit_error)
    if verdict in ("fail", "hang"):
        detail = f"{detail}\n(workspace kept: {keep(cell.folder)})"
        with contextlib.suppress(Exception):
            impl.reset()
    else:
        shutil.rmtree(cell.folder, ignore_errors=True)
    return CellResult(impl.name, fault.name, job.name, verdict,
                      round(time.monotonic() - start, 2), reason, detail)
