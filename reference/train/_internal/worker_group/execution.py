"""The `worker_group` a Backend's hooks receive: run functions on the workers of a group.

This is the surface Ray 2.60's backends use (`ray.train.v2._internal.execution.worker_group`'s
ExecutionGroup): `execute(fn, *args, **kwargs)` runs fn on every worker and returns the
values in rank order; `execute_async` returns futures instead (wait with `reference.get`);
`execute_single(rank, ...)` / `execute_single_async(rank, ...)` run on one worker;
`len(group)`; `get_workers()` lists `Worker`s in rank order with their `metadata` (hostname,
node id and address, pid, accelerator ids) and `distributed_context` (ranks and sizes);
`get_resources_per_worker()` and `get_worker_group_context()` (num_workers,
resources_per_worker, placement_strategy, num_slices).

How a function gets to a worker is the group's business: a `Worker` holds a `submit`
callable that takes the cloudpickled `(fn, args, kwargs)` and returns a
`concurrent.futures.Future`, resolved with the value, or failed with RayTaskError (the
function raised) or RayActorError (the worker is gone). Functions sent to one worker run one
at a time, in the order sent, with its TrainContext set: in the worker's main thread before
its training function starts, then in a thread beside it (worker.py: `_ServingCalls`).
"""

from __future__ import annotations

import dataclasses
from concurrent.futures import Future
from typing import Any, Callable, TypeVar

import cloudpickle

import simcluster
from reference._futures import get

T = TypeVar("T")


@dataclasses.dataclass(frozen=True)
class WorkerMetadata:
    hostname: str
    node_id: str
    node_ip: str
    pid: int
    #: e.g. {"GPU": [0, 1]}; empty lists for kinds the worker holds none of
    accelerator_ids: dict

    @property
    def gpu_ids(self) -> list:
        return self.accelerator_ids.get("GPU", [])


@dataclasses.dataclass(frozen=True)
class DistributedContext:
    world_rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    node_rank: int


@dataclasses.dataclass(frozen=True)
class WorkerGroupContext:
    num_workers: int
    resources_per_worker: dict
    placement_strategy: str
    num_slices: int = 1


@dataclasses.dataclass
class Worker:
    metadata: WorkerMetadata
    distributed_context: DistributedContext
    resources: dict
    submit: Callable[[bytes], Future] = dataclasses.field(repr=False)

    def execute_async(self, fn: Callable[..., T], *fn_args, **fn_kwargs) -> Future:
        try:
            blob = simcluster.dumps_by_value((fn, fn_args, fn_kwargs))
        except Exception as exc:  # noqa: BLE001 - names what could not be sent
            raise TypeError(f"execute({getattr(fn, '__name__', fn)!r}, ...): the function or "
                            f"its arguments cannot be pickled to send to a worker: "
                            f"{type(exc).__name__}: {exc}") from exc
        return self.submit(blob)

    def execute(self, fn: Callable[..., T], *fn_args, **fn_kwargs) -> T:
        return get(self.execute_async(fn, *fn_args, **fn_kwargs))


class ExecutionGroup:
    """The workers of one group, in world-rank order."""

    def __init__(self, workers: list[Worker], context: WorkerGroupContext):
        self._workers, self._context = list(workers), context
        self._active = True

    def _assert_active(self) -> None:
        if not self._active:
            raise ValueError("The worker group is not active: it was shut down.")

    def close(self) -> None:
        """No more calls: the group's workers are being stopped."""
        self._active = False

    def get_workers(self) -> list[Worker]:
        return list(self._workers)

    def get_resources_per_worker(self) -> dict:
        return dict(self._context.resources_per_worker)

    def get_worker_group_context(self) -> WorkerGroupContext:
        return self._context

    def __len__(self) -> int:
        self._assert_active()
        return len(self._workers)

    def execute_async(self, fn: Callable, *fn_args, **fn_kwargs) -> list[Future]:
        self._assert_active()
        return [w.execute_async(fn, *fn_args, **fn_kwargs) for w in self._workers]

    def execute(self, fn: Callable[..., T], *fn_args, **fn_kwargs) -> list[T]:
        return get(self.execute_async(fn, *fn_args, **fn_kwargs))

    def execute_single_async(self, rank: int, fn: Callable[..., T], *fn_args,
                             **fn_kwargs) -> Future:
        self._assert_active()
        if not isinstance(rank, int) or not 0 <= rank < len(self._workers):
            raise ValueError(f"The provided rank={rank!r} is not valid for "
                             f"{len(self._workers)} workers.")
        return self._workers[rank].execute_async(fn, *fn_args, **fn_kwargs)

    def execute_single(self, rank: int, fn: Callable[..., T], *fn_args, **fn_kwargs) -> T:
        return get(self.execute_single_async(rank, fn, *fn_args, **fn_kwargs))


def run_call(blob: bytes) -> tuple[bool, Any, str]:
    """In a worker: run one sent call; (True, value, "") or (False, exception, traceback).
    A value or exception that cannot be pickled back is replaced by an error naming it."""
    import traceback

    try:
        fn, args, kwargs = cloudpickle.loads(blob)
        value = fn(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 - sent back to the driver
        outcome = (False, exc, traceback.format_exc())
    else:
        outcome = (True, value, "")
    try:
        cloudpickle.dumps(outcome[1])
    except Exception as exc:  # noqa: BLE001 - the reply must always be sendable
        what = "return value" if outcome[0] else "exception"
        outcome = (False, TypeError(f"the {what} {outcome[1]!r} of the executed function "
                                    f"cannot be pickled: {exc}"), outcome[2])
    return outcome


def tried(outcome: tuple[bool, Any, str], rank: int, future: Future) -> None:
    """Resolve `future` with a worker's reply to one call."""
    from reference.exceptions import RayTaskError

    ok, value, remote_traceback = outcome
    if ok:
        future.set_result(value)
    else:
        future.set_exception(RayTaskError(value, rank, remote_traceback))
