"""TensorflowTrainer: a DataParallelTrainer whose workers get TF_CONFIG (Ray's V2 class)."""

from __future__ import annotations

from typing import Any, Callable, Optional, Union

from reference.train._trainer import DataParallelTrainer
from reference.train.tensorflow._config import TensorflowConfig


class TensorflowTrainer(DataParallelTrainer):
    """Runs `train_loop_per_worker` on every worker after the TensorFlow backend has given
    each one its `TF_CONFIG` (default `TensorflowConfig()`); build the model inside
    ``tf.distribute.MultiWorkerMirroredStrategy().scope()`` to train one model across them.

    `metadata` and `resume_from_checkpoint` are accepted and raise DeprecationWarning when
    given, as in Ray's V2 trainer. Local mode (`num_workers=0`) runs the function in this
    process without TF_CONFIG."""

    def __init__(
        self,
        train_loop_per_worker: Union[Callable[[], Any], Callable[[dict], Any]],
        *,
        train_loop_config: Optional[dict] = None,
        tensorflow_config: Optional[TensorflowConfig] = None,
        scaling_config=None,
        dataset_config=None,
        run_config=None,
        datasets: Optional[dict] = None,
        validation_config=None,
        metadata: Optional[dict] = None,
        resume_from_checkpoint=None,
    ):
        super().__init__(
            train_loop_per_worker, train_loop_config=train_loop_config,
            backend_config=tensorflow_config or TensorflowConfig(),
            scaling_config=scaling_config, dataset_config=dataset_config, run_config=run_config,
            datasets=datasets, validation_config=validation_config, metadata=metadata,
            resume_from_checkpoint=resume_from_checkpoint)
