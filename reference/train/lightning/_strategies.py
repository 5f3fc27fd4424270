"""Lightning strategies and the cluster environment for a Lightning ``Trainer`` inside a
training function, and ``prepare_trainer``, which checks the trainer uses them.

The TorchTrainer has already initialized the torch process group when the training function
runs, and Lightning reuses an initialized group: so a strategy's ``process_group_backend``,
``timeout`` and ``start_method`` have no effect here (set them in ``TorchConfig``). What the
strategies change is where Lightning looks for the device and the sampler arguments: the
train context's device and ranks instead of Lightning's launcher. Nothing reads the context
at construction, so the strategies can be built anywhere; the environment's ranks are read
when Lightning asks (the ``Trainer`` asks while it is being built, so build it in the
training function).
"""

from __future__ import annotations

from typing import Any

import torch

from reference.train.lightning._package import lightning_environment_base, pl


def _context():
    from reference.train import get_context

    return get_context()


class _TrainContextDevices:
    """What every strategy here overrides: the root device and the sampler arguments."""

    @property
    def root_device(self) -> torch.device:
        from reference.train.torch import get_device

        return get_device()

    @property
    def distributed_sampler_kwargs(self) -> dict[str, Any]:
        return {"num_replicas": self.world_size, "rank": self.global_rank}


class RayDDPStrategy(_TrainContextDevices, pl.strategies.DDPStrategy):
    """Lightning's ``DDPStrategy`` (same arguments) on the train context's device and ranks."""


class RayFSDPStrategy(_TrainContextDevices, pl.strategies.FSDPStrategy):
    """Lightning's ``FSDPStrategy`` (same arguments) on the train context's device and ranks
    (Lightning 2.1 or later: sharded checkpoints and FSDP options as Lightning has them)."""


class RayDeepSpeedStrategy(_TrainContextDevices, pl.strategies.DeepSpeedStrategy):
    """Lightning's ``DeepSpeedStrategy`` (same arguments) on the train context's device and
    ranks; needs the ``deepspeed`` package, as its base does."""


class RayLightningEnvironment(lightning_environment_base()):
    """The cluster environment whose ranks and world size are the train context's."""

    def world_size(self) -> int:
        return _context().get_world_size()

    def global_rank(self) -> int:
        return _context().get_world_rank()

    def local_rank(self) -> int:
        return _context().get_local_rank()

    def node_rank(self) -> int:
        return _context().get_node_rank()

    # Lightning writes ranks it computed from its own launcher settings; the context's
    # values are the truth here, so these do nothing.
    def set_world_size(self, size: int) -> None:
        pass

    def set_global_rank(self, rank: int) -> None:
        pass

    def teardown(self) -> None:
        pass


_STRATEGIES = (RayDDPStrategy, RayFSDPStrategy, RayDeepSpeedStrategy)


def prepare_trainer(trainer):
    """Check that a Lightning ``Trainer`` uses one of the strategies above and the
    ``RayLightningEnvironment`` plugin; returns the same trainer, unchanged."""
    if not isinstance(trainer.strategy, _STRATEGIES):
        raise RuntimeError(
            f"Invalid strategy class: {type(trainer.strategy)}. To use PyTorch Lightning with "
            f"Ray, the strategy object should be one of {[c.__name__ for c in _STRATEGIES]} "
            "class or its subclass.")
    environment = getattr(trainer.strategy, "cluster_environment", None)
    if environment and not isinstance(environment, RayLightningEnvironment):
        # The missing space before the backtick is Ray's message, kept as it is.
        raise RuntimeError(
            "Invalid cluster environment plugin. The expected class is"
            "`ray.train.lightning.RayLightningEnvironment` "
            f"but got {type(environment)}!")
    return trainer
