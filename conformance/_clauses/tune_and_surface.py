"""The clauses of Ray Tune, and the rest of the public surface."""

from conformance._clauses._record import AIR, CFG, FN, TUNE, C

CLAUSES = [
    # ---------------------------------------------------------------- Ray Tune
    C("tune.asha-decisions", "MUST", "ASHAScheduler stops the trials Ray's ASHA stops",
      "Fed the same trials and results (metric and mode set; numpy's global random state "
      "seeded alike before the first trial is added), ASHAScheduler(max_t, grace_period, "
      "reduction_factor, brackets, stop_last_trials) decides as Ray's: rungs of bracket s "
      "at grace_period * rf**(k + s); a trial joins a bracket drawn with probability "
      "proportional to e**(its rungs - the most rungs); a result at or past max_t stops the "
      "trial (with stop_last_trials); otherwise the result is judged at the highest rung "
      "it reached and is not recorded at: STOP when its signed value is below the (1 - "
      "1/rf) quantile of the values recorded there (NaN ignored), and recorded either way; "
      "a completed trial's last result is recorded the same way; a result without the "
      "metric is neither judged nor recorded. Its parameters default to "
      "time_attr='training_iteration', metric=None, mode=None, max_t=100, grace_period=1, "
      "reduction_factor=4, brackets=1, stop_last_trials=True. The constructor raises "
      "AssertionError unless max_t > 0, grace_period <= max_t, grace_period > 0, "
      "reduction_factor > 1, brackets > 0 and mode is None, 'min' or 'max'.",
      "python/ray/tune/schedulers/async_hyperband.py",
      "ASHAScheduler(metric='loss', mode='min', max_t=4, grace_period=1, "
      "reduction_factor=2): losses 1, 3 at t=1 -> the second trial STOPs",
      "Which trials a scheduler stops decides what a search finds; a custom controller or "
      "a resumed experiment must see the same decisions as Ray's."),
    C("tune.trainer-rejected", "MUST", "A Train V2 trainer is not a Tune trainable",
      "Tuner(TorchTrainer(fn, ...)) raises TuneError(\"Improper 'run' - not string nor "
      "trainable.\") at construction; Tuner(None) (any falsy trainable) raises "
      "TuneError('You need to provide a trainable to tune.'). Tuner(fn).get_results() before "
      "fit() raises RuntimeError(\"Can't return results as experiment has not been run, yet. "
      "Call `Tuner.fit()` to run the experiment first.\").",
      TUNE + "impl/tuner_internal.py; " + TUNE + "experiment/experiment.py",
      "tune.Tuner(TorchTrainer(fn))  # TuneError: Improper 'run' - not string nor trainable.",
      "V2 trainers are tuned through a driver function (tune.train-interop); passing one "
      "directly must fail loudly, not run something else."),
    C("tune.outside-session", "MUST", "tune.report and get_checkpoint outside a trial warn once",
      "Called outside a function run by a Tuner or Trainer, tune.report(...) and "
      "tune.get_checkpoint() return None and each gives one UserWarning per process ('`report` "
      "is meant to only be called inside a function that is executed by a Tuner or "
      "Trainer. Returning `None`.'), however often called.",
      "python/ray/train/_internal/session.py:_warn_session_misuse",
      "tune.report({'a': 1})  # UserWarning, once; returns None"),
    C("tune.report", "MUST", "tune.report in a function trainable",
      "report(metrics, *, checkpoint=None) (checkpoint keyword-only). Each call in a function "
      "trainable is one result: training_iteration counts the calls from 1, "
      "Result.metrics_dataframe has one row per call with the user metrics, and "
      "Result.metrics is the last result: the user metrics plus exactly the keys "
      "training_iteration, trial_id, config (== Result.config), done (True), pid (the trial "
      "process), time_total_s, time_this_iter_s, time_since_restore, iterations_since_restore "
      "(== training_iteration on a first start), timestamp, date, hostname, node_ip, "
      "experiment_tag and checkpoint_dir_name (None on a report without a checkpoint); on a "
      "first start time_total_s equals time_since_restore (both sum the time between "
      "results).",
      TUNE + "trainable/trainable_fn_utils.py; " + TUNE + "result.py",
      "tune.report({'score': 1.0})  # result.metrics['training_iteration'] == 1"),
    C("tune.trials", "MUST", "num_samples x grid trials with resolved configs",
      "A param_space with grid_search values and sampled domains gives num_samples x (product "
      "of the grid sizes) trials, every grid value in exactly num_samples trials; trials are "
      "created grid first (the whole grid once per sample): the trial of index i has the "
      "(i mod grid size)-th grid value. Each Result.config (and the config the function "
      "gets) is the space with every domain resolved: uniform(a, b) a float in [a, b], "
      "choice(c) one of c, randint(a, b) an int in [a, b), constants unchanged, nested "
      "dicts resolved in place with their keys; sampled values are drawn per trial.",
      TUNE + "search/basic_variant.py; " + TUNE + "search/variant_generator.py; "
      + TUNE + "search/sample.py",
      "param_space={'x': tune.grid_search([1, 2, 3, 4]), 'nested': {'r': tune.randint(0, 5)}},"
      " TuneConfig(num_samples=2)  # 8 trials"),
    C("tune.trial-files", "MUST", "Each trial's folder holds the files of the default loggers",
      "Unless TUNE_DISABLE_AUTO_CALLBACK_LOGGERS=1 or RunConfig(callbacks=...) has a logger of "
      "that class, a Tuner adds a CSV, a JSON and a TensorBoard logger callback. Each started "
      "trial's folder then holds result.json (one JSON line per result, with its config), "
      "progress.csv (a header of the first result's keys flattened with '/' and without "
      "config, nested keys after the plain ones, then a row per result), params.json (the "
      "config, json.dumps(config, indent=2, sort_keys=True)), params.pkl (the config, "
      "pickled) and, where tensorboardX is installed, one events.out.tfevents.* file; a trial that failed has the lines and "
      "rows of the results it reported.",
      TUNE + "logger/csv.py; " + TUNE + "logger/json.py; " + TUNE + "logger/tensorboardx.py; "
      + TUNE + "utils/callback.py",
      "tuner.fit()  # <trial>/progress.csv, result.json, params.json, params.pkl, events.out.*"),
    C("tune.mlflow-logger", "MUST", "MLflowLoggerCallback: an MLflow run per trial",
      "air.integrations.mlflow.MLflowLoggerCallback(tracking_uri, *, experiment_name=, "
      "tags=, ...) in RunConfig(callbacks=...) uses the experiment of that name (created if "
      "missing) and starts an MLflow run per trial when it starts, named and tagged "
      "trial_name after the trial, with the callback's tags. The trial's config, flattened "
      "with '/', is logged as params (strings); every value of every result that float() "
      "accepts (flattened, the config's values among them) is a metric at step "
      "timesteps_total or training_iteration; the run ends FINISHED, or FAILED for a trial "
      "that errored.",
      "python/ray/air/integrations/mlflow.py; python/ray/air/_internal/mlflow.py",
      "MLflowLoggerCallback('sqlite:///m.db', experiment_name='exp')"),
    C("tune.wandb-logger", "MUST", "WandbLoggerCallback: an offline W&B run per trial",
      "air.integrations.wandb.WandbLoggerCallback(project, group, **init_kwargs) in "
      "RunConfig(callbacks=...) starts a W&B run per trial, held off the loop, in the "
      "trial's folder (offline runs under <trial>/wandb/), with the trial id as its id, "
      "the trial name as its name and the given project and group.",
      "python/ray/air/integrations/wandb.py",
      "WandbLoggerCallback(project='p', group='g', mode='offline')"),
    C("tune.setup-mlflow", "MUST", "setup_mlflow in a Train worker: rank 0 alone logs",
      "air.integrations.mlflow.setup_mlflow(config, tracking_uri=, experiment_name=, "
      "create_experiment_if_not_exists=True, ...) in a Train worker of world rank 0 starts "
      "an active MLflow run, logs config flattened with '/' as its params and returns the "
      "mlflow module; on any other rank (rank_zero_only=True, the default) it returns a "
      "stand-in whose calls do nothing, so one run holds rank 0's metrics.",
      "python/ray/air/integrations/mlflow.py",
      "mlflow = setup_mlflow(config, tracking_uri=uri, experiment_name='e')"),
    C("tune.setup-wandb", "SHOULD", "setup_wandb in a Train worker: rank 0 alone logs",
      "air.integrations.wandb.setup_wandb(config, project=, **init_kwargs) in a Train "
      "worker of world rank 0 returns wandb.init's run with config as its config; on any "
      "other rank (rank_zero_only=True, the default) a disabled run (wandb.init(mode="
      "'disabled')) that writes nothing. SHOULD: what Ray 2.60's docstring promises; its "
      "code reads the rank from Train's older session, which V2 workers lack, so there "
      "every rank gets a real run.",
      "python/ray/air/integrations/wandb.py",
      "run = setup_wandb(config, project='p')"),
    C("tune.result-grid", "MUST", "ResultGrid: indexing, counts, best result, dataframe",
      "The ResultGrid of a fresh fit has one Result per trial in creation order (len, [i], "
      "iteration), num_terminated and num_errors count them, errors lists the errored "
      "trials' errors. get_best_result(metric, mode, scope) compares per trial the last "
      "value ('last'), the best value of every result ('all'), the mean of all ('avg') or "
      "of the last 5 / 10 ('last-5-avg', 'last-10-avg'); metric and mode default to "
      "TuneConfig's; without a metric it raises ValueError('No metric is provided. Either "
      "pass in a `metric` arg to `get_best_result` or specify a metric in the `TuneConfig` of "
      "your `Tuner`.'), without a mode the same with 'mode'; a metric no trial reported "
      "raises RuntimeError('No best trial found for the given metric: <m>. This means that no "
      "trial has reported this metric, or all values reported for this metric are NaN. ...'); "
      "an unknown scope raises ValueError. A grid of one trial returns it from "
      "get_best_result() without a metric. get_dataframe() has one row per trial (its last "
      "result) with a trial_id column and the config flattened into 'config/<path>' columns "
      "('config/nested/r'); get_dataframe(filter_metric, filter_mode) takes each trial's "
      "best result instead. Each Result.path is an existing folder "
      "<storage_path>/<name>/<trial dir>, one per trial.",
      TUNE + "result_grid.py; " + TUNE + "analysis/experiment_analysis.py",
      "grid.get_best_result('score', 'min', scope='last-5-avg')",
      ray_note="After Tuner.restore(...).fit() Ray 2.60 listed the trials in reverse "
      "creation order; only a fresh fit's order is part of the clause."),
    C("tune.trial-error", "MUST", "A trial that raises is an error of the grid, not of fit()",
      "When a trial's function raises, fit() still returns; the other trials finish; the "
      "trial's Result.error is an instance of the raised exception's type whose str "
      "contains the original message; it is in ResultGrid.errors (num_errors 1) and its "
      "Result keeps the results it reported before the raise.",
      TUNE + "execution/tune_controller.py; " + TUNE + "result_grid.py",
      "raise ValueError('boom')  # grid.errors[0]: isinstance ValueError, 'boom' in str",
      ray_note="Ray 2.60 gives a RayTaskError(ValueError): a subclass of both RayTaskError "
      "and ValueError, its str the remote traceback ending with the original line."),
    C("tune.trial-retry", "MUST", "FailureConfig(max_failures) restarts a dead trial",
      "With tune.RunConfig(failure_config=tune.FailureConfig(max_failures=1)), a trial whose "
      "process dies (os._exit(1)) after reported checkpoints is restarted in a new process; "
      "there tune.get_checkpoint() holds the last reported checkpoint, training_iteration "
      "goes on from that checkpoint's iteration, and the trial ends without error. With "
      "max_failures=0 the same trial is an error of the grid (fit() returns) holding the "
      "results it reported.",
      TUNE + "execution/tune_controller.py; " + TUNE + "trainable/function_trainable.py",
      "tune.RunConfig(failure_config=tune.FailureConfig(max_failures=1))",
      ray_note="The error of the max_failures=0 trial is a ray.exceptions.ActorDiedError "
      "(a RayActorError); the clause asks only for an error."),
    C("tune.checkpoint", "MUST", "Checkpoints a function trainable reports",
      "tune.report(metrics, checkpoint=Checkpoint.from_directory(d)) persists d's files as "
      "<trial dir>/checkpoint_<6-digit index from 0>; the result's checkpoint_dir_name names "
      "it (None on reports without one); Result.checkpoint is the last reported checkpoint, "
      "at that path, holding the reported files; tune.get_checkpoint() is None on a trial's "
      "first start.",
      TUNE + "trainable/trainable_fn_utils.py; python/ray/train/_internal/storage.py",
      "tune.report({'step': 4}, checkpoint=tune.Checkpoint.from_directory(d))"),
    C("tune.context", "MUST", "tune.get_context() in a trial",
      "In a trial, tune.get_context() gives get_trial_id() (== the results' trial_id; ids "
      "of one fit are '<run id>_<5-digit trial index>' sharing the run id), get_trial_name() "
      "('<trainable name>_<trial id>'), get_experiment_name() (RunConfig's name) and "
      "get_trial_dir(), the trial's local folder, named like Result.path's last component, "
      "which starts with the trial name.",
      TUNE + "trainable/trainable_fn_utils.py; " + TUNE + "experiment/trial.py",
      "tune.get_context().get_trial_id() == result.metrics['trial_id']",
      ray_note="get_trial_dir() is not Result.path: Ray 2.60 runs the trial in a staging "
      "folder under the Ray session ('.../artifacts/<time>/<name>/driver_artifacts/<trial "
      "dir>') and syncs it to the storage path; the function's working directory is yet "
      "another folder ('.../<name>/working_dirs/<trial dir>')."),
    C("tune.stop", "MUST", "RunConfig(stop=...) stops trials",
      "tune.RunConfig(stop={'training_iteration': 3}) stops every trial at its result with "
      "training_iteration 3: the function makes no further report, the Result has "
      "training_iteration 3, done True and 3 results, and the trial is terminated, not an "
      "error. stop=fn(trial_id, result) is called (where the Tuner runs) with each result "
      "of each trial, in order, trial_id == result['trial_id'], and stops the trial at the "
      "first result for which it returns True.",
      TUNE + "stopper/; " + TUNE + "execution/tune_controller.py",
      "tune.RunConfig(stop={'training_iteration': 3})"),
    C("tune.scheduler-stop", "MUST", "ASHA stops trials at its rungs",
      "ASHAScheduler(metric, mode, max_t, grace_period, reduction_factor) with trials run "
      "one at a time (max_concurrent_trials=1): a trial reaching a rung (grace_period x "
      "reduction_factor^k iterations, below max_t) is stopped there when its value is worse "
      "than the (1 - 1/reduction_factor) quantile (numpy's linear percentile) of the values "
      "earlier trials recorded at that rung; otherwise it runs on, and is stopped at max_t. "
      "Stopped trials are terminated, not errors.",
      TUNE + "schedulers/async_hyperband.py",
      "ASHAScheduler(metric='loss', mode='min', max_t=4, grace_period=1, reduction_factor=2)"),
    C("tune.train-interop", "MUST", "Train inside Tune: the driver-function pattern",
      "In a Tune function, the Train API's report raises (not warns) DeprecationWarning "
      "naming the report function, 'deprecated' and the Tune API to use instead. A function "
      "trainable that fits a TorchTrainer whose train.RunConfig has callbacks="
      "[TuneReportCallback()] (from <root>.tune.integration.ray_train, a train.UserCallback) "
      "gives Tune one result per Train report with rank 0's metrics, plus 'checkpoint_path' "
      "(the persisted Train checkpoint's path) on the results whose Train report had a "
      "checkpoint; the Tune trial's own checkpoint stays None. TuneReportCallback() outside a "
      "Tune session raises RuntimeError('TuneReportCallback must be used in a Tune "
      "session.').",
      "python/ray/tune/integration/ray_train.py; python/ray/train/v2/_internal/util.py; "
      "doc/source/train/doc_code/train_tune_interop.py",
      "train.RunConfig(name=f'train-trial_id={tune.get_context().get_trial_id()}', "
      "callbacks=[TuneReportCallback()])"),
    C("tune.config-errors", "MUST", "Tune configuration errors",
      "FailureConfig(fail_fast=True, max_failures=1) raises ValueError('max_failures must be "
      "0 if fail_fast=True.') at construction. At fit(), before any trial starts, each "
      "raises ValueError: TuneConfig(mode='bad') (\"The `mode` parameter passed to "
      "`Tuner(...)` must be one of ['min', 'max']\"); a scheduler built with its own metric "
      "and mode plus a TuneConfig metric ('You passed a `metric` or `mode` argument to "
      "`Tuner(...)`, but the scheduler you are using was already instantiated with their own "
      "`metric` and `mode` parameters. ...'); an ASHAScheduler without metric or mode and "
      "none in TuneConfig ('... has been instantiated without a valid `metric` (None) or "
      "`mode` (None) parameter. ...').",
      TUNE + "tune.py; " + TUNE + "schedulers/async_hyperband.py; python/ray/air/config.py",
      "tune.TuneConfig(mode='bad')  # Tuner.fit() raises ValueError"),
    C("tune.with-parameters", "MUST", "with_parameters passes objects to the trainable",
      "tune.with_parameters(fn, data=obj) is a trainable whose trials call fn(config, "
      "data=<an equal copy of obj>).",
      TUNE + "trainable/util.py",
      "tune.Tuner(tune.with_parameters(fn, data=rows))"),
    C("tune.with-resources", "MUST", "with_resources sets a trial's resources",
      "tune.with_resources(fn, {'cpu': 2}) runs each trial with 2 CPUs: "
      "tune.get_context().get_trial_resources() is a PlacementGroupFactory whose bundles are "
      "[{'CPU': 2.0}] and whose required_resources is {'CPU': 2.0}; without with_resources "
      "a function trial has [{'CPU': 1.0}].",
      TUNE + "trainable/util.py; " + TUNE + "execution/placement_groups.py",
      "tune.with_resources(fn, {'cpu': 2})"),
    C("tune.max-concurrent", "MUST", "max_concurrent_trials bounds running trials",
      "With TuneConfig(max_concurrent_trials=1) no two trials run at once: each trial "
      "starts after the previous one's last report, in creation order.",
      TUNE + "tune.py; " + TUNE + "search/basic_variant.py",
      "tune.TuneConfig(max_concurrent_trials=1)"),
    C("tune.restore", "MUST", "Tuner.can_restore and Tuner.restore(resume_errored=True)",
      "Tuner.can_restore(path) is True for a fitted experiment's folder and False for a "
      "folder that is not one (or does not exist). Tuner.restore(path, trainable, "
      "resume_errored=True).fit() re-runs the errored trials (their functions start again, "
      "from their checkpoint or, without one, from the beginning) and keeps the finished "
      "trials without running them again; its ResultGrid has every trial, same trial ids, "
      "same experiment path, the re-run ones now without error.",
      TUNE + "tuner.py; " + TUNE + "impl/tuner_internal.py",
      "tune.Tuner.restore(path, trainable=fn, resume_errored=True).fit()"),
    # ---------------------------------------------------------------- the rest of the surface
    C("surface.names", "MUST", "The V2 names beside the core ones",
      "The train package's __all__ holds SyncConfig, TRAIN_DATASET_KEY (== 'train'), "
      "ValidationConfig, ValidationTaskConfig, ValidationFn, ReportedCheckpoint, "
      "ReportedCheckpointStatus (members COMMITTED, PENDING_VALIDATION, VALIDATED, "
      "VALIDATION_TIMEOUT, VALIDATION_FAILED, in this order), PreemptionInfo and "
      "get_preemption_info; <root>.train.collective has __all__ == ['broadcast_from_rank_zero', "
      "'barrier'] (as a set). ray.train does not export DataParallelTrainer (it lives at "
      "ray.train.v2.api.data_parallel_trainer); an implementation may, as the reference does.",
      "python/ray/train/__init__.py; python/ray/train/collective/__init__.py",
      "from ray.train import PreemptionInfo, ValidationConfig, get_preemption_info"),
    C("surface.sync-config", "MUST", "SyncConfig builds; RunConfig(sync_config=) raises",
      "SyncConfig() builds without a warning, with sync_period=300, sync_timeout=1800, "
      "sync_artifacts=False, sync_artifacts_on_checkpoint=True; RunConfig(sync_config=<any "
      "value>) raises (not warns) DeprecationWarning whose message starts with "
      "'`RunConfig(sync_config)` is deprecated'.",
      "python/ray/train/_internal/syncer.py; " + CFG,
      "RunConfig(sync_config=SyncConfig())  # raises DeprecationWarning"),
    C("surface.validation-config", "MUST", "ValidationConfig and ValidationTaskConfig",
      "ValidationTaskConfig(fn_kwargs=None, timeout_s=None) turns fn_kwargs=None into {}, and "
      "a timeout_s that is not None and not > 0 raises AssertionError('The `timeout_s` should "
      "be None or greater than zero, actual value: X'). ValidationConfig(fn, task_config=None, "
      "ray_remote_kwargs=None) keeps fn, turns task_config=None into ValidationTaskConfig() "
      "and ray_remote_kwargs=None into {}, and keeps given values as they are.",
      "python/ray/train/v2/api/validation_config.py",
      "ValidationConfig(fn, task_config=ValidationTaskConfig(fn_kwargs={'k': 1}))"),
    C("surface.preemption-info", "MUST", "PreemptionInfo and get_preemption_info()",
      "PreemptionInfo(deadline_ms, preempted_node_to_ranks) is frozen; preempted_node_ids is "
      "the sorted node ids and preempted_ranks the sorted union of the ranks. "
      "get_preemption_info() outside a training function raises RuntimeError starting "
      "'`get_preemption_info` cannot be used outside of a Ray Train training function'; in "
      "local mode, and in a run no node of which is being preempted, it returns None on "
      "every rank (it is a collective: each rank gets rank 0's view).",
      "python/ray/train/v2/api/preemption.py; " + FN +
      "; python/ray/train/v2/_internal/execution/train_fn_utils.py",
      "info = ray.train.get_preemption_info()  # None until a node is preempted",
      ray_note="A real preemption (a drained node with a deadline) is checked on the "
      "reference only (tests/reference/train/test_collective.py): Ray needs a node drain."),
    C("surface.collective", "MUST", "barrier() and broadcast_from_rank_zero()",
      "Outside a training function both raise RuntimeError starting '`barrier` (or "
      "`broadcast_from_rank_zero`) cannot be used outside of a Ray Train training function'. "
      "In local mode barrier() returns None and broadcast_from_rank_zero(x) returns x. With "
      "two workers every rank gets rank 0's value, also for a value of more than 1000 "
      "pickled bytes (Ray only logs a warning, despite its docstring's ValueError), and "
      "barrier() returns None on every rank.",
      "python/ray/train/collective/collectives.py; "
      "python/ray/train/v2/_internal/execution/collective_impl.py",
      "data = ray.train.collective.broadcast_from_rank_zero(data)"),
    C("surface.validation-report", "MUST", "report(validation=) needs a validation_config",
      "In a run (num_workers >= 1) whose trainer has no validation_config, "
      "report(metrics, checkpoint=c, validation=True) fails the rank with ValueError starting "
      "'`validation_config` was not set on the trainer, but a validation was requested.', "
      "and fit() raises WorkerGroupError with that rank's error in worker_failures. Without "
      "a checkpoint, report(validation=True) raises ValueError starting 'Validation requires "
      "a checkpoint to be provided.' With a validation_config, ValidationConfig.fn runs on the "
      "reported checkpoint with the task_config's fn_kwargs; the dict it returns is merged "
      "into that checkpoint's metrics, get_all_reported_checkpoints(consistency_mode="
      "VALIDATED) lists it with status VALIDATED, and Result.best_checkpoints shows the "
      "merged metrics.",
      FN + "; python/ray/train/v2/_internal/execution/context.py",
      "ray.train.report(metrics, checkpoint=c, validation=True)"),
    C("surface.restore", "MUST", "Trainer.restore and can_restore are deprecated",
      "DataParallelTrainer.restore(...) and DataParallelTrainer.can_restore(...) (class "
      "methods, also on every framework trainer) raise (not warn) DeprecationWarning starting "
      "'The `restore` and `can_restore` APIs are deprecated and will be removed in a future "
      "release.'",
      "python/ray/train/v2/api/data_parallel_trainer.py; python/ray/train/base_trainer.py",
      "TorchTrainer.restore(path)  # raises DeprecationWarning"),
    C("surface.v1-checkpoints", "MUST", "V1 framework checkpoints warn",
      "Building TorchCheckpoint, XGBoostCheckpoint or LightGBMCheckpoint (exported by the "
      "torch, xgboost and lightgbm modules) emits one DeprecationWarning (Ray's category is "
      "RayDeprecationWarning, a subclass) containing '`<Name>` is deprecated and will be "
      "removed in a future release. Use `ray.train.Checkpoint` directly instead.'; the object "
      "is a Checkpoint.",
      "python/ray/train/torch/torch_checkpoint.py; python/ray/train/xgboost/xgboost_checkpoint.py; "
      "python/ray/train/lightgbm/lightgbm_checkpoint.py; python/ray/util/annotations.py",
      "TorchCheckpoint.from_state_dict(model.state_dict())  # warns"),
    C("surface.config-messages", "SHOULD", "Config errors start with Ray's message",
      "The errors of ScalingConfig, CheckpointConfig, FailureConfig, RunConfig and "
      "LoggingConfig start with Ray 2.60's text for the same error (an implementation may "
      "add the argument and the fix after it), so pytest.raises(match=...) written against "
      "Ray matches: e.g. CheckpointConfig(num_to_keep=0) raises ValueError starting "
      "'Received invalid num_to_keep: 0. Must be None or an integer >= 1.'.",
      CFG + "; " + AIR + "; python/ray/train/v2/_internal/migration_utils.py",
      "pytest.raises(ValueError, match='Received invalid num_to_keep')"),
]
