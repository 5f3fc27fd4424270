"""The errors `reference.get` raises (``ray.exceptions``' names for the same cases).

- `RayTaskError`: a function run on a worker (`worker_group.execute...`) raised. The instance
  raised is also an instance of the original exception's class where Python allows it (as
  in Ray), so `except ValueError` still catches a worker's ValueError; `cause` holds the
  original, `rank` the worker, and the message ends with the worker's traceback.
- `RayActorError`: the worker died (or was stopped) before the function returned.
- `GetTimeoutError`: `get(..., timeout=s)` ran out of time (also a TimeoutError).
"""

from __future__ import annotations


class RayError(Exception):
    """Base of the errors `reference.get` raises."""


class RayTaskError(RayError):
    def __init__(self, cause: BaseException, rank: int | None = None,
                 remote_traceback: str = ""):
        self.cause, self.rank, self.remote_traceback = cause, rank, remote_traceback
        where = "a worker" if rank is None else f"the worker of rank {rank}"
        text = f"{type(cause).__name__}: {cause} (raised on {where})"
        if remote_traceback:
            text += f"\n{remote_traceback.rstrip()}"
        RayError.__init__(self, text)

    def __str__(self) -> str:
        return self.args[0] if self.args else ""

    def __reduce__(self):
        return (RayTaskError, (self.cause, self.rank, self.remote_traceback))

    def as_instanceof_cause(self) -> RayTaskError:
        """This error as an instance of both RayTaskError and the cause's class, when the
        two classes can be combined (else this error unchanged)."""
        cause_cls = type(self.cause)
        if isinstance(self.cause, RayTaskError) or not issubclass(cause_cls, Exception):
            return self
        try:
            dual = type(f"RayTaskError({cause_cls.__name__})", (RayTaskError, cause_cls),
                        {"__init__": RayTaskError.__init__, "__str__": RayTaskError.__str__,
                         "__module__": __name__})
            return dual(self.cause, self.rank, self.remote_traceback)
        except TypeError:  # an incompatible instance layout
            return self


class RayActorError(RayError):
    """The worker is gone: it died or was stopped before it answered."""


class GetTimeoutError(RayError, TimeoutError):
    """`get(..., timeout=...)` ran out of time."""


__all__ = ["GetTimeoutError", "RayActorError", "RayError", "RayTaskError"]
