"""JaxTrainer: a DataParallelTrainer whose workers run one SPMD JAX program."""

from __future__ import annotations

from typing import Any, Callable, Optional, Union

from reference.train._trainer import DataParallelTrainer
from reference.train.v2.jax._config import JaxConfig


class JaxTrainer(DataParallelTrainer):
    """Runs `train_loop_per_worker` on every worker; with `JaxConfig(use_gpu=True)` or
    `use_tpu=True` the workers are joined by ``jax.distributed`` first (see JaxConfig).
    Without a `jax_config`, it follows the ScalingConfig's `use_tpu` / `use_gpu`, so a
    ScalingConfig is required then (Ray raises AttributeError without one; so does this)."""

    def __init__(
        self,
        train_loop_per_worker: Union[Callable[[], Any], Callable[[dict], Any]],
        *,
        train_loop_config: Optional[dict] = None,
        jax_config: Optional[JaxConfig] = None,
        scaling_config=None,
        dataset_config=None,
        run_config=None,
        datasets: Optional[dict] = None,
        validation_config=None,
    ):
        if not jax_config:
            if scaling_config is None:
                raise AttributeError(
                    "JaxTrainer(scaling_config=None): without a jax_config the trainer reads "
                    "use_tpu and use_gpu from the ScalingConfig ('NoneType' object has no "
                    "attribute 'use_tpu'); pass scaling_config=ScalingConfig(num_workers=...)"
                    " or jax_config=JaxConfig(...).")
            jax_config = JaxConfig(use_tpu=scaling_config.use_tpu,
                                   use_gpu=scaling_config.use_gpu)
        super().__init__(
            train_loop_per_worker, train_loop_config=train_loop_config, backend_config=jax_config,
            scaling_config=scaling_config, dataset_config=dataset_config, run_config=run_config,
            datasets=datasets, validation_config=validation_config)
