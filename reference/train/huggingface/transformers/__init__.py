"""The reference implementation of ``ray.train.huggingface.transformers``: the report callback
and ``prepare_trainer`` for a ``transformers.Trainer`` run inside a ``TorchTrainer`` training
function. Importable without ``transformers``; ``prepare_trainer`` then raises its ImportError.
"""

from reference.train.huggingface.transformers._transformers_utils import (
    RayTrainReportCallback,
    prepare_trainer,
)

__all__ = [
    "RayTrainReportCallback",
    "prepare_trainer",
]
