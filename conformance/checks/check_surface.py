"""The rest of `ray.train`'s public surface (clauses `surface.*`): the V2 names beside the
core ones, the collectives, the deprecated V1 names, and config errors that start with Ray's
own words (so `pytest.raises(match=...)` written against Ray matches).

The fits here are few and tiny: one local-mode fit and one two-worker fit.
"""

from __future__ import annotations

import importlib
import os
import re
import warnings

import pytest

from conformance import assertions
from conformance.catalogue import clause
from conformance.scenarios import TrainerFactory, workspace

NEW_NAMES = ("SyncConfig", "TRAIN_DATASET_KEY", "ValidationConfig", "ValidationTaskConfig",
             "ValidationFn", "ReportedCheckpoint", "ReportedCheckpointStatus", "PreemptionInfo",
             "get_preemption_info")


def _collective(impl):
    return importlib.import_module(f"{impl.train.__name__}.collective")


# ------------------------------------------------------------------ training functions

def local_surface(config: dict):
    """Local mode: what the collectives and get_preemption_info return in the driver."""
    train = importlib.import_module(config["root"])
    collective = importlib.import_module(config["root"] + ".collective")
    return {"barrier": collective.barrier(),
            "broadcast": collective.broadcast_from_rank_zero({"x": [1, 2]}),
            "large": len(collective.broadcast_from_rank_zero("y" * 2000)),
            "preemption": train.get_preemption_info()}


def broadcast_views(config: dict):
    """Each rank broadcasts its own rank (and a large value); each must see rank 0's."""
    train = importlib.import_module(config["root"])
    collective = importlib.import_module(config["root"] + ".collective")
    rank = train.get_context().get_world_rank()
    small = collective.broadcast_from_rank_zero({"rank": rank})
    large = collective.broadcast_from_rank_zero(f"{rank}:" + "z" * 2000)
    passed = collective.barrier()
    info = train.get_preemption_info()
    if small != {"rank": 0} or not large.startswith("0:") or passed is not None or info:
        raise AssertionError(f"rank {rank} saw broadcast={small!r}, large={large[:4]!r}..., "
                             f"barrier={passed!r}, get_preemption_info()={info!r}")
    return {"small": small, "large": large[:2], "barrier": passed, "preemption": info}


# ------------------------------------------------------------------ API-only clauses

@clause("surface.names")
def check_new_names_are_exported(impl):
    t = impl.train
    missing = [n for n in NEW_NAMES if n not in t.__all__ or not hasattr(t, n)]
    assertions.equal(missing, [], f"names missing from {t.__name__}.__all__", impl.name)
    assertions.equal(t.TRAIN_DATASET_KEY, "train", "TRAIN_DATASET_KEY", impl.name)
    assertions.equal([s.name for s in t.ReportedCheckpointStatus],
                     ["COMMITTED", "PENDING_VALIDATION", "VALIDATED", "VALIDATION_TIMEOUT",
                      "VALIDATION_FAILED"], "ReportedCheckpointStatus members", impl.name)
    c = _collective(impl)
    assertions.equal(sorted(c.__all__), ["barrier", "broadcast_from_rank_zero"],
                     f"{c.__name__}.__all__", impl.name)


@clause("surface.sync-config")
def check_sync_config(impl):
    t = impl.train
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # building one is fine: no warning
        config = t.SyncConfig()
    assertions.equal((config.sync_period, config.sync_timeout, config.sync_artifacts,
                      config.sync_artifacts_on_checkpoint), (300, 1800, False, True),
                     "SyncConfig() fields", "SyncConfig()")
    with pytest.raises(DeprecationWarning, match=r"^`RunConfig\(sync_config\)` is deprecated"):
        t.RunConfig(sync_config=config)


