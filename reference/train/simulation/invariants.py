"""What every simulated history must satisfy; each function returns the violations it found
(one line each, empty: none)."""

from __future__ import annotations

import pyarrow.fs as pafs

from reference.train._internal.controller import states as S
from reference.train._internal.storage import fs_utils
from reference.train.simulation.world import Fit


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


def acknowledged_checkpoints_kept(fit: Fit) -> list[str]:
    """Every checkpoint acknowledged to a rank is, at the end, a complete folder (no
    retention here: every checkpoint is kept)."""
    out = []
    for attempt, rank, index, path in fit.world.acked:
        if path is not None and not _complete(fit, path, fit.world.bounds.workers):
            out.append(f"round {index}'s checkpoint was acknowledged to rank {rank} "
                       f"(attempt {attempt}) but is not complete on storage at the end")
    return sorted(set(out))


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


ALL = (terminates, outcome, acknowledged_checkpoints_kept, restores_latest,
       nothing_half_visible, final_checkpoint)


def violations(fit: Fit) -> list[str]:
    return [f"{check.__name__}: {line}" for check in ALL for line in check(fit)]
