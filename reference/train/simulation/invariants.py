"""What every simulated history must satisfy; each function returns the violations it found
(one line each, empty: none)."""

from __future__ import annotations

import pyarrow.fs as pafs

from reference.train._internal.controller import states as S
from reference.train._internal.storage import fs_utils
from reference.train.simulation.world import Fit, checkpoint_folders, score


def _complete(fit: Fit, path: str, world_size: int) -> bool:
    """A checkpoint folder holds every rank's file and rank 0's step file."""
    selector = pafs.FileSelector(path, allow_not_found=True)
    names = {info.base_name for info in fit.fs.get_file_info(selector)}
    return names >= {"step", *(f"rank_{r}" for r in range(world_size))}


def terminates(fit: Fit) -> list[str]:
    if fit.error is not None and "livelock" in str(fit.error):
        return [f"the fit does not end: {fit.error}"]
    return []


def _over(count: int, limit: int) -> bool:
    return limit >= 0 and count > limit


def outcome(fit: Fit) -> list[str]:
    """Finished exactly when no upload failed and each budget held: the worker-group
    failures within max_failures, the preemptions within max_preemption_failures (a failed
    commit fails the fit, see world.py)."""
    bounds, world = fit.world.bounds, fit.world
    should_fail = (world.upload_failed
                   or _over(world.charged.count("worker_group"), bounds.max_failures)
                   or _over(world.charged.count("preemption"),
                            bounds.max_preemption_failures))
    failed = fit.error is not None or isinstance(fit.state, S.Errored)
    if should_fail != failed:
        got = (S.name(fit.state) if fit.state is not None
               else f"{type(fit.error).__name__}: {fit.error}")
        want = "an error" if should_fail else "FINISHED"
        return [f"the fit ended {got} after failures charged to {world.charged} with "
                f"max_failures={bounds.max_failures}, max_preemption_failures="
                f"{bounds.max_preemption_failures}"
                f"{' and a failed upload' if world.upload_failed else ''}: expected {want}"]
    return []


def _kept(fit: Fit, commits: int | None = None) -> set[str]:
    """The checkpoints retention keeps after the first `commits` commits (all: None),
    worked out here from what was committed: all of them, or with `keep` the `keep` best
    scored plus the latest (Ray 2.60's rule)."""
    committed = [(index, path) for _, index, path in fit.world.committed[:commits]]
    keep = fit.world.bounds.keep
    if keep is None or not committed:
        return {path for _, path in committed}
    best = sorted(committed, key=lambda c: score(c[0]), reverse=True)[:keep]
    return {path for _, path in best} | {committed[-1][1]}


def acknowledged_checkpoints_kept(fit: Fit) -> list[str]:
    """Every checkpoint acknowledged to a rank is, at the end, a complete folder, unless
    retention removed it (`_kept`)."""
    out, kept = [], _kept(fit)
    evicted = {p for *_, p in fit.world.committed} - kept
    for attempt, rank, index, path in fit.world.acked:
        if path is None or path in evicted:
            continue
        if not _complete(fit, path, fit.world.bounds.workers):
            out.append(f"round {index}'s checkpoint was acknowledged to rank {rank} "
                       f"(attempt {attempt}) but is not complete on storage at the end")
    return sorted(set(out))


def retention(fit: Fit) -> list[str]:
    """After every round registered and at the end, the checkpoint folders on storage are
    exactly those retention keeps."""
    def name(paths):
        return sorted(p.rsplit("/", 1)[-1] for p in paths)

    for commits, on_storage in [*fit.world.folders, (None, checkpoint_folders(fit.fs))]:
        want = _kept(fit, commits)
        if on_storage != want:
            when = "at the end" if commits is None else f"after commit {commits}"
            scores = [score(i) for _, i, _ in fit.world.committed[:commits]]
            return [f"{when}: checkpoint folders {name(on_storage)}, expected {name(want)} "
                    f"(num_to_keep={fit.world.bounds.keep}, scores {scores})"]
    return []


def rank0_metrics(fit: Fit) -> list[str]:
    """Every registered checkpoint's metrics are rank 0's."""
    return [f"{r.dir_name} was registered with the metrics of rank {r.metrics.get('rank')}"
            for r in fit.manager.checkpoint_results if r.metrics.get("rank") != 0]


def whole_group_restarts(fit: Fit) -> list[str]:
    """A failure ends its attempt: no rank of a group goes on after one of its ranks
    failed (the whole group is restarted, never one rank)."""
    return [f"attempt {a}: rank {rank} went on ({phase}) after a rank of its group failed"
            for a, rank, phase in sorted(set(fit.world.after_failure))][:1]


def backend_shutdown(fit: Fit) -> list[str]:
    """A finished fit's last group was shut down gracefully (its backend's on_shutdown
    ran)."""
    if isinstance(fit.state, S.Finished) and fit.world.shutdowns and \
            not fit.world.shutdowns[-1][1]:
        return [f"attempt {fit.world.shutdowns[-1][0]} finished but its group was stopped "
                "without the backend's shutdown"]
    return []


def restores_latest(fit: Fit) -> list[str]:
    """Each attempt starts from the checkpoint committed last before it."""
    out = []
    for attempt, path in sorted(fit.world.restored.items()):
        before = [p for a, _, p in fit.world.committed if a < attempt]
        want = before[-1] if before else None
        if path != want:
            out.append(f"attempt {attempt} restored {path} instead of the latest committed "
                       f"{want}")
    return out


def nothing_half_visible(fit: Fit) -> list[str]:
    """At the end no staging or temporary folder is left in the run folder, and every
    checkpoint folder there is complete."""
    out = []
    run = fit.storage.experiment_fs_path
    for info in fit.fs.get_file_info(pafs.FileSelector(run, allow_not_found=True)):
        if info.base_name.startswith(fs_utils.TEMP_PREFIX):
            out.append(f"{info.base_name} is left in the run folder")
        elif info.type == pafs.FileType.Directory and info.base_name.startswith(
                "checkpoint_") and not _complete(
                fit, info.path, fit.world.bounds.workers):
            out.append(f"{info.base_name} is incomplete")
    return out


def final_checkpoint(fit: Fit) -> list[str]:
    """A finished fit's latest checkpoint is its last round's."""
    if not isinstance(fit.state, S.Finished):
        return []
    latest = fit.manager.latest_checkpoint
    want = f"checkpoint_{fit.world.bounds.reports - 1}"
    got = None if latest is None else latest.path.rsplit("/", 1)[-1]
    return [] if got == want else [f"the finished fit's latest checkpoint is {got}, not {want}"]


def journal(fit: Fit) -> list[str]:
    """The checkers the conformance suite runs on real journals (`histories.journal`), on
    the simulated fit's journal: every attempt's ranks are 0..N-1 once each and contiguous
    per node, and each restarted attempt restores at least the latest step acknowledged on
    every rank before it."""
    from histories import journal as shared

    events = fit.world.journal
    return [f"{v.name}: {v.reason}" for v in (
        shared.ranks_complete(events), shared.contiguous_per_node(events),
        shared.restores_latest(events)) if v.status == "invalid"]


ALL = (terminates, outcome, acknowledged_checkpoints_kept, restores_latest,
       nothing_half_visible, final_checkpoint, retention, rank0_metrics, whole_group_restarts,
       backend_shutdown, journal)


def violations(fit: Fit) -> list[str]:
    return [f"{check.__name__}: {line}" for check in ALL for line in check(fit)]