@clause("surface.validation-config")
def check_validation_configs(impl):
    t = impl.train
    task = t.ValidationTaskConfig()
    assertions.equal((task.fn_kwargs, task.timeout_s), ({}, None),
                     "ValidationTaskConfig() (fn_kwargs, timeout_s)", "ValidationTaskConfig()")
    assertions.equal(t.ValidationTaskConfig(fn_kwargs={"a": 1}, timeout_s=0.5).fn_kwargs,
                     {"a": 1}, "fn_kwargs", "ValidationTaskConfig(fn_kwargs={'a': 1})")
    for bad in (0, -2.5):
        with pytest.raises(AssertionError, match=re.escape(
                "The `timeout_s` should be None or greater than zero, actual value: "
                f"{bad}")):
            t.ValidationTaskConfig(timeout_s=bad)

    def fn(checkpoint, **kwargs):
        return {}

    config = t.ValidationConfig(fn)
    assertions.equal((config.fn is fn, config.task_config, config.ray_remote_kwargs),
                     (True, t.ValidationTaskConfig(), {}),
                     "ValidationConfig(fn) (fn kept, task_config, ray_remote_kwargs)",
                     "ValidationConfig(fn)")
    given = t.ValidationTaskConfig(fn_kwargs={"k": 1})
    config = t.ValidationConfig(fn, task_config=given, ray_remote_kwargs={"num_cpus": 2})
    assertions.equal((config.task_config is given, config.ray_remote_kwargs),
                     (True, {"num_cpus": 2}), "ValidationConfig(fn, task_config, kwargs)",
                     "ValidationConfig(fn, given, {'num_cpus': 2})")


@clause("surface.preemption-info")
def check_preemption_info_value(impl):
    t = impl.train
    info = t.PreemptionInfo(deadline_ms=1700000000000,
                            preempted_node_to_ranks={"n2": [3, 2], "n1": [0, 2]})
    assertions.equal((info.preempted_node_ids, info.preempted_ranks),
                     (["n1", "n2"], [0, 2, 3]), "(preempted_node_ids, preempted_ranks)",
                     "PreemptionInfo(preempted_node_to_ranks={'n2': [3, 2], 'n1': [0, 2]})")
    try:
        info.deadline_ms = 1
    except AttributeError:
        pass
    else:
        raise AssertionError("PreemptionInfo is not frozen: assigning deadline_ms worked")
    with pytest.raises(RuntimeError, match="^`get_preemption_info` cannot be used outside of "
                       "a Ray Train training function"):
        t.get_preemption_info()


@clause("surface.restore")
def check_restore_is_deprecated(impl):
    for method in ("restore", "can_restore"):
        with pytest.raises(DeprecationWarning, match="^The `restore` and `can_restore` APIs "
                           "are deprecated and will be removed in a future release."):
            getattr(impl.DataParallelTrainer, method)(workspace())


@clause("surface.v1-checkpoints")
def check_framework_checkpoints_warn(impl):
    checked = 0
    for module, name in (("torch", "TorchCheckpoint"), ("xgboost", "XGBoostCheckpoint"),
                         ("lightgbm", "LightGBMCheckpoint")):
        try:
            cls = getattr(impl.framework(module), name)
        except ImportError:
            continue
        checked += 1
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            checkpoint = cls(workspace())
        deprecations = [w for w in seen if issubclass(w.category, DeprecationWarning)
                        and f"`{name}` is deprecated and will be removed in a future release. "
                        "Use `ray.train.Checkpoint` directly instead." in str(w.message)]
        assertions.equal(len(deprecations), 1, f"DeprecationWarnings naming {name}",
                         f"{name}(path)")
        if not isinstance(checkpoint, impl.train.Checkpoint):
            raise AssertionError(f"{name} is not a {impl.train.__name__}.Checkpoint")
    if not checked:
        pytest.skip("none of torch, xgboost, lightgbm is installed")


