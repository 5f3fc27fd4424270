"""One deterministic simulated fit: the real controller, checkpoint manager and storage code
on pyarrow's in-memory file system, a simulated worker group and a virtual clock, with a
`Scheduler` deciding every choice (which rank acts next, whether and where a fault lands).

The ranks run a model of a training function: for each round k from the restored step on,
stage this rank's checkpoint file for round k (every round), report round k, wait for the
acknowledgement; after the last round, return. Rank 0 also stages a `step` file holding k,
which a restarted group reads from the checkpoint it is given, as a training function reads
`get_checkpoint()`. Checkpoints are named `checkpoint_<k>` by the ranks (the reports carry
the name), so no wall-clock time enters a history: same choices, same history.

Faults (each costs one of `Bounds.faults`): a rank's process dies (`crash`, at any point of
its program: before staging, between staging and reporting, while waiting for the ack);
its node is lost (`node`, every rank of that node at once, `Bounds.ranks_per_node` to a
node) or preempted (`preempt`: the same, each failure marked preempted, which the
controller charges to the preemption budget); the controller's commit of a round's staged
files fails (`upload`).
"""

from __future__ import annotations

import dataclasses
import signal
from typing import Any

import pyarrow._fs as pa_fs  # the in-memory file system pyarrow ships (_MockFileSystem)

from reference.train._internal.controller import states as S
from reference.train._internal.controller.controller import Controller
from reference.train._internal.controller.policies import FailurePolicy, ScalingPolicy
from reference.train._internal.controller.run import commit_staged, discard_staged
from reference.train._internal.storage import fs_utils
from reference.train._internal.storage.checkpoint_manager import CheckpointManager
from reference.train._internal.storage.storage_context import StorageContext
from reference.train._internal.worker_group.api import (
    Ack,
    Failed,
    Finished,
    GroupSpec,
    Report,
    WorkerGroup,
    WorkerGroupFactory,
)

ROOT = "/sim"
RUN = "run"
#: steps after which a fit that has not ended counts as a livelock
STEP_LIMIT = 10_000


@dataclasses.dataclass(frozen=True)
class Bounds:
    workers: int = 2
    reports: int = 2
    faults: int = 1
    max_failures: int = 1
    ranks_per_node: int = 2
    #: the kinds of fault the scheduler may choose
    kinds: tuple = ("crash", "node", "preempt", "upload")
    #: FailureConfig(max_preemption_failures): -1, unlimited, as Ray's default
    max_preemption_failures: int = -1
    #: offer one rank's progress at a time (explore.py, "Reduction"); False: every rank's
    reduce: bool = True
    #: CheckpointConfig(num_to_keep) with checkpoint_score_attribute="score" (see `score`);
    #: None: every checkpoint is kept, no score attribute
    keep: int | None = None


def score(index: int) -> int:
    """Round `index`'s reported score: distinct for the first 101 rounds and not monotonic
    (round 1 scores below round 0), so that retention by score keeps an older checkpoint
    over the latest one."""
    return (50 - 37 * index) % 101


def checkpoint_folders(fs) -> frozenset:
    """The paths of the `checkpoint_*` folders in the run folder."""
    import pyarrow.fs as pafs

    return frozenset(i.path for i in fs.get_file_info(
        pafs.FileSelector(f"{ROOT}/{RUN}", allow_not_found=True))
        if i.type == pafs.FileType.Directory and i.base_name.startswith("checkpoint_"))


class Pruned(BaseException):
    """Raised at a choice point whose state the explorer has seen: the rest of this run is
    covered by the run that saw it first (explore.py, "States"). A BaseException, so that no
    `except Exception` of the code under test swallows it."""


class SimulatorError(BaseException):
    """The simulator itself failed (not the code under test): ends the exploration."""


class ReplayError(SimulatorError):
    """A replayed choice is not one of the alternatives at its point (another bound's ID)."""


