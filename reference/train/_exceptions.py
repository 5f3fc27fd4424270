"""The errors a training run reports to the driver.

::

    Exception
     +-- RayTrainError              base of every error the train library raises itself
          +-- TrainingFailedError   raised by fit() when the run fails
               +-- WorkerGroupError   raised when training workers failed (exception or death)
               |    +-- NCCLHangError   raised when a collective hang was detected on the workers
               +-- ControllerError    raised when the driver-side controller failed
               +-- PreemptionError    raised when nodes of the run were preempted
          +-- RunFolderInUseError   raised by fit() when another fit owns its run folder
          +-- RunFolderLockError    raised by fit() when its run folder's lock could not be taken

fit() raises, it never returns, a TrainingFailedError once training has started;
RunFolderInUseError and RunFolderLockError come before anything starts (the reference's
own: Ray has no such check). Every class pickles with the same constructor arguments, so an
error can cross a process boundary and keep its payload (`worker_failures`, `controller_failure`,
`preemption_info`, `owner`).
"""

from typing import Any


class RayTrainError(Exception):
    """Raised as the common base of the library's own errors; catch it to catch all of them."""


class TrainingFailedError(RayTrainError):
    """Raised by ``fit()`` when training fails: a WorkerGroupError or a ControllerError."""


class WorkerGroupError(TrainingFailedError):
    """Raised when one or more training workers failed.

    Args:
        error_message: A readable summary of the worker failures.
        worker_failures: World rank -> the exception that rank failed with.
    """

    def __init__(self, error_message: str, worker_failures: dict[int, Exception]):
        super().__init__("Training failed due to worker errors:\n" + error_message)
        self._error_message = error_message
        self.worker_failures = worker_failures

    def __reduce__(self):
        # Exception pickles `self.args` (the prefixed string) by default, which would
        # both lose worker_failures and call __init__ with the wrong arguments.
        return (self.__class__, (self._error_message, self.worker_failures))


class NCCLHangError(WorkerGroupError):
    """Raised when the workers' collective communication was detected to hang."""


class ControllerError(TrainingFailedError):
    """Raised when the run failed in the controller (scheduling, storage, a callback...).

    Args:
        controller_failure: The exception the controller failed with.
    """

    def __init__(self, controller_failure: Exception):
        super().__init__("Training failed due to controller error:\n" + str(controller_failure))
        self.controller_failure = controller_failure
        # Point the traceback at where the controller failed, not where it was wrapped.
        self.with_traceback(controller_failure.__traceback__)

    def __reduce__(self):
        return (self.__class__, (self.controller_failure,))


class PreemptionError(TrainingFailedError):
    """Raised when the run was interrupted because nodes it used were preempted.

    It is separate from WorkerGroupError so that preemptions are charged to
    ``FailureConfig.max_preemption_failures`` instead of ``max_failures``.

    Args:
        preemption_info: What was preempted; must have a ``preempted_ranks`` attribute.
        drain_timed_out: True when the workers were torn down at the preemption deadline,
            False when they had all exited by themselves.
    """

    def __init__(self, preemption_info: Any, drain_timed_out: bool = False):
        self.preemption_info = preemption_info
        self.drain_timed_out = drain_timed_out
        super().__init__(
            "Training was interrupted by node preemption "
            f"(preempted_ranks={preemption_info.preempted_ranks}, "
            f"drain_timed_out={drain_timed_out})."
        )

    def __reduce__(self):
        return (self.__class__, (self.preemption_info, self.drain_timed_out))


class RunFolderInUseError(RayTrainError):
    """Raised by fit() when another fit owns ``<storage_path>/<name>``, before anything in
    that folder is read or changed.

    Args:
        message: What collided with what, and how to go on.
        run_path: The run folder (a path on its storage filesystem).
        owner: The owner's record (host, pid, start time), or None when it could not be read.
    """

    def __init__(self, message: str, run_path: str = "", owner: Any = None):
        super().__init__(message)
        self.run_path = run_path
        self.owner = owner

    def __reduce__(self):
        return (self.__class__, (str(self), self.run_path, self.owner))


class RunFolderLockError(RayTrainError):
    """Raised by fit() when the lock of ``<storage_path>/<name>`` could not be taken because
    the storage refused or failed the request (denied, unavailable), before anything in the
    folder is read or changed: a fit never runs unlocked unless asked to.

    Args:
        message: What was refused, by whom, and how to go on.
        run_path: The run folder (a path on its storage filesystem).
    """

    def __init__(self, message: str, run_path: str = ""):
        super().__init__(message)
        self.run_path = run_path

    def __reduce__(self):
        return (self.__class__, (str(self), self.run_path))
