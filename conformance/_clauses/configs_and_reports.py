"""The clauses of ScalingConfig and the other configs, Checkpoint, report and Result."""

from conformance._clauses._record import (
    AIR,
    CFG,
    CKMGR,
    CKPT,
    CTRL,
    FN,
    RESULT,
    STORAGE,
    WG,
    WORKER_CTX,
    C,
)

CLAUSES = [
    # ---------------------------------------------------------------- ScalingConfig
    C("scaling.defaults", "MUST", "ScalingConfig fields and defaults",
      "ScalingConfig() has the fields trainer_resources=None, num_workers=1, use_gpu=False, "
      "resources_per_worker=None, placement_strategy='PACK', accelerator_type=None, "
      "label_selector=None, use_tpu=False, topology=None, elastic_resize_monitor_interval_s=60.0, "
      "in this positional order.", CFG,
      "ScalingConfig().num_workers == 1",
      "Code written against one implementation must mean the same thing on another."),
    C("scaling.trainer-resources-deprecated", "MUST", "trainer_resources raises DeprecationWarning",
      "Passing trainer_resources (any non-None value) raises DeprecationWarning at construction "
      "(raised, not warned).", CFG,
      "ScalingConfig(trainer_resources={'CPU': 1})  # raises DeprecationWarning",
      "V2 has no trainer actor with resources; silently ignoring the argument would hide a "
      "scheduling assumption."),
    C("scaling.num-workers-type", "MUST", "num_workers is an int or a tuple of two ints",
      "num_workers must be an int (bool included, as it is an int) or a tuple of exactly two "
      "ints; anything else (float, list, None, str, 3-tuple) raises ValueError.", CFG,
      "ScalingConfig(num_workers=2.0)  # ValueError",
      "The tuple form switches on elastic training; a list by mistake must not be taken for it."),
    C("scaling.num-workers-range", "MUST", "num_workers bounds",
      "A negative worker count (int or the tuple's minimum) raises ValueError; a tuple whose "
      "minimum exceeds its maximum raises ValueError; 0 selects local mode.", CFG,
      "ScalingConfig(num_workers=(4, 1))  # ValueError: min_workers=4 must be <= max_workers=1"),
    C("scaling.tpu-rules", "MUST", "TPU configuration rules",
      "use_tpu with use_gpu raises ValueError; a TPU resource without use_tpu raises; use_tpu "
      "with a resources_per_worker that lacks a positive TPU count raises; for more than one worker use_tpu requires topology then "
      "accelerator_type and forbids label_selector; with both set the worker counts must be "
      "multiples of the workers per slice (chips of the slice / TPUs per worker; a count "
      "that does not divide the chips raises), an unparsable topology raises, and a "
      "missing resources_per_worker is filled in with the chips per host.", CFG,
      "ScalingConfig(num_workers=4, use_tpu=True, topology='4x4', accelerator_type='TPU-V6E')"
      ".resources_per_worker == {'CPU': 1, 'TPU': 4}",
      "A multi-host TPU job can only run on whole slices; catching it at construction beats "
      "waiting for a slice that can never be formed."),
    C("scaling.gpu-resources-without-use-gpu", "MUST", "GPU in resources_per_worker needs use_gpu",
      "resources_per_worker with a positive GPU count while use_gpu=False raises ValueError. "
      "use_gpu=True with {'GPU': 0} is accepted (zero entries are dropped and GPU falls back "
      "to 1).", AIR,
      "ScalingConfig(resources_per_worker={'GPU': 1})  # ValueError"),
    C("scaling.label-selector", "MUST", "label_selector list length",
      "A list label_selector must have exactly max_workers entries, else ValueError; a dict "
      "applies to every worker.", CFG,
      "ScalingConfig(num_workers=2, label_selector=[{'a': 'b'}])  # ValueError"),
    C("scaling.derived", "MUST", "Derived values",
      "min_workers/max_workers are the int or the tuple members; elasticity_enabled is true "
      "exactly for a tuple; per-worker resources default to {'CPU': 1} ({'GPU': 1} with "
      "use_gpu, {'TPU': 1} with use_tpu), drop zero values and gain GPU=1 under use_gpu; "
      "num_cpus/gpus_per_worker and additional_resources_per_worker read from them; "
      "total_resources is per-worker resources times max_workers, as floats.", CFG,
      "ScalingConfig(num_workers=(1, 4)).total_resources == {'CPU': 4.0}",
      "Schedulers, autoscalers and the resources a user budgets all read these values."),
    C("scaling.placement-strategy-lazy", "SHOULD", "placement_strategy is checked at scheduling",
      "placement_strategy is not validated at construction; an invalid value fails when the "
      "worker group is scheduled (fit raises ControllerError).", CFG,
      "ScalingConfig(placement_strategy='BOGUS')  # accepted",
      ray_note="Ray's docstring lists the four strategies but does not reject others until "
      "a placement group is created."),
    C("scaling.resource-amounts", "SHOULD", "resources_per_worker amounts are numbers",
      "A resources_per_worker amount that is not a number (a numeric string included) raises "
      "ValueError at construction, naming resources_per_worker and the amount.", CFG,
      "ScalingConfig(resources_per_worker={'CPU': '1'})  # ValueError: values must be numbers",
      "A run that can never be placed should fail where it is written, not after the "
      "cluster was asked for it.",
      ray_note="Ray 2.60 accepts {'CPU': '1'} at construction (total_resources then raises "
      "TypeError) and fit() raises ControllerError: 'Bundles must be a non-empty list of "
      "resource dictionaries'. Such a run never trains on Ray either."),
    # ---------------------------------------------------------------- other configs
    C("run-config.defaults", "MUST", "RunConfig defaults",
      "RunConfig() fills name with 'ray_train_run-%Y-%m-%d_%H-%M-%S', storage_path with "
      "'~/ray_results' expanded, empty FailureConfig/CheckpointConfig/LoggingConfig objects, "
      "callbacks=[] and worker_runtime_env={}; a pathlib.Path storage_path becomes a str.", CFG,
      "RunConfig().name.startswith('ray_train_run-')",
      "The run name and storage path decide where checkpoints land and what a re-run resumes."),
    C("run-config.deprecated", "MUST", "Deprecated RunConfig arguments raise",
      "sync_config, verbose, stop, progress_reporter and log_to_file, when given, raise "
      "DeprecationWarning naming the argument; runtime_env= is a TypeError.", CFG,
      "RunConfig(stop={'x': 1})  # DeprecationWarning"),
    C("run-config.types", "MUST", "RunConfig checks the types of its parts",
      "callbacks must be UserCallback instances; failure_config and checkpoint_config must be "
      "the Train classes; otherwise ValueError. Falsy values of any type are replaced by "
      "the defaults instead.", CFG,
      "RunConfig(callbacks=[object()])  # ValueError"),
    C("failure-config.fields", "MUST", "FailureConfig fields",
      "FailureConfig(max_failures=0, controller_failure_limit=-1, max_preemption_failures=-1, "
      "...) with fail_fast deprecated: any explicit fail_fast raises DeprecationWarning; "
      "max_failures is not range-checked.", CFG,
      "FailureConfig().max_failures == 0"),
    C("checkpoint-config.validation", "MUST", "CheckpointConfig validation",
      "num_to_keep must be None or >= 1 (ValueError otherwise; a non-number raises "
      "TypeError); checkpoint_score_order must be exactly 'max' or 'min'; "
      "checkpoint_frequency and checkpoint_at_end raise DeprecationWarning when given "
      "(any value but the 'DEPRECATED' sentinel, None included), before other checks.", CFG,
      "CheckpointConfig(num_to_keep=0)  # ValueError"),
    C("logging-config.level", "MUST", "LoggingConfig level",
      "LoggingConfig(log_level=...) accepts standard level names case-insensitively and "
      "stores them upper-case; anything else raises ValueError.", CFG,
      "LoggingConfig('debug').log_level == 'DEBUG'"),
    # ---------------------------------------------------------------- Checkpoint
    C("checkpoint.from-directory", "MUST", "Checkpoint.from_directory",
      "Checkpoint.from_directory(p) keeps p as given in .path (relative stays relative) and "
      "has a local pyarrow filesystem; Checkpoint(path) resolves the filesystem from the "
      "path or URI; no existence check.", CKPT,
      "Checkpoint.from_directory('/tmp/x').path == '/tmp/x'"),
    C("checkpoint.to-directory", "MUST", "Checkpoint.to_directory copies",
      "to_directory(path) copies the files into path and returns it (normalised); without a "
      "path it copies into a temporary directory tied to the Checkpoint object (repeated "
      "calls on one object reuse it). The source is left unchanged.", CKPT,
      "d = ckpt.to_directory()  # a fresh copy"),
    C("checkpoint.as-directory", "MUST", "Checkpoint.as_directory does not copy local data",
      "as_directory() on a local checkpoint yields the checkpoint's own path and does not "
      "delete it on exit.", CKPT,
      "with ckpt.as_directory() as d: assert d == ckpt.path"),
    C("checkpoint.metadata", "MUST", "Checkpoint metadata",
      "get_metadata() is {} until set; set_metadata overwrites; update_metadata merges; the "
      "metadata is stored inside the checkpoint directory, so copies carry it.", CKPT,
      "ckpt.update_metadata({'a': 1}); ckpt.get_metadata()['a'] == 1"),
    C("checkpoint.pickle", "MUST", "Checkpoint pickles",
      "A Checkpoint survives pickling with its path and filesystem; equality is identity.",
      CKPT, "pickle.loads(pickle.dumps(ckpt)).path == ckpt.path"),
    C("checkpoint.round-trip", "MUST", "Checkpoint directories round-trip byte for byte",
      "Any directory tree (nested folders, empty folders, empty and binary files) copied out "
      "with to_directory is identical to the source.", CKPT,
      "tree(ckpt.to_directory()) == tree(src)",
      "A checkpoint that loses an empty folder or a byte corrupts a model silently."),
    # ---------------------------------------------------------------- report
    C("report.outside-raises", "MUST", "report outside a training function raises",
      "report(), get_context() and get_checkpoint() called outside a training function raise "
      "RuntimeError.", FN, "ray.train.report({'a': 1})  # RuntimeError in the driver"),
    C("report.barrier", "MUST", "report is collective",
      "Every rank must call report; a report call returns on a rank only after every rank "
      "has made the matching call.", FN,
      "rank 1 writes a marker, then reports; rank 0's report returns after the marker exists",
      "Checkpoint consolidation needs every rank's files; a rank racing ahead would report a "
      "half-written checkpoint."),
    C("report.rank0-metrics", "MUST", "Result.metrics are rank 0's",
      "Result.metrics is rank 0's metrics dict of the latest report that carried a "
      "checkpoint, exactly as reported (no added keys).", CTRL,
      "ranks report {'rank': r}; result.metrics == {'rank': 0, ...}"),
    C("report.free-metrics", "MUST", "Metrics without a checkpoint are not persisted",
      "Metrics reported without a checkpoint appear neither in Result.metrics nor in "
      "best_checkpoints; a run that never reported a checkpoint has Result.metrics None.",
      CTRL, "report({'loss': 1.0}) only -> result.metrics is None",
      ray_note="Ray's quick-start examples print result.metrics['loss'] after metric-only "
      "reports; on 2.60 that is None. The behaviour is intended (ray-project/ray#56718)."),
    C("report.free-metrics-any-value", "MUST", "Metrics without a checkpoint need not be storable",
      "When no rank passes a checkpoint in a report round, the metrics may hold values the "
      "run snapshot cannot store (an arbitrary picklable object): every rank's report() "
      "returns and fit() succeeds (the metrics are not persisted).", CTRL,
      "report({'obj': object()}) on every rank, no checkpoint -> fit() succeeds",
      "Only what is registered with a checkpoint is written to storage; metrics-only "
      "reports feed callbacks and logs, where any object may go."),
    C("report.collective-warn-env", "MUST", "A RAY_TRAIN_COLLECTIVE_WARN_INTERVAL_S that is not a number is ignored",
      "When the driver's environment holds RAY_TRAIN_COLLECTIVE_WARN_INTERVAL_S with a value "
      "that is not a number (e.g. 'soon') as fit() is called, the run goes on with the "
      "default interval (a warning may be logged): fit() succeeds as without it.",
      "python/ray/train/v2/_internal/constants.py:get_env_vars_to_propagate; " + WG +
      " (env_float)",
      "RAY_TRAIN_COLLECTIVE_WARN_INTERVAL_S=soon -> fit() succeeds",
      "A mistyped tuning variable must not cost a run."),
    C("report.merge-ranks", "MUST", "Checkpoints of several ranks merge",
      "Checkpoints passed by several ranks in one report round are merged into one directory "
      "whose name is rank 0's checkpoint_dir_name (names on other ranks are ignored).", FN,
      "ranks write shard-<r>.bin; one dir holds both shards"),
    C("report.same-name", "MUST", "A report into a folder an earlier checkpoint has merges into it",
      "When a report's checkpoint_dir_name is the folder of a checkpoint reported earlier in "
      "the run (and still kept), its files are written into that folder: a file both "
      "reports passed (at any depth) holds the later report's contents, and the earlier "
      "report's other files stay.", FN,
      "step 0: ranks 0 and 1 pass shard-0, shard-1 into 'same'; step 1: rank 0 alone "
      "passes shard-0 into 'same' -> 'same' holds step 1's shard-0 and step 0's shard-1",
      "A fixed checkpoint_dir_name is a common pattern; a later report must never leave "
      "the folder with the earlier contents, nor drop the files it did not rewrite."),
    C("report.symlinks", "MUST", "A checkpoint stores what its symbolic links point to",
      "A symbolic link in a reported checkpoint folder (to a file or a folder, at any "
      "depth, pointing outside the folder) is stored as a copy of what it points to, with "
      "delete_local_checkpoint_after_upload=True as without it: the persisted checkpoint "
      "holds no link. Deleting the local folder after the upload removes the links, not "
      "their targets.", FN,
      "ckpt/flink -> /data/t.txt; report(..., delete_local_checkpoint_after_upload=True) "
      "-> <run>/ckpt/flink is a file holding t.txt's bytes; /data/t.txt stays",
      "A checkpoint must be whole on its own: a link into a temporary or a cache folder "
      "dangles once that folder goes, and the model is lost."),
    C("report.nonzero-rank-checkpoint", "MUST", "A checkpoint may come from ranks other than 0",
      "A round in which only non-zero ranks pass a checkpoint registers that checkpoint.", FN,
      "rank 1 alone passes a checkpoint; result.checkpoint holds its files"),
    C("report.layout", "MUST", "On-disk layout",
      "A run writes under <storage_path>/<name>/: .validate_storage_marker, "
      "checkpoint_manager_snapshot.json once a checkpoint is registered, and one folder per "
      "checkpoint; nothing else is required and nothing is written outside that folder.",
      STORAGE, "<storage>/<name>/{.validate_storage_marker, checkpoint_manager_snapshot.json, "
      "ckpt-0/}", "Tools that restore runs (Result.from_path, resume by name) read this layout."),
    C("report.get-checkpoint", "MUST", "get_checkpoint sees the last persisted checkpoint",
      "get_checkpoint() is None in a fresh run and, after a report with a checkpoint returns, "
      "is the persisted checkpoint on the reporting rank.", FN),
    C("report.all-reported-checkpoints", "MUST", "get_all_reported_checkpoints lists what the run holds",
      "get_all_reported_checkpoints(consistency_mode=CheckpointConsistencyMode.VALIDATED, "
      "timeout_s=None), called in a training function, returns on every rank a list of "
      "ReportedCheckpoint(checkpoint, metrics, status) (ReportedCheckpoint and "
      "ReportedCheckpointStatus are public names) for the checkpoints the run retains, "
      "worst to best (report order without a score attribute): [] before any checkpoint is "
      "registered; a report's checkpoint is listed as soon as that report() has returned, on "
      "ranks that passed no checkpoint too; metrics are rank 0's metrics of that report; "
      "without validation the status is ReportedCheckpointStatus.COMMITTED.", FN,
      "num_to_keep=2, checkpoints at steps 0, 2, 3: after step 3 every rank lists "
      "[ckpt-0002, ckpt-0003]",
      "Code that hands what it reported to an experiment tracker reads this list; an empty "
      "list drops that work silently."),
    C("report.no-upload", "MUST", "NO_UPLOAD registers a checkpoint where it is",
      "report(metrics, checkpoint=c, checkpoint_upload_mode=CheckpointUploadMode.NO_UPLOAD) "
      "with c a folder inside the run folder registers that folder in place (nothing is "
      "copied; checkpoint_dir_name is not used), and get_checkpoint() on the reporting rank "
      "is then c itself, the very object passed to report(). A folder outside the run "
      "folder makes report() raise ValueError (nothing is registered).", WORKER_CTX,
      "c = Checkpoint.from_directory(<run folder>/inplace-4); report(m, checkpoint=c, "
      "checkpoint_upload_mode=NO_UPLOAD); get_checkpoint() is c"),
    C("report.validated-timeout", "MUST", "get_all_reported_checkpoints waits for validations, at most timeout_s",
      "While a checkpoint's validation is pending, get_all_reported_checkpoints() "
      "(consistency_mode VALIDATED, the default) returns once it settled, listing the "
      "checkpoint as VALIDATED; with timeout_s=t it returns after t seconds (not sooner) "
      "listing it as PENDING_VALIDATION; with CheckpointConsistencyMode.COMMITTED it "
      "returns without waiting, listing it as PENDING_VALIDATION.", FN,
      "validation takes 6 s; get_all_reported_checkpoints(timeout_s=1.5) -> after 1.5 s, "
      "[PENDING_VALIDATION]; get_all_reported_checkpoints() -> [VALIDATED]",
      "A training loop that hands validated checkpoints to a tracker must neither block "
      "past its budget nor take a pending checkpoint for a validated one."),
    C("report.delete-local", "MUST", "delete_local_checkpoint_after_upload deletes only after a whole upload",
      "report(..., delete_local_checkpoint_after_upload=True) stores every rank's files "
      "(subfolders of the same name merged) exactly as without it, and the local folders "
      "are gone when report() returns; with the default (False) the local folder keeps "
      "all its files.", FN,
      "ranks pass more/a-<r>.json with delete_local...=True -> <run>/ckpt/more holds "
      "a-0.json and a-1.json; the local folders are gone",
      "Moving instead of copying saves disk on the node; it must never lose a file nor "
      "take one the user kept."),
    C("report.dir-name-length", "SHOULD", "An over-long checkpoint_dir_name fails on the reporting rank",
      "A checkpoint_dir_name with a path component longer than the run folder's file system "
      "allows (255 bytes on common local file systems) makes report() raise ValueError on "
      "the reporting rank, naming checkpoint_dir_name and the limit, before anything is "
      "written; fit() raises WorkerGroupError.", WORKER_CTX,
      "report(m, checkpoint=c, checkpoint_dir_name='a' * 300)  # ValueError on rank 0",
      ray_note="Ray 2.60 fails in the upload with OSError [Errno 36] File name too long "
      "(fit() raises WorkerGroupError as well)."),
    C("report.unstorable-metrics", "SHOULD", "Metrics the run cannot store fail before anything is staged",
      "When rank 0 passes a checkpoint with metrics the run snapshot cannot store (an "
      "arbitrary object, an array), its report() raises TypeError naming the key and the "
      "value's type before any file is written; fit() raises WorkerGroupError and the run "
      "folder holds nothing new. The same when rank 0 reports such metrics without a "
      "checkpoint while another rank passes one: the metrics stored are rank 0's, so it is "
      "rank 0's report() that raises, and the run folder holds nothing new.", CKMGR,
      "report({'obj': object()}, checkpoint=c)  # TypeError naming 'obj' on rank 0",
      "A failure found after the upload leaves a checkpoint folder nothing refers to.",
      ray_note="Ray 2.60 uploads the checkpoint, then fails writing its snapshot in the "
      "controller (ControllerError: 'Unable to serialize unknown type'), leaving the folder "
      "unregistered; the same when only another rank passes the checkpoint. Its snapshot "
      "stores sets, tuples, datetimes and bytes (as JSON lists "
      "and strings) and numpy.float64, but rejects numpy.int64, numpy.float32 and arrays."),
    # ---------------------------------------------------------------- Result
    C("result.fields", "MUST", "Result fields",
      "A successful fit returns Result with checkpoint = the latest registered checkpoint "
      "(not the best), path = the run folder, error None, return_value = rank 0's return "
      "value.", RESULT, "result.checkpoint.path.endswith(latest_dir_name)"),
    C("result.best-checkpoints", "MUST", "best_checkpoints order and length",
      "best_checkpoints is a list of (Checkpoint, metrics) pairs ordered worst to best "
      "(report order without a score attribute), at most num_to_keep long; [] when none.",
      RESULT),
    C("result.metrics-dataframe", "MUST", "metrics_dataframe",
      "metrics_dataframe is a pandas DataFrame with one row per retained checkpoint's "
      "metrics, or None when no checkpoint was reported.", RESULT),
    C("result.get-best-checkpoint", "MUST", "Result.get_best_checkpoint",
      "get_best_checkpoint(metric, mode) returns the checkpoint with the best value; a mode "
      "other than 'max'/'min' raises ValueError; a metric no checkpoint has raises "
      "RuntimeError; no checkpoints raises RuntimeError.", RESULT),
    C("result.from-path", "MUST", "Result.from_path",
      "Result.from_path(run folder) rebuilds the Result (checkpoint, metrics, "
      "best_checkpoints); a missing folder or one without a snapshot raises RuntimeError.",
      RESULT, "Result.from_path(result.path).checkpoint.path == result.checkpoint.path"),
    C("result.stored-metrics", "MUST", "A checkpoint's metrics come back from storage as JSON",
      "The metrics of a registered checkpoint, read back from the run folder "
      "(Result.from_path(...).best_checkpoints, and the earlier run's checkpoints in a "
      "resumed fit()'s Result.best_checkpoints), are their JSON form: tuples and sets are "
      "lists; NaN, inf and -inf (numpy.float64 included), at the top level or nested in "
      "lists and dicts, are None; keys that are not strings are strings (True is 'true', "
      "None is 'None', 3 is '3'); an Enum is its value, a datetime its isoformat(), bytes "
      "their UTF-8 text; strings, ints, bools and finite floats are unchanged.", CKMGR + ":_TrainingResultState",
      "report({'t': (1, 2), 'l': [nan, 1.5]}, checkpoint=c) -> from_path(...) metrics "
      "{'t': [1, 2], 'l': [None, 1.5]}",
      "Code that reads a finished run's metrics (or ranks a resumed run's checkpoints) sees "
      "what the run folder holds, not what the training function passed; both "
      "implementations must read back the same values from the same report."),
]
