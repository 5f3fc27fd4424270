"""Drawn crash schedules against reference fits, and what every fit must still guarantee.

    python ci/fault_property.py [--fits 200] [--seed N] [--shrink]

Each example is one `DataParallelTrainer` fit (2-3 workers, `max_failures=3`) whose training
function SIGKILLs its own process at drawn points: a rank, a report index, an attempt, and a
timing around the other ranks' report (just before its own report, or from a timer that
fires while its report is in flight, with the victim or its peers arriving late). Every fit
must then:

- succeed, or fail with the failure policy's own `WorkerGroupError` once more attempts were
  killed than `max_failures` allows (anything else is an internal error);
- keep every acknowledged checkpoint: each restart restores, and the final Result (or the
  run's snapshot, for a failed fit) holds, at least the latest checkpoint whose report
  returned on some rank;
- leave in `<storage_path>/<name>/` only the registered checkpoints and the files Ray Train
  writes there itself (`.validate_storage_marker`, `checkpoint_manager_snapshot.json`).

Prints the figures (fits, faults scheduled, kills, restarts, outcomes, violations by kind),
each violating schedule in a form that replays it, and exits 1 on any violation. `--shrink`
stops at the first violation and lets Hypothesis shrink it to a minimal schedule.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import os
import shutil
import sys
import tempfile
import threading
import time

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st

MAX_FAILURES = 3
CLUSTER_CPUS = 4  # simulated: room for the largest drawn group
FIT_DEADLINE_S = 90.0
#: the files Ray Train itself keeps in a run folder, besides the checkpoint folders
RAY_RUN_FILES = frozenset({".validate_storage_marker", "checkpoint_manager_snapshot.json"})


@dataclasses.dataclass(frozen=True)
class Kill:
    """Rank `rank` SIGKILLs itself at its report number `report` of attempt `attempt`."""

    attempt: int
    rank: int
    report: int
    #: None: right before calling report(); else ms after calling it (a timer thread)
    delay_ms: float | None
    #: ms the late side waits before this report; who is late: the victim or its peers
    lead_ms: float
    victim_last: bool


@dataclasses.dataclass(frozen=True)
class Schedule:
    num_workers: int
    steps: int
    #: "all": every rank passes a checkpoint at every step; "rank0": only rank 0 does
    checkpoints: str
    kills: tuple


@st.composite
def schedules(draw) -> Schedule:
    n = draw(st.integers(2, 3))
    steps = draw(st.integers(2, 4))
    # One kill per attempt from attempt 0 on: a kill ends its attempt, so the next kill's
    # attempt exists (unless a restore left it fewer reports than the drawn index).
    # Delays cluster at a few ms: a round is committed and acknowledged within that.
    delays = st.one_of(st.none(), st.sampled_from([0.0, 0.3, 1.0, 2.0, 3.0]), st.floats(0, 15))
    kills = tuple(Kill(
        attempt=a, rank=draw(st.integers(0, n - 1)), report=draw(st.integers(0, steps - 1)),
        delay_ms=draw(delays), lead_ms=draw(st.sampled_from([0.0, 1.0, 5.0, 20.0])),
        victim_last=draw(st.booleans()),
    ) for a in range(draw(st.integers(1, MAX_FAILURES + 1))))
    return Schedule(n, steps, draw(st.sampled_from(["all", "rank0"])), kills)


# ---------------------------------------------------------------- inside the workers
def _log(folder: str, **event) -> None:
    line = (json.dumps(event) + "\n").encode()
    fd = os.open(os.path.join(folder, "events.jsonl"), os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, line)  # one O_APPEND write per line: lines of several ranks never mix
    finally:
        os.close(fd)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def _next_attempt(folder: str) -> int:
    """This worker's attempt: a new one begins when a worker starts while one that started
    in the current attempt is gone (a group is torn down whole before the next starts;
    counting starts per rank would miscount a rank killed before it started)."""
    import fcntl

    with open(os.path.join(folder, "attempts.json"), "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.seek(0)
        state = json.loads(f.read() or '{"attempt": 0, "pids": []}')
        if not all(_alive(pid) for pid in state["pids"]):
            state = {"attempt": state["attempt"] + 1, "pids": []}
        state["pids"].append(os.getpid())
        f.seek(0)
        f.truncate()
        f.write(json.dumps(state))
        return state["attempt"]


def _await_peers(folder: str, attempt: int, n: int, timeout_s: float = 30.0) -> None:
    """Wait until every rank of this attempt has started: a kill before that would make a
    late peer of the same attempt count the next one."""
    import fcntl

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with open(os.path.join(folder, "attempts.json")) as f:
            fcntl.flock(f, fcntl.LOCK_SH)  # a starting peer rewrites the file in place
            state = json.loads(f.read() or "{}")
        if state.get("attempt") != attempt or len(state.get("pids", ())) >= n:
            return
        time.sleep(0.002)


def step_of(checkpoint) -> int | None:
    return None if checkpoint is None else int(os.path.basename(checkpoint.path)[5:])


def _die(folder: str, rank: int, attempt: int, step: int) -> None:
    import signal

    _log(folder, ev="kill", rank=rank, attempt=attempt, step=step)
    os.kill(os.getpid(), signal.SIGKILL)


def train_fn(config: dict):
    import reference.train as t

    s: Schedule = config["schedule"]
    folder = config["folder"]
    rank = t.get_context().get_world_rank()
    attempt = _next_attempt(folder)
    restored = step_of(t.get_checkpoint())
    _log(folder, ev="start", rank=rank, attempt=attempt, restored=restored)
    first = 0 if restored is None else restored + 1
    for index, step in enumerate(range(first, s.steps)):
        kills = [k for k in s.kills if (k.attempt, k.report) == (attempt, index)]
        if any(k.lead_ms and (k.rank == rank) == k.victim_last for k in kills):
            time.sleep(max(k.lead_ms for k in kills) / 1000)
        checkpoint = None
        if s.checkpoints == "all" or rank == 0:
            local = os.path.join(folder, "local", f"a{attempt}-r{rank}-s{step}")
            os.makedirs(local)
            with open(os.path.join(local, f"shard-{rank}"), "w") as f:
                f.write(str(step))
            checkpoint = t.Checkpoint.from_directory(local)
        for k in kills:
            if k.rank != rank:
                continue
            _await_peers(folder, attempt, s.num_workers)
            if k.delay_ms is None:
                _die(folder, rank, attempt, step)
            threading.Timer(k.delay_ms / 1000, _die, (folder, rank, attempt, step)).start()
        t.report({"step": step}, checkpoint=checkpoint, checkpoint_dir_name=f"ckpt-{step:04d}")
        _log(folder, ev="acked", rank=rank, attempt=attempt, step=step,
             checkpoint=step_of(t.get_checkpoint()))
    return rank


# ---------------------------------------------------------------- the driver's side
@dataclasses.dataclass
class FitReport:
    schedule: Schedule
    kills: int
    restarts: int
    outcome: str  # "ok", "policy error" or the error's type
    violations: list


def read_events(folder: str) -> list[dict]:
    try:
        with open(os.path.join(folder, "events.jsonl")) as f:
            return [json.loads(line) for line in f if line.strip()]
    except FileNotFoundError:
        return []


def registered(run_dir: str) -> tuple[set, int | None]:
    """(checkpoint folder names the snapshot registers, the latest one's step)."""
    try:
        with open(os.path.join(run_dir, "checkpoint_manager_snapshot.json")) as f:
            doc = json.load(f)
    except FileNotFoundError:
        return set(), None
    names = {e["checkpoint_dir_name"] for e in doc["checkpoint_results"]}
    latest = doc.get("latest_checkpoint_result")
    return names, None if latest is None else int(latest["checkpoint_dir_name"][5:])


def verdict(schedule: Schedule, events: list[dict], error: BaseException | None,
            final_step: int | None, run_dir: str, policy_error: type) -> tuple[str, list]:
    """The fit's outcome and its violations (the checks in this module's docstring)."""
    killed_attempts = {e["attempt"] for e in events if e["ev"] == "kill"}
    violations = []
    if error is None:
        outcome = "ok"
    elif isinstance(error, policy_error):
        outcome = "policy error"
        if len(killed_attempts) <= MAX_FAILURES:
            violations.append(f"failed with failure budget left ({len(killed_attempts)} "
                              f"attempts killed, max_failures={MAX_FAILURES}): {error}")
    else:
        outcome = type(error).__name__
        violations.append(f"internal error {type(error).__module__}.{outcome}: {error}")
    acked: dict[int, int] = {}  # attempt -> latest step acknowledged in it
    for e in events:
        if e["ev"] == "acked" and e["checkpoint"] is not None:
            acked[e["attempt"]] = max(acked.get(e["attempt"], -1), e["checkpoint"])
    for e in events:
        if e["ev"] == "start":
            want = max((s for a, s in acked.items() if a < e["attempt"]), default=None)
            if want is not None and (e["restored"] is None or e["restored"] < want):
                violations.append(f"lost acknowledged checkpoint: attempt {e['attempt']} rank "
                                  f"{e['rank']} restored {e['restored']}, step {want} was acked")
    names, latest = registered(run_dir)
    have = final_step if error is None else latest
    want = max(acked.values(), default=None)
    if want is not None and (have is None or have < want):
        violations.append(f"lost acknowledged checkpoint: the fit ends at step {have}, "
                          f"step {want} was acked")
    if error is None and final_step != schedule.steps - 1:
        violations.append(f"the fit succeeded at step {final_step}, expected {schedule.steps - 1}")
    stray = sorted(set(os.listdir(run_dir) if os.path.isdir(run_dir) else ())
                   - RAY_RUN_FILES - {n.split("/")[0] for n in names})
    if stray:
        violations.append(f"run folder holds more than registered checkpoints and Ray's "
                          f"files: {stray}")
    return outcome, violations


def run_fit(schedule: Schedule, workspace: str | None = None) -> FitReport:
    import reference.train as t

    folder = tempfile.mkdtemp(prefix="fault-property-", dir=workspace)
    try:
        trainer = t.DataParallelTrainer(
            train_fn, train_loop_config={"schedule": schedule, "folder": folder},
            scaling_config=t.ScalingConfig(num_workers=schedule.num_workers),
            run_config=t.RunConfig(storage_path=os.path.join(folder, "storage"), name="run",
                                   failure_config=t.FailureConfig(max_failures=MAX_FAILURES)))
        box: dict = {}

        def fit():
            try:
                box["result"] = trainer.fit()
            except BaseException as exc:  # noqa: BLE001 - judged below
                box["error"] = exc

        thread = threading.Thread(target=fit, name="fault-property-fit", daemon=True)
        thread.start()
        thread.join(FIT_DEADLINE_S)
        events = read_events(folder)
        kills = sum(e["ev"] == "kill" for e in events)
        restarts = len({e["attempt"] for e in events if e["ev"] == "start"}) - 1
        if thread.is_alive():
            import reference

            reference.shutdown()  # the next fit gets a fresh cluster
            reference.init(num_cpus=CLUSTER_CPUS)
            return FitReport(schedule, kills, restarts, "hang",
                             [f"fit did not finish within {FIT_DEADLINE_S} s"])
        result = box.get("result")
        final = None if result is None else step_of(result.checkpoint)
        outcome, violations = verdict(schedule, events, box.get("error"), final,
                                      os.path.join(folder, "storage", "run"),
                                      t.WorkerGroupError)
        return FitReport(schedule, kills, restarts, outcome, violations)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


class Figures:
    def __init__(self):
        self.reports: list[FitReport] = []

    def add(self, report: FitReport) -> None:
        self.reports.append(report)

    @property
    def violating(self) -> list[FitReport]:
        return [r for r in self.reports if r.violations]

    def render(self) -> str:
        rs = self.reports
        outcomes = collections.Counter(r.outcome for r in rs)
        kinds = collections.Counter(v.split(":")[0].split(" (")[0] for r in rs
                                    for v in r.violations)
        lines = [f"fits: {len(rs)}",
                 f"faults scheduled: {sum(len(r.schedule.kills) for r in rs)}",
                 f"kills: {sum(r.kills for r in rs)}",
                 f"restarts: {sum(r.restarts for r in rs)}",
                 "outcomes: " + ", ".join(f"{k} {v}" for k, v in sorted(outcomes.items())),
                 f"violations: {sum(len(r.violations) for r in rs)} in {len(self.violating)} fits"]
        lines += [f"  {k}: {v}" for k, v in sorted(kinds.items())]
        for r in self.violating:
            lines.append(f"- {r.schedule!r}")
            lines += [f"    {v[:300]}" for v in r.violations]
        return "\n".join(lines)


def run(fits: int, seed: int | None = None, shrink: bool = False,
        progress=None) -> Figures:
    """Run `fits` drawn schedules; with `shrink`, raise on the first violation (shrunk)."""
    import cloudpickle

    import reference

    # The training function travels by value: ci/ is not importable inside the workers.
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    figures = Figures()
    phases = [Phase.generate, Phase.shrink] if shrink else [Phase.generate]

    @settings(max_examples=fits, deadline=None, database=None, phases=phases,
              suppress_health_check=list(HealthCheck), derandomize=seed is None)
    @given(schedules())
    def prop(schedule):
        report = run_fit(schedule)
        figures.add(report)
        if progress is not None:
            progress(len(figures.reports), report)
        if shrink and report.violations:
            raise AssertionError("\n".join(report.violations) + f"\n[{schedule!r}]")

    if seed is not None:
        prop = hypothesis_seed(seed)(prop)
    if not reference.is_initialized():
        reference.init(num_cpus=CLUSTER_CPUS)
    prop()
    return figures


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="ci/fault_property.py", description=__doc__.split("\n")[0])
    p.add_argument("--fits", type=int, default=200, help="drawn schedules to run (default 200)")
    p.add_argument("--seed", type=int, help="Hypothesis seed (default: derandomized)")
    p.add_argument("--shrink", action="store_true", help="stop at a violation and shrink it")
    args = p.parse_args(argv)
    if args.fits < 1:
        p.error(f"--fits={args.fits}: expected a positive number of fits")

    def progress(n, r):
        tail = f" VIOLATION {r.violations[0][:200]}" if r.violations else ""
        print(f"[{n}/{args.fits}] {r.outcome}, {r.kills} kills{tail}", file=sys.stderr,
              flush=True)

    start = time.monotonic()
    figures = run(args.fits, args.seed, args.shrink, progress)
    print(figures.render())
    print(f"seconds: {time.monotonic() - start:.0f}")
    return 1 if figures.violating else 0


if __name__ == "__main__":
    sys.exit(main())