# Ray's message for each config error, which the implementation's must start with.
CONFIG_ERRORS = [
    ("ScalingConfig", {"num_workers": [1, 2]}, ValueError,
     "ScalingConfig(num_workers) must be an int or a tuple of two ints."),
    ("ScalingConfig", {"num_workers": -1}, ValueError,
     "Invalid ScalingConfig(num_workers=-1): Number of workers cannot be negative."),
    ("ScalingConfig", {"num_workers": (4, 2)}, ValueError,
     "Invalid ScalingConfig(num_workers=(4, 2)): min_workers=4 must be <= max_workers=2."),
    ("ScalingConfig", {"elastic_resize_monitor_interval_s": -1}, ValueError,
     "ScalingConfig(elastic_resize_monitor_interval_s) must be non-negative."),
    ("ScalingConfig", {"use_gpu": True, "use_tpu": True}, ValueError,
     "Cannot specify both `use_gpu=True` and `use_tpu=True`."),
    ("ScalingConfig", {"resources_per_worker": {"GPU": 1}}, ValueError,
     "`use_gpu` is False but `GPU` was found in `resources_per_worker`. Either set "
     "`use_gpu` to True or remove `GPU` from `resources_per_worker."),
    ("ScalingConfig", {"num_workers": 2, "label_selector": [{"a": "b"}]}, ValueError,
     "If `label_selector` is a list, it must be the same length as `max_workers` (or "
     "`num_workers` when fixed)."),
    ("ScalingConfig", {"trainer_resources": {"CPU": 1}}, DeprecationWarning,
     "`ray.train.ScalingConfig(trainer_resources)` is deprecated."),
    ("CheckpointConfig", {"num_to_keep": 0}, ValueError,
     "Received invalid num_to_keep: 0. Must be None or an integer >= 1."),
    ("CheckpointConfig", {"checkpoint_score_order": "up"}, ValueError,
     "Received invalid checkpoint_score_order: up. Must be 'max' or 'min'."),
    ("CheckpointConfig", {"checkpoint_frequency": 2}, DeprecationWarning,
     "`checkpoint_frequency` is deprecated since it does not apply to user-defined "
     "training functions. Please remove this argument from your CheckpointConfig."),
    ("FailureConfig", {"fail_fast": True}, DeprecationWarning,
     "`ray.train.FailureConfig(fail_fast)` is deprecated since it is only relevant in the "
     "context of multiple trials running in Ray Tune."),
    ("RunConfig", {"verbose": 1}, DeprecationWarning,
     "`RunConfig(verbose)` is deprecated. This configuration was a Ray Tune API that did "
     "not support Ray Train usage well"),
    ("RunConfig", {"callbacks": [1]}, ValueError,
     "All callbacks must be instances of `ray.train.UserCallback`. Passing in a Ray Tune "
     "callback is no longer supported."),
    ("RunConfig", {"failure_config": 1}, ValueError,
     "Invalid `FailureConfig` type: <class 'int'>. Use `ray.train.FailureConfig` instead."),
    ("LoggingConfig", {"log_level": "LOUD"}, ValueError, "Invalid log_level: 'LOUD'. Must be "
     "one of: "),
]


@clause("surface.config-messages")
@pytest.mark.parametrize("cls, kwargs, error, message", CONFIG_ERRORS,
                         ids=[f"{c}-{'-'.join(k)}" for c, k, *_ in CONFIG_ERRORS])
def check_config_errors_start_with_rays_message(impl, cls, kwargs, error, message):
    with pytest.raises(error, match="^" + re.escape(message)):
        getattr(impl.train, cls)(**kwargs)


# ------------------------------------------------------------------ clauses with a fit

@clause("surface.collective")
def check_collectives(impl):
    t = impl.train
    c = _collective(impl)
    for name, call in (("barrier", c.barrier),
                       ("broadcast_from_rank_zero", lambda: c.broadcast_from_rank_zero(1))):
        with pytest.raises(RuntimeError, match=f"^`{name}` cannot be used outside of a Ray "
                           "Train training function"):
            call()
    folder = workspace()
    root = {"root": t.__name__}
    local = assertions.succeeded(impl.fit(TrainerFactory(impl.DataParallelTrainer, dict(
        train_loop_per_worker=local_surface, train_loop_config=root,
        scaling_config=t.ScalingConfig(num_workers=0)))), "num_workers=0")
    assertions.equal(local.return_value, {"barrier": None, "broadcast": {"x": [1, 2]},
                                          "large": 2000, "preemption": None},
                     "collectives and get_preemption_info() in local mode", "num_workers=0")
    setting = f"{impl.name}: DataParallelTrainer(num_workers=2), broadcast_views"
    result = assertions.succeeded(impl.fit(TrainerFactory(impl.DataParallelTrainer, dict(
        train_loop_per_worker=broadcast_views, train_loop_config=root,
        scaling_config=t.ScalingConfig(num_workers=2),
        run_config=t.RunConfig(name="surface-collective",
                               storage_path=os.path.join(folder, "s"))))), setting)
    assertions.equal(result.return_value, {"small": {"rank": 0}, "large": "0:",
                                           "barrier": None, "preemption": None},
                     "rank 0's view of the collectives", setting)


