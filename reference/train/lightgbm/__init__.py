"""The reference implementation of ``ray.train.lightgbm``: LightGBMTrainer, LightGBMConfig,
get_network_params, RayTrainReportCallback and normalize_pandas_for_lightgbm. LightGBM
trains over its own sockets between the workers; the backend gives every worker the
machine list and its own port, which the training function merges into its params.

``LightGBMCheckpoint`` is Ray's V1 framework checkpoint, kept because Ray 2.60 exports it:
building one warns (RayDeprecationWarning). Train V2 reports plain ``Checkpoint`` folders,
which `RayTrainReportCallback.get_model` reads.
"""

try:
    import lightgbm  # noqa: F401
except ModuleNotFoundError:
    raise ModuleNotFoundError(
        "LightGBM isn't installed. To install LightGBM, run 'pip install lightgbm'") from None

from reference.train.lightgbm._callback import (
    RayTrainReportCallback,
    normalize_pandas_for_lightgbm,
)
from reference.train.lightgbm._checkpoint import LightGBMCheckpoint
from reference.train.lightgbm._config import LightGBMConfig, get_network_params
from reference.train.lightgbm._trainer import LightGBMTrainer

__all__ = ["LightGBMCheckpoint", "LightGBMConfig", "LightGBMTrainer", "RayTrainReportCallback", "get_network_params",
           "normalize_pandas_for_lightgbm"]
