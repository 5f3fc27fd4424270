"""Runs shared by several checks: one fit(), many assertions.

A fit on Ray takes seconds, so checks that only read different facts of the same run
(the Result, the journal, the files on disk) share it. `shared(impl, key, build)` runs the
scenario once per session and implementation and caches the outcome.

Workspaces. `workspace()` makes a check's folder inside one folder per process,
`<temp dir>/trainspec-workspaces-<pid>-XXXX` (0700), removed when that process exits: a
shared run's files stay readable for as long as the session runs, and no check leaves
anything behind. The process holds an flock on the folder's `.lock` while it lives, so a
later process removes the folders of processes that were killed before they could. A
workspace passed to `keep(folder)` (a failed matrix cell's, for a post-mortem) is left in
place, listed in `.kept`; `TRAINSPEC_KEEP_WORKSPACES=1` keeps them all.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import fcntl
import glob
import os
import shutil
import stat
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


_ROOT_PREFIX = "trainspec-workspaces-"
KEEP_ENV = "TRAINSPEC_KEEP_WORKSPACES"
_root: tuple[int, str, int] | None = None  # (pid, folder, its .lock's descriptor)


def workspace(prefix: str = "trainspec-") -> str:
    """A new empty folder for one check's files, removed when this process exits (see the
    module note)."""
    return tempfile.mkdtemp(prefix=prefix, dir=_workspace_root())


def keep(folder: str) -> str:
    """Leave the workspace `folder` in place when this process exits; returns it."""
    root = os.path.dirname(os.path.abspath(folder))
    with open(os.path.join(root, ".kept"), "a") as f:
        f.write(os.path.basename(folder) + "\n")
    return folder


def _workspace_root() -> str:
    global _root
    if _root is None or _root[0] != os.getpid():  # a forked child makes its own
        remove_stale_workspaces()
        folder = tempfile.mkdtemp(prefix=f"{_ROOT_PREFIX}{os.getpid()}-")
        lock = os.path.join(folder, ".lock")
        fd = os.open(lock + ".new", os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.rename(lock + ".new", lock)  # visible to other processes only once locked
        _root = (os.getpid(), folder, fd)
        atexit.register(_remove_root, os.getpid(), folder)
    return _root[1]


def _remove_root(pid: int, folder: str) -> None:
    if os.getpid() == pid and os.environ.get(KEEP_ENV) != "1":  # not in a forked child
        _remove_unkept(folder)


def _remove_unkept(folder: str) -> None:
    try:
        with open(os.path.join(folder, ".kept")) as f:
            kept = set(f.read().split())
    except FileNotFoundError:
        kept = set()
    for name in os.listdir(folder):
        if name not in kept and name != ".kept":
            path = os.path.join(folder, name)
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
    if not kept:
        with contextlib.suppress(OSError):  # something a late child wrote meanwhile
            os.rmdir(folder)


def remove_stale_workspaces() -> list[str]:
    """Remove the workspace folders of this user's processes that have ended (their `.lock`
    is free), keeping what they `keep()`-ed; returns the folders handled."""
    handled = []
    for folder in glob.glob(os.path.join(tempfile.gettempdir(), f"{_ROOT_PREFIX}*")):
        try:
            st = os.lstat(folder)
            fd = os.open(os.path.join(folder, ".lock"), os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            continue  # not ours, kept (no lock file left), or removed meanwhile
        try:
            if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # its process is alive
            _remove_unkept(folder)
            handled.append(folder)
        except OSError:
            continue  # another process is removing it too
        finally:
            os.close(fd)
    return handled


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
