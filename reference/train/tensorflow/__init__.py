"""The reference implementation of ``ray.train.tensorflow``: TensorflowTrainer,
TensorflowConfig, TensorflowCheckpoint and prepare_dataset_shard; the Keras callback is in
``reference.train.tensorflow.keras``, as Ray's is.

As in Ray, importing this package imports tensorflow (and fails with Ray's message without
it). The workers' Keras is tf-keras: the backend sets ``TF_USE_LEGACY_KERAS=1`` on every
worker, and the node supervisors import TensorFlow only after setting it
(``reference.train._internal.legacy_keras``), so ``tf.keras`` and ``tensorflow.keras``
name the same package in a worker. See docs/frameworks.md ("TensorFlow and Keras").
"""

try:
    import tensorflow as _tf  # noqa: F401
except ModuleNotFoundError:
    raise ModuleNotFoundError(
        "TensorFlow isn't installed. To install TensorFlow, run 'pip install tensorflow'."
    ) from None

from reference.train.tensorflow._checkpoint import TensorflowCheckpoint
from reference.train.tensorflow._config import TensorflowConfig
from reference.train.tensorflow._train_loop_utils import prepare_dataset_shard
from reference.train.tensorflow._trainer import TensorflowTrainer

__all__ = [
    "TensorflowCheckpoint",
    "TensorflowConfig",
    "prepare_dataset_shard",
    "TensorflowTrainer",
]
