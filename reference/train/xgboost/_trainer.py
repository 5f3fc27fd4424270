"""XGBoostTrainer: a DataParallelTrainer whose workers form one xgboost collective."""

from __future__ import annotations

from typing import Any, Callable, Optional, Union

from reference.train._internal import gbdt
from reference.train._trainer import DataParallelTrainer


class XGBoostTrainer(DataParallelTrainer):
    """Runs `train_loop_per_worker` on every worker inside an xgboost collective (see
    `XGBoostConfig`); the function calls ``xgboost.train`` on its shard of the data with
    `RayTrainReportCallback` to report. The legacy arguments (`label_column`, `params`,
    `num_boost_round`) raise DeprecationWarning, as in Ray."""

    def __init__(
        self,
        train_loop_per_worker: Union[Callable[[], Any], Callable[[dict], Any]],
        *,
        train_loop_config: Optional[dict] = None,
        xgboost_config=None,
        scaling_config=None,
        run_config=None,
        datasets: Optional[dict] = None,
        dataset_config=None,
        validation_config=None,
        metadata: Optional[dict] = None,
        resume_from_checkpoint=None,
        label_column: Optional[str] = None,
        params: Optional[dict] = None,
        num_boost_round: Optional[int] = None,
    ):
        gbdt.reject_legacy_arguments("XGBoostTrainer", label_column, params, num_boost_round)
        from reference.train.xgboost._config import XGBoostConfig

        super().__init__(
            train_loop_per_worker, train_loop_config=train_loop_config,
            backend_config=xgboost_config or XGBoostConfig(), scaling_config=scaling_config,
            run_config=run_config, datasets=datasets, dataset_config=dataset_config,
            resume_from_checkpoint=resume_from_checkpoint, metadata=metadata,
            validation_config=validation_config)

    @classmethod
    def get_model(cls, checkpoint):
        """[Deprecated] Use `RayTrainReportCallback.get_model`."""
        gbdt.deprecated_get_model("XGBoostTrainer")
