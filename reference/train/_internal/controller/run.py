"""Distributed fit(): wire the controller to storage, policies and the cluster, and build
the Result as the Train API does (latest checkpoint and its rank-0 metrics, best
checkpoints worst to best, their metrics as a DataFrame, rank 0's return value)."""

from __future__ import annotations

import uuid

import cloudpickle

from reference.train._internal.controller import states as S
from reference.train._internal.controller.controller import Controller
from reference.train._internal.controller.policies import FailurePolicy, ScalingPolicy
from reference.train._internal.storage import fs_utils
from reference.train._internal.storage.checkpoint_manager import CheckpointManager
from reference.train._internal.storage.persist import persist_as_checkpoint, remove_temporaries
from reference.train._internal.storage.storage_context import StorageContext


def run_distributed(trainer, train_fn):
    from reference._runtime import ensure_cluster
    from reference.train._internal.worker_group.simcluster_group import SimclusterGroupFactory

    rc, sc = trainer.run_config, trainer.scaling_config
    storage = StorageContext(rc.storage_path, rc.name, rc.storage_filesystem)
    remove_temporaries(storage)
    manager = CheckpointManager(storage, rc.checkpoint_config)
    # Staging folders carry the temporary prefix, so a crashed run's leftovers are removed
    # when the run is resumed; they are created only after the manager exists.
    staging_prefix = fs_utils.join(storage.experiment_fs_path,
                                   f"{fs_utils.TEMP_PREFIX}stage-{uuid.uuid4().hex[:8]}")

    def commit_round(attempt: int, index: int, dir_name: str | None, metrics):
        name = dir_name or storage.make_default_checkpoint_dir_name()
        staged = (storage.storage_filesystem, f"{staging_prefix}-a{attempt}-{index}")
        return persist_as_checkpoint(storage, [staged], name, mode="move")

    backend_config = trainer.backend_config
    backend = backend_config.backend_cls()
    controller = Controller(
        spec=dict(
            resources_per_worker=sc._resources_per_worker_not_none,
            placement_strategy=sc.placement_strategy,
            experiment_name=rc.name,
            storage=storage,
            staging_prefix=staging_prefix,
            train_fn=cloudpickle.dumps(train_fn),
            backend_config=backend_config,
        ),
        factory=SimclusterGroupFactory(ensure_cluster(backend.preload_modules), backend),
        checkpoint_manager=manager,
        failure_policy=FailurePolicy.from_config(rc.failure_config),
        scaling_policy=ScalingPolicy.from_config(sc),
        commit_round=commit_round,
        callbacks=tuple(rc.callbacks or ()),
    )
    final = controller.run()
    if isinstance(final, S.Errored):
        raise final.error
    return build_result(manager, storage, final.return_value)


def build_result(manager, storage, return_value):
    import pandas as pd

    from reference.train._result import Result

    latest = manager.latest_checkpoint_result
    best = manager.best_checkpoints
    return Result(
        metrics=None if latest is None else latest.metrics,
        checkpoint=manager.latest_checkpoint,
        error=None,
        path=storage.experiment_fs_path,
        metrics_dataframe=pd.DataFrame([m for _, m in best]) if best else None,
        best_checkpoints=best,
        _storage_filesystem=storage.storage_filesystem,
        return_value=return_value,
    )
