"""TorchTrainer: a DataParallelTrainer whose workers share a torch.distributed group."""

from __future__ import annotations

from typing import Any, Callable, Optional, Union

from reference.train._trainer import DataParallelTrainer
from reference.train.torch._config import TorchConfig, torchrun_context, under_torchrun


class TorchTrainer(DataParallelTrainer):
    """Runs `train_loop_per_worker` on every worker after setting up the process group
    `torch_config` describes (default: nccl with GPUs, tpu_dist with TPUs, else gloo).

    As in Ray, the backend chosen for `torch_config.backend=None` is written into the
    `torch_config` object passed in.

    Local mode (`ScalingConfig(num_workers=0)`) runs the function in this process; launched
    by torchrun, it joins torchrun's process group and destroys it when the function ends.
    """

    def __init__(
        self,
        train_loop_per_worker: Union[Callable[[], Any], Callable[[dict], Any]],
        *,
        train_loop_config: Optional[dict] = None,
        torch_config: Optional[TorchConfig] = None,
        scaling_config=None,
        run_config=None,
        datasets: Optional[dict] = None,
        dataset_config=None,
        validation_config=None,
        metadata: Optional[dict] = None,
        resume_from_checkpoint=None,
    ):
        torch_config = torch_config or TorchConfig()
        if not torch_config.backend:
            if scaling_config is not None and getattr(scaling_config, "use_tpu", False):
                torch_config.backend = "tpu_dist"
            elif scaling_config is not None and scaling_config.use_gpu:
                torch_config.backend = "nccl"
            else:
                torch_config.backend = "gloo"
        self._joined_torchrun = self._ran_local = False
        super().__init__(
            train_loop_per_worker,
            train_loop_config=train_loop_config,
            backend_config=torch_config,
            scaling_config=scaling_config,
            run_config=run_config,
            datasets=datasets,
            dataset_config=dataset_config,
            resume_from_checkpoint=resume_from_checkpoint,
            metadata=metadata,
            validation_config=validation_config,
        )

    def _local_context(self):
        context = torchrun_context(self.run_config.name) or super()._local_context()
        # Set only after the join succeeded: the join refuses a group that already
        # exists, and a group the caller created is not ours to destroy.
        self._joined_torchrun = under_torchrun()
        self._ran_local = True
        if context.world_size != 1:
            assert not self.datasets, (
                "Ray Data is not supported in local mode with multiple workers.")
        return context

    @staticmethod
    def _torchrun_group_exists() -> bool:
        import torch.distributed as dist

        return dist.is_available() and dist.is_initialized()

    def fit(self):
        self._joined_torchrun = self._ran_local = False
        try:
            result = super().fit()
            # As Ray's local-mode torch controller does after a successful run: a group the
            # training function left behind (Lightning's DDP makes a one-process group in the
            # driver) is destroyed, so a later local fit in this process starts clean.
            if self._ran_local and self._torchrun_group_exists():
                import torch.distributed as dist

                dist.destroy_process_group()
            return result
        finally:
            # Ray destroys the group only after a successful run; destroying it after a
            # failure too lets the same process run fit() again.
            if self._joined_torchrun and self._torchrun_group_exists():
                import torch.distributed as dist

                dist.destroy_process_group()
            self._joined_torchrun = False
