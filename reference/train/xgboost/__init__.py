"""The reference implementation of ``ray.train.xgboost``: XGBoostTrainer, XGBoostConfig and
RayTrainReportCallback. Workers train together through ``xgboost.collective`` with a
tracker the driver starts for each worker group; xgboost's rank is the Train world rank.

``XGBoostCheckpoint`` is Ray's V1 framework checkpoint, kept because Ray 2.60 exports it:
building one warns (RayDeprecationWarning). Train V2 reports plain ``Checkpoint`` folders,
which `RayTrainReportCallback.get_model` reads.
"""

try:
    import xgboost  # noqa: F401
except ModuleNotFoundError:
    raise ModuleNotFoundError(
        "XGBoost isn't installed. To install XGBoost, run 'pip install xgboost'") from None

from reference.train.xgboost._callback import RayTrainReportCallback
from reference.train.xgboost._checkpoint import XGBoostCheckpoint
from reference.train.xgboost._config import XGBoostConfig
from reference.train.xgboost._trainer import XGBoostTrainer

__all__ = ["RayTrainReportCallback", "XGBoostCheckpoint", "XGBoostConfig", "XGBoostTrainer"]
