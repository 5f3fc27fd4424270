"""Runs shared by several checks: one fit(), many assertions.

A fit on Ray takes seconds, so checks that only read different facts of the same run
(the Result, the journal, the files on disk) share it. `shared(impl, key, build)` runs the
scenario once per session and implementation and caches the outcome.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
import time
import uuid
from typing import Any, Callable

from conformance.adapters.base import Outcome
from conformance.probe import Journal, Script, run_script

_CACHE: dict = {}


@dataclasses.dataclass
class Run:
    outcome: Outcome
    journal: Journal
    storage: str
    name: str
    setting: str

    @property
    def run_dir(self) -> str:
        return os.path.join(self.storage, self.name)

    def events(self, ev: str | None = None) -> list[dict]:
        return self.journal.events(ev)


@dataclasses.dataclass
class TrainerFactory:
    """Builds the trainer where the implementation's driver runs (picklable)."""

    cls: Any
    kwargs: dict
    journal_dir: str | None = None

    def __call__(self):
        if self.journal_dir:  # which process calls fit() (local mode runs there)
            Journal(self.journal_dir).record(ev="fit", pid=os.getpid())
        return self.cls(**self.kwargs)


@dataclasses.dataclass
class WithDriverEnviron:
    """A trainer factory whose trainer's fit() runs with `environ` added to the environment
    of the process that calls it (the driver), then restored."""

    make: Any
    environ: dict

    @property
    def journal_dir(self):
        return getattr(self.make, "journal_dir", None)

    def __call__(self):
        return _EnvironTrainer(self.make(), self.environ)


class _EnvironTrainer:
    def __init__(self, trainer, environ: dict):
        self.trainer, self.environ = trainer, environ

    def fit(self):
        saved = {k: os.environ.get(k) for k in self.environ}
        os.environ.update(self.environ)
        try:
            return self.trainer.fit()
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v


def workspace(prefix: str = "trainspec-") -> str:
    return tempfile.mkdtemp(prefix=prefix)


def new_script(impl, folder: str, journal: str = "journal", **kwargs) -> Script:
    journal = os.path.join(folder, journal)
    os.makedirs(journal, exist_ok=True)
    return Script(journal_dir=journal, train_module=impl.train.__name__,
                  node_id=impl.node_id_function(), **kwargs)


def run(impl, script: Script, *, num_workers, folder: str, name: str | None = None,
        storage: str | None = None, checkpoint_config=None, failure_config=None, elastic_interval_s: float | None = None,
        deadline_s: float | None = None, background: bool = False, validation_config=None,
        storage_filesystem=None, callbacks=None):
    """Run `run_script` under the implementation's DataParallelTrainer (`storage` is then a
    path on `storage_filesystem` when one is given)."""
    t = impl.train
    name = name or f"run-{uuid.uuid4().hex[:8]}"
    storage = storage or os.path.join(folder, "storage")
    scaling = dict(num_workers=num_workers)
    if elastic_interval_s is not None:
        scaling["elastic_resize_monitor_interval_s"] = elastic_interval_s
    run_config = t.RunConfig(
        name=name, storage_path=storage,
        checkpoint_config=checkpoint_config or t.CheckpointConfig(),
        failure_config=failure_config or t.FailureConfig(),
        **({} if storage_filesystem is None else {"storage_filesystem": storage_filesystem}),
        **({} if callbacks is None else {"callbacks": callbacks}),
    )
    factory = TrainerFactory(impl.DataParallelTrainer, dict(
        train_loop_per_worker=run_script, train_loop_config={"script": script},
        scaling_config=t.ScalingConfig(**scaling), run_config=run_config,
        **({} if validation_config is None else {"validation_config": validation_config}),
    ), journal_dir=script.journal_dir)
    setting = (f"{impl.name}: DataParallelTrainer(num_workers={num_workers!r}), "
               f"faults={[str(f) for f in script.faults]}, "
               f"checkpoint_config={checkpoint_config}, failure_config={failure_config}")
    journal = Journal(script.journal_dir)
    if background:
        handle = impl.start_fit(factory, deadline_s or impl.fit_deadline_s)
        return handle, Run(None, journal, storage, name, setting)
    outcome = impl.fit(factory, deadline_s)
    if outcome.hang:
        outcome.stacks = (outcome.stacks + "\n" + journal.stacks()).strip()
    result = Run(outcome, journal, storage, name, setting)
    verify_history(impl, result)
    return result


def verify_history(impl, run: Run) -> None:
    """The adapter's always-on journal checkers; an invalid verdict fails the check."""
    from conformance import journal_checks

    events = run.events()
    for check in impl.history_checks:
        verdict = journal_checks.ALWAYS[check](events, run.run_dir)
        if verdict.status == "invalid":
            raise AssertionError(f"journal check {verdict.name}: {verdict.reason} "
                                 f"[{run.setting}]")


def wait_for(predicate: Callable[[], Any], timeout_s: float, interval_s: float = 0.1):
    """Poll predicate until it returns something truthy or the deadline passes."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(interval_s)


def shared(impl, key: str, build: Callable[[Any], Run]) -> Run:
    cache_key = (impl.name, key)
    if cache_key not in _CACHE:
        _CACHE[cache_key] = build(impl)
    return _CACHE[cache_key]


# ---------------------------------------------------------------------- shared runs
BASIC_STEPS = 4


def basic_run(impl) -> Run:
    """Two workers, four reports: rank 1 alone checkpoints at step 0, nobody at steps 1 and
    3, both ranks at step 2; rank 1 arrives late at every report (barrier check)."""

    def build(impl):
        folder = workspace()
        script = new_script(impl, folder, steps=BASIC_STEPS, checkpoints={0: (1,), 2: (0, 1)},
                            late_rank=1)
        return run(impl, script, num_workers=2, folder=folder)

    return shared(impl, "basic", build)


def no_checkpoint_run(impl) -> Run:
    """One worker that reports metrics only."""

    def build(impl):
        folder = workspace()
        script = new_script(impl, folder, steps=2, checkpoints={})
        return run(impl, script, num_workers=1, folder=folder)

    return shared(impl, "no-checkpoint", build)


def collectives_seen(impl, num_workers):
    """A run whose ranks journal what broadcast_from_rank_zero({'from_rank': rank}) and
    barrier() return: (the run, rank -> (broadcast's value, repr of barrier's))."""
    folder = workspace()
    script = new_script(impl, folder, steps=1, collectives=True)
    r = run(impl, script, num_workers=num_workers, folder=folder)
    return r, {e["rank"]: (e["broadcast"], e["barrier"]) for e in r.events("collective")}
