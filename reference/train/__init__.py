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
from reference.train._context import TrainContext
from reference.train._data_config import DataConfig
from reference.train._exceptions import (
    ControllerError,
    NCCLHangError,
    PreemptionError,
    TrainingFailedError,
    WorkerGroupError,
)
from reference.train._report_config import (
    CheckpointConsistencyMode,
    CheckpointUploadMode,
    ReportedCheckpoint,
    ReportedCheckpointStatus,
)
from reference.train._result import Result
from reference.train._train_fn_utils import (
    get_all_reported_checkpoints,
    get_checkpoint,
    get_context,
    get_dataset_shard,
    report,
)
from reference.train._trainer import DataParallelTrainer
from reference.train.backend import BackendConfig

__all__ = [
    "BackendConfig",
    "DataConfig",
    "DataParallelTrainer",
    "TrainContext",
    "get_all_reported_checkpoints",
    "get_checkpoint",
    "get_context",
    "get_dataset_shard",
    "report",
    "Checkpoint",
    "CheckpointConfig",
    "CheckpointConsistencyMode",
    "CheckpointUploadMode",
    "ControllerError",
    "FailureConfig",
    "LoggingConfig",
    "NCCLHangError",
    "PreemptionError",
    "ReportedCheckpoint",
    "ReportedCheckpointStatus",
    "Result",
    "RunConfig",
    "ScalingConfig",
    "TrainingFailedError",
    "UserCallback",
    "WorkerGroupError",
]