class Scheduler:
    """Replays `prefix` (one index per choice point), then takes alternative 0; keeps the
    trace of (index taken, labels of the alternatives) for the explorer and the replay.

    With `seen` (a set shared by the runs of one exploration), each choice point past the
    prefix that carries a state (`state`, see SimGroup.next_event) is looked up there: a
    state seen before ends the run (`Pruned`), a new one is added."""

    def __init__(self, prefix: tuple = (), seen: set | None = None, lenient: bool = False):
        self.prefix = tuple(prefix)
        #: a prefix choice beyond the alternatives takes the last one (for shrinking, where
        #: an earlier change alters what comes later) instead of raising ReplayError
        self.lenient = lenient
        self.trace: list[tuple[int, tuple]] = []
        self.seen = seen
        #: (choice index, state key) of each keyed choice point past the prefix
        self.keys: list[tuple[int, int]] = []

    def choose(self, options: list[str], state=None) -> int:
        at = len(self.trace)
        if self.seen is not None and state is not None and at >= len(self.prefix):
            try:
                key = hash((tuple(options), state()))
            except Exception as exc:  # the simulator's own bug: never the fit's outcome
                raise SimulatorError(f"choice {at}: the state could not be read") from exc
            self.keys.append((at, key))
            if key in self.seen:
                raise Pruned(at)
            self.seen.add(key)
        pick = self.prefix[at] if at < len(self.prefix) else 0
        if not 0 <= pick < len(options) and self.lenient:
            pick = len(options) - 1
        if not 0 <= pick < len(options):
            raise ReplayError(f"choice {at}: {pick} is not one of {len(options)} alternatives "
                             f"{options} (a replay of another bound?)")
        self.trace.append((pick, tuple(options)))
        return pick

    @property
    def choices(self) -> tuple:
        return tuple(p for p, _ in self.trace)


class RandomScheduler(Scheduler):
    """Beyond its prefix, a seeded random alternative at each choice point."""

    def __init__(self, seed: int, prefix: tuple = ()):
        import random

        super().__init__(prefix)
        self._random = random.Random(seed)

    def choose(self, options: list[str], state=None) -> int:
        if len(self.trace) < len(self.prefix):
            return super().choose(options)
        pick = self._random.randrange(len(options))
        self.trace.append((pick, tuple(options)))
        return pick


class VirtualClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@dataclasses.dataclass
class Rank:
    step: int
    phase: str = "run"  # run -> staged -> waiting -> run ... -> done; or dead


