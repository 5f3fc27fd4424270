"""Distributed fit(): wire the controller to storage, policies and the cluster, and build
the Result as the Train API does (latest checkpoint and its rank-0 metrics, best
checkpoints worst to best, their metrics as a DataFrame, rank 0's return value)."""

from __future__ import annotations

import functools
import logging
import uuid

import pyarrow.fs as pafs

import simcluster
from reference.train._internal.console import report_interrupt, run_logging
from reference.train._internal.controller import states as S
from reference.train._internal.controller.controller import (
    Controller,
    collective_warn_interval_s,
)
from reference.train._internal.controller.policies import FailurePolicy, ScalingPolicy
from reference.train._internal.controller.run_context import TrainRunContext, WithRunContext
from reference.train._internal.controller.scaling_check import check_placeable
from reference.train._internal.storage import fs_utils
from reference.train._internal.storage.checkpoint_manager import CheckpointManager
from reference.train._internal.storage.persist import (
    persist_as_checkpoint,
    remove_quietly,
    remove_temporaries,
)
from reference.train._internal.storage.run_lock import (
    acquire_run_lock,
    take_over_requested,
    unlocked_allowed,
)
from reference.train._internal.storage.storage_context import StorageContext

logger = logging.getLogger(__name__)


#: what the reference does with `RunConfig(worker_runtime_env=...)`
RUNTIME_ENV_KEYS = ("env_vars",)


def worker_env_vars(runtime_env) -> dict:
    """The `env_vars` of a worker runtime environment; its other fields (pip, conda,
    working_dir, ...) are Ray's packaging, which simulated nodes sharing this machine's
    interpreter cannot honour: a ValueError names them."""
    if not isinstance(runtime_env, dict):
        raise TypeError(f"RunConfig(worker_runtime_env={runtime_env!r}): expected a dict such "
                        "as {'env_vars': {'NAME': 'value'}}.")
    other = sorted(set(runtime_env) - set(RUNTIME_ENV_KEYS))
    if other:
        raise ValueError(
            f"RunConfig(worker_runtime_env=...): the reference supports only {RUNTIME_ENV_KEYS}"
            f", not {other}; the simulated nodes run this machine's interpreter and files, so "
            "install packages into it instead.")
    env = runtime_env.get("env_vars") or {}
    if not isinstance(env, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                            for k, v in env.items()):
        raise TypeError(f"RunConfig(worker_runtime_env={{'env_vars': {env!r}}}): env_vars must "
                        "map names to string values.")
    return dict(env)


def run_distributed(trainer, train_fn):
    rc = trainer.run_config
    worker_env = worker_env_vars(rc.worker_runtime_env)  # before anything of the run is touched
    try:
        check_placeable(trainer.scaling_config)  # what construction took, as Ray's does
    except ValueError as exc:
        from reference.train._exceptions import ControllerError

        raise ControllerError(exc) from None
    storage = StorageContext(rc.storage_path, rc.name, rc.storage_filesystem)
    # One fit owns a run folder at a time: taken before anything in it is cleaned up or
    # restored, released however the fit ends (storage/run_lock.py).
    lock = acquire_run_lock(storage, take_over=take_over_requested(),
                            allow_unlocked=unlocked_allowed())
    try:
        return _run_owned(trainer, train_fn, storage, worker_env)
    finally:
        lock.release()


