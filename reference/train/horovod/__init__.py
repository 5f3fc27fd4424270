"""The reference implementation of ``ray.train.horovod`` as Ray 2.60 ships it under Train V2:
a module that needs ``horovod`` installed to import, and a ``HorovodTrainer`` that cannot be
built. Use ``TorchTrainer`` (``reference.train.torch``) or ``TensorflowTrainer``
(``reference.train.tensorflow``) instead; see docs/frameworks.md, "Horovod".
"""

try:
    import horovod  # noqa: F401
except ModuleNotFoundError:
    raise ModuleNotFoundError(
        "Horovod isn't installed. To install Horovod with PyTorch support, run 'pip "
        "install 'horovod[pytorch]''. To install Horovod with TensorFlow support, "
        "run 'pip install 'horovod[tensorflow]''.") from None

from reference.train.horovod._config import HorovodConfig
from reference.train.horovod._trainer import HorovodTrainer

__all__ = ["HorovodConfig", "HorovodTrainer"]
