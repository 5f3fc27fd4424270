"""`reference.get`: wait for what `worker_group.execute_async` returned (as `ray.get`)."""

from __future__ import annotations

import concurrent.futures
import time

from reference.exceptions import GetTimeoutError, RayTaskError


def get(object_refs, *, timeout: float | None = None):
    """The value of a future, or the values of a list of futures, in order; waits at most
    `timeout` seconds in all (GetTimeoutError), and raises the first error met in order
    (RayTaskError for a function that raised, RayActorError for a worker that died)."""
    single = isinstance(object_refs, concurrent.futures.Future)
    refs = [object_refs] if single else object_refs
    if not isinstance(refs, (list, tuple)) or not all(
            isinstance(r, concurrent.futures.Future) for r in refs):
        raise TypeError(f"get(object_refs={object_refs!r}): expected a future returned by "
                        "worker_group.execute_async / execute_single_async, or a list of them.")
    if timeout is not None and not timeout >= 0:
        raise ValueError(f"get(timeout={timeout!r}): expected None or a number >= 0.")
    deadline = None if timeout is None else time.monotonic() + timeout
    values = []
    for ref in refs:
        remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
        try:
            values.append(ref.result(remaining))
        except concurrent.futures.TimeoutError:
            raise GetTimeoutError(f"get timed out: some futures are not ready after "
                                  f"{timeout} s.") from None
        except RayTaskError as exc:
            raise exc.as_instanceof_cause() from None
    return values[0] if single else values
