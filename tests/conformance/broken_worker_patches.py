"""Patches of the broken variants whose rule lives in the workers (see broken_variants.py).

Imported in the driver and, listed in `reference.PRELOAD`, in the node supervisors the
workers fork from; `TRAINSPEC_BROKEN_VARIANT` names the patch. Importing it applies the
patch (a supervisor only imports), and `apply()` does it again harmlessly.
"""

from __future__ import annotations

import os


def lightning_full_data_per_rank() -> None:
    from reference.train.lightning import _strategies

    _strategies._TrainContextDevices.distributed_sampler_kwargs = property(
        lambda self: {"num_replicas": 1, "rank": 0})


def lightning_checkpoint_name() -> None:
    from reference.train.lightning import RayTrainReportCallback

    RayTrainReportCallback.CHECKPOINT_NAME = "model.ckpt"


def transformers_last_log_only() -> None:
    from reference.train.huggingface.transformers import RayTrainReportCallback

    original = RayTrainReportCallback.on_save

    def on_save(self, args, state, control, **kwargs):
        kept = state.log_history
        state.log_history = kept[-1:]
        try:
            return original(self, args, state, control, **kwargs)
        finally:
            state.log_history = kept

    RayTrainReportCallback.on_save = on_save


def data_no_shard_barrier() -> None:
    from reference.train._internal.worker_group import worker

    def get_dataset_shard(self, name):
        if name not in self.shards:
            raise KeyError(f"Dataset shard for '{name}' not found. Please ensure that the "
                           "dataset is passed through the Trainer `datasets` argument.")
        return self.shards[name]  # no rank waits for rank 0

    worker.WorkerSession.get_dataset_shard = get_dataset_shard


PATCHES = {f.__name__: f for f in (lightning_full_data_per_rank, lightning_checkpoint_name,
                                   transformers_last_log_only, data_no_shard_barrier)}
_applied: set[str] = set()


def apply() -> None:
    name = os.environ.get("TRAINSPEC_BROKEN_VARIANT", "")
    if name in PATCHES and name not in _applied:
        PATCHES[name]()
        _applied.add(name)


apply()
