"""The reference implementation of the ``ray.train`` namespace.

Public names are defined in ``_``-prefixed modules and re-exported here; ``__all__`` lists
exactly the public names of this package (a test keeps the two in step).
"""

from reference.train._callback import UserCallback
from reference.train._checkpoint import Checkpoint
from reference.train._config import (
    CheckpointConfig,
    FailureConfig,
    LoggingConfig,
    RunConfig,
    ScalingConfig,
)
from reference.train._exceptions import (
    ControllerError,
    NCCLHangError,
    PreemptionError,
    TrainingFailedError,
    WorkerGroupError,
)
from reference.train._report_config import CheckpointConsistencyMode, CheckpointUploadMode
from reference.train._result import Result

__all__ = [
    "Checkpoint",
    "CheckpointConfig",
    "CheckpointConsistencyMode",
    "CheckpointUploadMode",
    "ControllerError",
    "FailureConfig",
    "LoggingConfig",
    "NCCLHangError",
    "PreemptionError",
    "Result",
    "RunConfig",
    "ScalingConfig",
    "TrainingFailedError",
    "UserCallback",
    "WorkerGroupError",
]

# Ray's public classes report `ray.train` as their module; ours report `reference.train`,
# so reprs, pickles and error messages name the namespace users import from.
for _name in __all__:
    if isinstance(globals()[_name], type):
        globals()[_name].__module__ = __name__
del _name