class World:
    """What the simulated fit did, for the invariants: every event in order, the acks
    each rank received, each attempt's restored checkpoint, the faults spent."""

    def __init__(self, bounds: Bounds, scheduler: Scheduler):
        self.bounds, self.scheduler = bounds, scheduler
        self.faults_left = bounds.faults
        self.history: list[str] = []
        #: the ranks' events in the journal format of `histories.journal` (start, report,
        #: reported), which the shared checkers judge (invariants.journal)
        self.journal: list[dict] = []
        #: the shared checkers' verdicts on the attempts before the current one, and the
        #: latest step acknowledged on every rank of them (what the current attempt's
        #: verdicts depend on): kept in the state instead of the journal itself
        self.journal_past: tuple = ()
        self.acked: list[tuple[int, int, int, str | None]] = []  # attempt, rank, round, path
        self.restored: dict[int, str | None] = {}  # attempt -> checkpoint path
        self.starts: dict[int, int] = {}  # attempt -> the round its ranks start at
        #: the budget each failed attempt is charged to: "worker_group" or "preemption"
        self.charged: list[str] = []
        self.upload_failed = False
        #: each fault as it landed: ("crash", attempt, rank, step, phase), ("node" or
        #: "preempt", attempt, node, ranks), ("upload", attempt, round)
        self.faults: list[tuple] = []
        self.committed: list[tuple[int, int, str]] = []  # attempt, round, path
        #: (commits so far, checkpoint folders on storage) after each round registered
        self.folders: list[tuple[int, frozenset]] = []
        #: (attempt, graceful) of each group shut down
        self.shutdowns: list[tuple[int, bool]] = []
        #: (attempt, rank, what) of each rank that went on after a rank of its group failed
        self.after_failure: list[tuple[int, int, str]] = []
        self.clock = VirtualClock()

    def log(self, line: str) -> None:
        self.history.append(line)

    def record(self, **event) -> None:
        self.journal.append(event)

    def start_attempt(self, attempt: int) -> None:
        from histories import journal

        verdicts = tuple((v.name, v.status, v.reason) for v in (
            journal.ranks_complete(self.journal), journal.contiguous_per_node(self.journal),
            journal.restores_latest(self.journal)))
        acked = [s for a in journal.attempts(self.journal)
                 for s in journal.acknowledged_steps(self.journal, a)]
        self.journal_past = (verdicts, max(acked, default=None))

    def _journal_now(self, attempt: int) -> tuple:
        mine = [e for e in self.journal if e["attempt"] == attempt]
        return (self.journal_past,
                tuple((e["ev"], e["rank"], e.get("step"), repr(e.get("restored")))
                      for e in mine if e["ev"] == "start"),
                frozenset((e["ev"], e["rank"], e["step"]) for e in mine if e["ev"] != "start"))

    def state(self, group: SimGroup, timeout: float | None) -> tuple:
        """Everything the rest of a fit and its verdict depend on, at a choice point of
        `group.next_event(timeout)` (explore.py, "States"): the controller's state and
        budgets, the checkpoint manager's records, every file on storage, the group's ranks
        and queued events, and what the invariants read of the history so far. Not in it:
        the history's lines, and what feeds only them (the controller's transition log and
        report counter, which go to logs and events)."""
        import pyarrow.fs as pafs

        c, m = self.controller, self.manager
        run = c.state
        running = (run.attempt, run.size, tuple(sorted(
            (i, tuple(sorted((r, rep.staged, rep.checkpoint_dir_name)
                             for r, rep in arrived.items())))
            for i, arrived in run.rounds.items())),
            tuple(sorted(run.round_started.items())), tuple(sorted(run.report_warn_at.items())),
            tuple(sorted(run.finished)), run.next_resize_check,
            run.group is group) if isinstance(run, S.Running) else None
        records = tuple((r.dir_name, r.fs_path, repr(sorted(r.metrics.items())),
                         r.report_index, r.restored) for r in m.checkpoint_results)
        latest = m.latest_checkpoint_result
        files = tuple(sorted((i.path, i.size) for i in self.fs.get_file_info(
            pafs.FileSelector(ROOT, recursive=True))))
        return (type(run).__name__, running, tuple(sorted(c.failure_policy.counts.items())),
                c.setup_failures, records, getattr(latest, "dir_name", None),
                m.current_report_index, files,
                tuple((r, s.step, s.phase) for r, s in sorted(group.ranks.items())),
                tuple(repr(e) for e in group.queued), group.down, group.failed, timeout,
                self.clock.now, tuple(self.shutdowns), tuple(self.after_failure),
                hash(tuple(self.folders)), self._journal_now(group.spec.attempt),
                self.faults_left, self.charged.count("worker_group"),
                self.charged.count("preemption"), self.upload_failed,
                tuple(sorted({p for *_, p in self.acked})),
                tuple(sorted(self.restored.items())),
                self.committed[-1][2] if self.committed else None)

    def snapshot_folders(self) -> None:
        """The checkpoint folders on storage now, with how many commits came before."""
        self.folders.append((len(self.committed), checkpoint_folders(self.fs)))

    def spend_fault(self) -> bool:
        return self.faults_left > 0

    def upload_fails(self, attempt: int, index: int) -> bool:
        """A choice point before the controller commits round `index`: does it fail?"""
        if "upload" not in self.bounds.kinds or not self.spend_fault():
            return False
        # The rest of this controller step is the commit of round `index` by `attempt`
        # (its reports are a function of rank and round here), so they key the state.
        if self.scheduler.choose(["upload ok", "upload fails"], state=lambda: (
                "commit", attempt, index, self.state(self.controller.state.group, None))) == 0:
            return False
        self.faults_left -= 1
        self.upload_failed = True
        self.faults.append(("upload", attempt, index))
        self.log(f"a{attempt}: the upload of round {index} fails")
        return True


