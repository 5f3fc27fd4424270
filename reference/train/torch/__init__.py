"""The reference implementation of ``ray.train.torch``: TorchTrainer, TorchConfig and the
utilities a PyTorch training function calls."""

try:
    import torch  # noqa: F401
except ModuleNotFoundError:
    raise ModuleNotFoundError(
        "PyTorch isn't installed. To install PyTorch, run 'pip install torch'") from None

from reference.train.torch._config import TorchConfig
from reference.train.torch._torch_checkpoint import TorchCheckpoint
from reference.train.torch._train_loop_utils import (
    accelerate,
    backward,
    enable_reproducibility,
    get_device,
    get_devices,
    prepare_data_loader,
    prepare_model,
    prepare_optimizer,
)
from reference.train.torch._trainer import TorchTrainer

__all__ = [
    "TorchCheckpoint",
    "TorchConfig",
    "TorchTrainer",
    "accelerate",
    "backward",
    "enable_reproducibility",
    "get_device",
    "get_devices",
    "prepare_data_loader",
    "prepare_model",
    "prepare_optimizer",
]
