"""The reference implementation of the ``ray.train`` namespace.

Public names are defined in ``_``-prefixed modules and re-exported here; ``__all__`` lists
exactly the public names of this package, which are Ray 2.60's ``ray.train.__all__`` (Train
V2) plus one extension: ``DataParallelTrainer``, the base trainer, which Ray keeps at
``ray.train.v2.api.data_parallel_trainer`` (also importable from there, as
``reference.train.v2.api.data_parallel_trainer``). tests/reference/train/
test_train_public_surface.py checks both against Ray.
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
from reference.train._legacy import TRAIN_DATASET_KEY, SyncConfig
from reference.train._preemption import PreemptionInfo
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
    get_preemption_info,
    report,
)
from reference.train._trainer import DataParallelTrainer
from reference.train._validation_config import (
    ValidationConfig,
    ValidationFn,
    ValidationTaskConfig,
)
from reference.train.backend import BackendConfig

__all__ = [
    "BackendConfig",
    "DataConfig",
    # A reference extension: not in ray.train.__all__ (see the docstring).
    "DataParallelTrainer",
    "TrainContext",
    "TRAIN_DATASET_KEY",
    "get_all_reported_checkpoints",
    "get_checkpoint",
    "get_context",
    "get_dataset_shard",
    "get_preemption_info",
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
    "PreemptionInfo",
    "ReportedCheckpoint",
    "ReportedCheckpointStatus",
    "Result",
    "RunConfig",
    "ScalingConfig",
    "SyncConfig",
    "TrainingFailedError",
    "UserCallback",
    "ValidationConfig",
    "ValidationFn",
    "ValidationTaskConfig",
    "WorkerGroupError",
]
