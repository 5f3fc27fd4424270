"""``ray.train.v2.api.data_parallel_trainer.DataParallelTrainer``, Ray's path to the V2 base
trainer (``ray.train`` does not export it). The reference also exports it as
``reference.train.DataParallelTrainer``, a documented extension."""

from reference.train._trainer import DataParallelTrainer

__all__ = ["DataParallelTrainer"]
