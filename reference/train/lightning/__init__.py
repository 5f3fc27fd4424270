"""The reference implementation of ``ray.train.lightning``: Lightning strategies, the cluster
environment, the report callback and ``prepare_trainer`` for a Lightning ``Trainer`` run
inside a ``TorchTrainer`` training function.

Importable when either ``lightning`` or ``pytorch_lightning`` is installed; the classes
subclass ``lightning.pytorch`` when it is importable (also when both are installed), else
``pytorch_lightning`` (see ``_package.py``).
"""

try:
    import lightning  # noqa: F401
except ModuleNotFoundError:
    try:
        import pytorch_lightning  # noqa: F401
    except ModuleNotFoundError:
        # Chained implicitly, as Ray's is: the traceback shows pytorch_lightning's failure.
        raise ModuleNotFoundError(  # noqa: B904
            "PyTorch Lightning isn't installed. To install PyTorch Lightning, "
            "please run 'pip install lightning'")

from reference.train.lightning._report_callback import RayTrainReportCallback
from reference.train.lightning._strategies import (
    RayDDPStrategy,
    RayDeepSpeedStrategy,
    RayFSDPStrategy,
    RayLightningEnvironment,
    prepare_trainer,
)

__all__ = [
    "prepare_trainer",
    "RayDDPStrategy",
    "RayFSDPStrategy",
    "RayDeepSpeedStrategy",
    "RayLightningEnvironment",
    "RayTrainReportCallback",
]