def validation_without_config(config: dict):
    """Reports a checkpoint with validation=True in a trainer that has no validation_config."""
    train = importlib.import_module(config["root"])
    folder = os.path.join(config["folder"], "ckpt")
    os.makedirs(folder, exist_ok=True)
    train.report({"step": 0}, checkpoint=train.Checkpoint.from_directory(folder),
                 validation=True)


def validation_without_checkpoint(config: dict):
    importlib.import_module(config["root"]).report({"step": 0}, validation=True)


@clause("surface.validation-report")
def check_validation_needs_a_validation_config(impl):
    t = impl.train
    folder = workspace()
    local = "num_workers=0, report(metrics, validation=True) without a checkpoint"
    err = assertions.failed(impl.fit(TrainerFactory(impl.DataParallelTrainer, dict(
        train_loop_per_worker=validation_without_checkpoint,
        train_loop_config={"root": t.__name__},
        scaling_config=t.ScalingConfig(num_workers=0)))), ValueError, local)
    if not str(err).startswith("Validation requires a checkpoint to be provided."):
        raise AssertionError(f"ValueError({str(err)!r}) [{local}]")
    setting = f"{impl.name}: DataParallelTrainer(num_workers=1) without validation_config, " \
              "report(checkpoint=..., validation=True)"
    err = assertions.failed(impl.fit(TrainerFactory(impl.DataParallelTrainer, dict(
        train_loop_per_worker=validation_without_config,
        train_loop_config={"root": t.__name__, "folder": folder},
        scaling_config=t.ScalingConfig(num_workers=1),
        run_config=t.RunConfig(name="surface-validation",
                               storage_path=os.path.join(folder, "s"))))),
        t.WorkerGroupError, setting)
    failures = getattr(err, "worker_failures", {})
    assertions.equal(sorted(failures), [0], "ranks in worker_failures", setting)
    cause = failures[0]
    text = "`validation_config` was not set on the trainer, but a validation was requested."
    if not (isinstance(cause, ValueError) and str(cause).startswith(text)):
        raise AssertionError(f"rank 0 failed with {type(cause).__name__}: {cause}; expected "
                             f"ValueError starting {text!r} [{setting}]")


def validation_score(checkpoint, scale=1):
    """The validation function of check_validation_fn_runs_and_merges_its_metrics."""
    return {"val": 2 * scale}


def validated_report(config: dict):
    """Reports one checkpoint with validation=True, then lists the VALIDATED checkpoints."""
    train = importlib.import_module(config["root"])
    folder = os.path.join(config["folder"], "ckpt")
    os.makedirs(folder, exist_ok=True)
    train.report({"step": 0}, checkpoint=train.Checkpoint.from_directory(folder),
                 validation=True)
    found = train.get_all_reported_checkpoints(
        consistency_mode=train.CheckpointConsistencyMode.VALIDATED, timeout_s=120)
    return [(r.status.value, r.metrics) for r in found]


@clause("surface.validation-report")
def check_validation_fn_runs_and_merges_its_metrics(impl):
    t = impl.train
    folder = workspace()
    setting = (f"{impl.name}: DataParallelTrainer(num_workers=1, validation_config="
               "ValidationConfig(fn, task_config=ValidationTaskConfig(fn_kwargs={'scale': 3}))"
               "), report({'step': 0}, checkpoint=..., validation=True)")
    result = assertions.succeeded(impl.fit(TrainerFactory(impl.DataParallelTrainer, dict(
        train_loop_per_worker=validated_report,
        train_loop_config={"root": t.__name__, "folder": folder},
        scaling_config=t.ScalingConfig(num_workers=1),
        validation_config=t.ValidationConfig(
            validation_score, task_config=t.ValidationTaskConfig(fn_kwargs={"scale": 3})),
        run_config=t.RunConfig(name="surface-validation-run",
                               storage_path=os.path.join(folder, "s"))))), setting)
    assertions.equal(result.return_value, [("VALIDATED", {"step": 0, "val": 6})],
                     "get_all_reported_checkpoints(VALIDATED) on rank 0", setting)
    assertions.equal([m for _, m in result.best_checkpoints], [{"step": 0, "val": 6}],
                     "Result.best_checkpoints metrics", setting)