def _run_owned(trainer, train_fn, storage, worker_env: dict):
    from reference._runtime import ensure_cluster
    from reference.train._internal.worker_group.simcluster_factory import SimclusterGroupFactory
    from reference.train._internal.worker_group.slices import SliceRequest

    rc, sc = trainer.run_config, trainer.scaling_config
    remove_temporaries(storage)
    manager = CheckpointManager(storage, rc.checkpoint_config)
    # Staging folders carry the temporary prefix, so a crashed run's leftovers are removed
    # when the run is resumed; they are created only after the manager exists.
    staging_prefix = fs_utils.join(storage.experiment_fs_path,
                                   f"{fs_utils.TEMP_PREFIX}stage-{uuid.uuid4().hex[:8]}")

    def commit_round(attempt: int, index: int, dir_name: str | None, metrics):
        return commit_staged(storage, staging_prefix, attempt, index, dir_name)

    backend_config = trainer.backend_config
    backend = backend_config.backend_cls()
    cluster = ensure_cluster(backend.preload_modules)
    validations = make_validations(trainer, cluster, manager)
    run_context = TrainRunContext.of(trainer)
    controller = Controller(
        spec=dict(
            resources_per_worker=sc._resources_per_worker_not_none,
            placement_strategy=sc.placement_strategy,
            experiment_name=rc.name,
            storage=storage,
            staging_prefix=staging_prefix,
            train_fn=simcluster.dumps_by_value(train_fn),
            backend_config=backend_config,
            datasets=dict(trainer.datasets) or None,
            worker_env={**backend.worker_env, **worker_env},
            dataset_config=trainer.dataset_config,
            has_validation_fn=getattr(trainer, "validation_config", None) is not None,
        ),
        factory=SimclusterGroupFactory(cluster, backend, SliceRequest.from_scaling_config(sc)),
        checkpoint_manager=manager,
        failure_policy=FailurePolicy.from_config(rc.failure_config),
        scaling_policy=ScalingPolicy.from_config(sc),
        commit_round=commit_round,
        discard_staging=functools.partial(discard_staged, storage, staging_prefix),
        report_warn_interval_s=collective_warn_interval_s(),
        callbacks=tuple(WithRunContext(cb, run_context) for cb in rc.callbacks or ()),
        validations=validations,
        events=getattr(cluster, "record_event", None),
    )
    with run_logging(rc.logging_config):
        try:
            final = controller.run()
        except KeyboardInterrupt as exc:
            latest = manager.latest_checkpoint
            report_interrupt(exc, (
                f"stopped the run {rc.name!r} and its workers; its state is in "
                f"{storage.experiment_fs_path}"
                + (f" (latest checkpoint: {latest.path})" if latest is not None else
                   " (no checkpoint yet)")
                + "; fit() with the same RunConfig(name, storage_path) resumes it"))
            raise
    if isinstance(final, S.Errored):
        raise final.error
    return build_result(manager, storage, final.return_value)


def make_validations(trainer, cluster, manager):
    """The run's ValidationManager (None without a validation_config); it queues again
    the validations a previous run of this folder left pending."""
    from reference.train._internal.controller.validation import ValidationManager
    from reference.train._internal.worker_group.validation_task import (
        SimclusterValidationLauncher,
    )

    config = getattr(trainer, "validation_config", None)
    if config is None:
        return None
    launcher = SimclusterValidationLauncher(cluster, config.ray_remote_kwargs)
    return ValidationManager(launcher, manager, config)


def commit_staged(storage, prefix: str, attempt: int, index: int, dir_name: str | None):
    """Commit round `index`'s staging folder as a checkpoint. The staging folder is gone
    afterwards, whether the commit worked or raised: a local commit renames it away, while
    filesystems without a directory rename (object stores, moves that copy) leave it to be
    removed here."""
    name = dir_name or storage.make_default_checkpoint_dir_name()
    staged = f"{prefix}-a{attempt}-{index}"
    try:
        return persist_as_checkpoint(storage, [(storage.storage_filesystem, staged)], name,
                                     mode="move")
    finally:
        remove_quietly(storage.storage_filesystem, staged)


def discard_staged(storage, prefix: str, attempt: int) -> None:
    """Remove every staging folder of `attempt` (its group is gone): the rounds that never
    completed, including a round only a rank that then died had staged files for."""
    fs, head = storage.storage_filesystem, f"{prefix.rsplit('/', 1)[-1]}-a{attempt}-"
    selector = pafs.FileSelector(storage.experiment_fs_path, allow_not_found=True)
    for info in fs.get_file_info(selector):
        if info.base_name.startswith(head):
            remove_quietly(fs, info.path)


def build_result(manager, storage, return_value):
    from reference.train._result import FrameRows, Result

    latest = manager.latest_checkpoint_result
    best = manager.best_checkpoints
    return Result(
        metrics=None if latest is None else latest.metrics,
        checkpoint=manager.latest_checkpoint,
        error=None,
        path=storage.experiment_fs_path,
        metrics_dataframe=FrameRows(m for _, m in best) if best else None,
        best_checkpoints=best,
        _storage_filesystem=storage.storage_filesystem,
        return_value=return_value,
    )
