"""What a failed attempt leaves behind: the errors a run raises (WorkerGroupError keyed by
rank, ControllerError) and Ray's `[FailurePolicy]` log record with each rank's cause."""

from __future__ import annotations

import logging

# the controller's logger: these records are the controller's
logger = logging.getLogger("reference.train._internal.controller.controller")

#: which FailureConfig field each budget is
BUDGETS = {"worker_group": "max_failures", "preemption": "max_preemption_failures",
           "controller": "controller_failure_limit"}


def one_line(text: str) -> str:
    """The last non-empty line of a traceback (the error), or the first of a message."""
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    if not lines:
        return "(no detail)"
    return lines[-1] if lines[0].startswith("Traceback") else lines[0]


def worker_group_error(failures: dict):
    from reference.train._exceptions import WorkerGroupError

    lines = ["Training failed due to worker errors:"]
    for rank in sorted(failures):
        lines.append(f"[Rank {rank} Error Snippet]\n{failures[rank].describe()}")
    worker_failures = {
        rank: f.error if f.error is not None else RuntimeError(f.describe())
        for rank, f in failures.items()
    }
    return WorkerGroupError("\n".join(lines[1:]), worker_failures)


def controller_error(exc: BaseException):
    from reference.train._exceptions import ControllerError

    return ControllerError(exc)


def log_failure(failures: dict, decision) -> dict[int, str]:
    """Logs Ray's `[FailurePolicy]` record, with the ranks and their causes (one line each);
    returns the causes by rank."""
    causes = {rank: one_line(f.describe()) + (", its node was preempted" if f.preempted
                                               else "")
              for rank, f in sorted(failures.items())}
    limit = "unlimited" if decision.limit < 0 else decision.limit
    logger.info(
        "[FailurePolicy] %s\n  Source: %s\n  Error count: %d (max allowed: %s, "
        "FailureConfig.%s)\n%s", "RETRY" if decision.retry else "RAISE",
        decision.kind.replace("_", " "), decision.count, limit, BUDGETS[decision.kind],
        "\n".join(f"  Rank {rank} failed: {cause}" for rank, cause in causes.items()))
    return causes
