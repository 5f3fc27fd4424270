"""HorovodTrainer: deprecated in Train V2, where building one always raises."""

from __future__ import annotations

from typing import Any, Callable, Optional, Union

from reference.train._trainer import DataParallelTrainer
from reference.train.horovod._config import HorovodConfig


class HorovodTrainer(DataParallelTrainer):
    """Ray's V2 ``HorovodTrainer``: V1's keyword arguments, and a ``DeprecationWarning``
    raised (not warned) by ``__init__``, Ray's text unchanged. The reference has no
    ``RAY_TRAIN_V2_ENABLED=0`` fallback the message mentions: use ``TorchTrainer``."""

    def __init__(
        self,
        train_loop_per_worker: Union[Callable[[], None], Callable[[dict], None]],
        *,
        train_loop_config: Optional[dict] = None,
        horovod_config: Optional[HorovodConfig] = None,
        scaling_config=None,
        dataset_config=None,
        run_config=None,
        datasets: Optional[dict] = None,
        metadata: Optional[dict[str, Any]] = None,
        resume_from_checkpoint=None,
    ):
        raise DeprecationWarning(
            "`HorovodTrainer` is not supported and is scheduled to be removed in the future. "
            "Please consider using `TorchTrainer` or `TensorflowTrainer`, fall back to the "
            "old implementation with `RAY_TRAIN_V2_ENABLED=0`, or file an issue on Github "
            "describing your use case.")