class SimGroup(WorkerGroup):
    def __init__(self, world: World, spec: GroupSpec, fs, start_step: int):
        self.world, self.spec, self.fs = world, spec, fs
        self.world_size = spec.num_workers
        self.start_step = start_step
        self.ranks = {r: Rank(start_step) for r in range(spec.num_workers)}
        self.queued: list = []  # events already decided (a node loss's other ranks)
        self.down = False
        self.failed = False  # a rank of this group failed

    def respawn(self, rank: int) -> None:
        """A fresh process for `rank` alone, running the function from the group's start
        (what a broken controller may do; a correct one restarts the whole group)."""
        self.ranks[rank] = Rank(self.start_step)
        self.world.log(f"a{self.spec.attempt}: rank {rank} restarted alone")
        self.record_start(rank)

    def record_start(self, rank: int) -> None:
        per = self.world.bounds.ranks_per_node
        node = rank // per
        self.world.record(
            ev="start", rank=rank, attempt=self.spec.attempt, world_size=self.world_size,
            local_rank=rank % per,
            local_world_size=len([r for r in range(self.world_size) if r // per == node]),
            node_rank=node, node_id=f"node-{node}",
            restored=None if self.start_step == 0 else {"step": self.start_step - 1})

    # -------------------------------------------------------------- the ranks
    def _progress(self) -> list[int]:
        return [r for r, s in self.ranks.items() if s.phase in ("run", "staged")]

    def _options(self) -> list[tuple[str, Any]]:
        """What can happen next. Rank-local progress is offered for the lowest rank that can
        make it only (see explore.py, "Reduction"); every fault, at every point."""
        options: list[tuple[str, Any]] = []
        movable = self._progress()
        options += [("progress", r) for r in (movable[:1] if self.world.bounds.reduce
                                              else movable)]
        if self.world.spend_fault():
            alive = [r for r, s in self.ranks.items() if s.phase not in ("dead", "done")]
            if "crash" in self.world.bounds.kinds:
                options += [("crash", r) for r in alive]
            per = self.world.bounds.ranks_per_node
            nodes = sorted({r // per for r in alive})
            if "node" in self.world.bounds.kinds and per > 1:
                options += [("node", n) for n in nodes
                            if len([r for r in alive if r // per == n]) > 1]
            if "preempt" in self.world.bounds.kinds:
                options += [("preempt", n) for n in nodes]
        return options

    def next_event(self, timeout: float | None):
        if self.queued:
            return self.queued.pop(0)
        a = self.spec.attempt
        while True:
            options = self._options()
            if timeout == 0:
                return None  # the controller collects what already happened, nothing more
            if not options:
                # Nothing can happen any more (no monitor runs here: what the controller
                # would do on a timeout is log that a round waits): it would wait forever.
                raise RuntimeError("livelock: the controller waits forever, no rank can act")
            kind, who = options[self.world.scheduler.choose(
                [f"{k} {w}" for k, w in options],
                state=lambda: self.world.state(self, timeout))]
            if kind == "progress":
                event = self._step_rank(who)
                if event is not None:
                    return event
                continue
            self.world.faults_left -= 1
            self.failed = True
            if kind == "crash":
                self.world.faults.append(("crash", a, who, self.ranks[who].step,
                                          self.ranks[who].phase))
                self.ranks[who].phase = "dead"
                self.world.log(f"a{a}: rank {who} dies")
                self.world.charged.append("worker_group")
                return Failed(who, exit_code=-signal.SIGKILL, signal=signal.SIGKILL)
            per = self.world.bounds.ranks_per_node
            lost = [r for r, s in self.ranks.items()
                    if r // per == who and s.phase not in ("dead", "done")]
            how = "is preempted" if kind == "preempt" else "is lost"
            self.world.log(f"a{a}: node {who} {how} (ranks {lost})")
            self.world.faults.append((kind, a, who, tuple(lost)))
            self.world.charged.append("preemption" if kind == "preempt" else "worker_group")
            for r in lost:
                self.ranks[r].phase = "dead"
            events = [Failed(r, exit_code=-signal.SIGKILL, signal=signal.SIGKILL,
                             preempted=kind == "preempt") for r in lost]
            self.queued = events[1:]
            return events[0]

    def _step_rank(self, rank: int):
        state, a = self.ranks[rank], self.spec.attempt
        if self.failed:
            self.world.after_failure.append((a, rank, state.phase))
        if state.step >= self.world.bounds.reports:
            state.phase = "done"
            self.world.log(f"a{a}: rank {rank} returns")
            return Finished(rank, None)
        k = state.step
        if state.phase == "run":
            folder = f"{self.spec.staging_prefix}-a{a}-{k}"
            self.fs.create_dir(folder)
            with self.fs.open_output_stream(f"{folder}/rank_{rank}") as out:
                out.write(f"{a}:{k}".encode())
            if rank == 0:
                with self.fs.open_output_stream(f"{folder}/step") as out:
                    out.write(str(k).encode())
            state.phase = "staged"
            self.world.log(f"a{a}: rank {rank} stages round {k}")
            return None
        state.phase = "waiting"
        self.world.log(f"a{a}: rank {rank} reports round {k}")
        self.world.record(ev="report", rank=rank, attempt=a, step=k, checkpoint=True,
                          world_size=self.world_size)
        return Report(rank, k, {"step": k, "rank": rank, "score": score(k)}, staged=True,
                      checkpoint_dir_name=f"checkpoint_{k}")

    # -------------------------------------------------------------- the controller's side
    def ack(self, rank: int, ack: Ack) -> None:
        state = self.ranks[rank]
        if state.phase != "waiting" or self.down:
            return  # a rank that died: the ack goes nowhere, as in a real group
        path = getattr(ack.checkpoint, "path", None)
        if path is not None and not any(a == self.spec.attempt and i == ack.index
                                        for a, _, i, _ in self.world.acked):
            self.world.snapshot_folders()  # the round is registered: retention has run
        self.world.acked.append((self.spec.attempt, rank, ack.index, path))
        self.world.record(ev="reported", rank=rank, attempt=self.spec.attempt, step=ack.index)
        state.phase, state.step = "run", ack.index + 1

    def shutdown(self, graceful: bool = True) -> None:
        if not self.down:
            self.down = True
            self.world.shutdowns.append((self.spec.attempt, graceful))
            self.world.log(f"a{self.spec.attempt}: group shut down"
                           + ("" if graceful else " (no backend shutdown)"))


class SimFactory(WorkerGroupFactory):
    def __init__(self, world: World, fs):
        self.world, self.fs = world, fs

    def capacity(self, resources_per_worker: dict) -> int:
        return self.world.bounds.workers

    def start(self, spec: GroupSpec) -> SimGroup:
        start = 0
        path = getattr(spec.checkpoint, "path", None)
        if path is not None:
            with self.fs.open_input_stream(f"{path}/step") as f:
                start = int(f.read().decode()) + 1
        self.world.restored[spec.attempt] = path
        self.world.starts[spec.attempt] = start
        self.world.log(f"a{spec.attempt}: group of {spec.num_workers} starts at round {start}"
                       + (f" from {path.rsplit('/', 1)[-1]}" if path else ""))
        self.world.start_attempt(spec.attempt)
        group = SimGroup(self.world, spec, self.fs, start)
        for rank in range(spec.num_workers):
            group.record_start(rank)
        return group

    def wait_for_change(self, timeout: float) -> None:
        raise RuntimeError("the simulated cluster always has room for the group")


@dataclasses.dataclass
class Fit:
    """One simulated fit's ending and what the invariants read."""

    world: World
    state: Any  # the controller's terminal state (or None: it raised, see `error`)
    error: BaseException | None
    manager: CheckpointManager
    storage: StorageContext
    fs: Any
    steps: int
    #: the run ended at a state seen before (Scheduler.seen): no ending, nothing to check
    pruned: bool = False


def simulate(bounds: Bounds, choices: tuple = (), controller_cls=Controller,
             manager_cls=CheckpointManager, policy_cls=FailurePolicy,
             discard: bool = True, scheduler: Scheduler | None = None,
             seen: set | None = None) -> Fit:
    """Run one fit under `choices` (see Scheduler). A broken variant (variants.py) passes
    its own controller, checkpoint manager or failure policy class, or discard=False."""
    from reference.train import CheckpointConfig

    scheduler = scheduler or Scheduler(choices, seen)
    world = World(bounds, scheduler)
    fs = pa_fs._MockFileSystem()
    fs.create_dir(ROOT)
    storage = StorageContext(ROOT, RUN, storage_filesystem=fs)
    manager = manager_cls(storage, CheckpointConfig() if bounds.keep is None else
                          CheckpointConfig(num_to_keep=bounds.keep,
                                           checkpoint_score_attribute="score"))
    prefix = fs_utils.join(storage.experiment_fs_path, f"{fs_utils.TEMP_PREFIX}stage-sim")

    def commit_round(attempt: int, index: int, dir_name: str | None, metrics):
        if world.upload_fails(attempt, index):
            # the staged files are gone with the failed move, as commit_staged leaves it
            fs_utils.delete_path(fs, f"{prefix}-a{attempt}-{index}")
            raise OSError(f"simulated: the upload of round {index} failed")
        checkpoint = commit_staged(storage, prefix, attempt, index, dir_name)
        world.committed.append((attempt, index, checkpoint.path))
        world.log(f"a{attempt}: round {index} committed as {dir_name}")
        return checkpoint

    controller = controller_cls(
        spec=dict(resources_per_worker={"CPU": 1}, placement_strategy="PACK",
                  experiment_name=RUN, storage=storage, staging_prefix=prefix, train_fn=b"",
                  backend_config=None),
        factory=SimFactory(world, fs), checkpoint_manager=manager,
        failure_policy=policy_cls(max_failures=bounds.max_failures,
                                  max_preemption_failures=bounds.max_preemption_failures),
        scaling_policy=ScalingPolicy(bounds.workers, bounds.workers, None),
        commit_round=commit_round,
        discard_staging=(lambda attempt: discard_staged(storage, prefix, attempt)) if discard
        else (lambda attempt: None),
        clock=world.clock)
    world.controller, world.manager, world.fs = controller, manager, fs
    steps, error, state = 0, None, None
    try:
        while not isinstance(controller.state, S.TERMINAL):
            controller.step()
            steps += 1
            if steps > STEP_LIMIT:
                raise RuntimeError(f"livelock: no end after {STEP_LIMIT} controller steps")
        state = controller.state
    except Pruned:
        controller._shutdown_group()
        return Fit(world, None, None, manager, storage, fs, steps, pruned=True)
    except Exception as exc:  # noqa: BLE001 - the invariants judge how the fit ended
        controller._shutdown_group()
        error = exc
    world.log(f"end: {S.name(state) if state is not None else type(error).__name__}")
    return Fit(world, state, error, manager, storage, fs, steps)
