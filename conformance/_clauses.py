"""The clauses of the Ray Train contract, as Ray 2.60 behaves (see `catalogue.py`), and the
record a clause is."""

import dataclasses
from typing import Literal

Level = Literal["MUST", "SHOULD"]


@dataclasses.dataclass(frozen=True)
class Clause:
    id: str
    level: Level
    title: str
    text: str
    source: str
    example: str = ""
    why: str = ""
    ray_note: str = ""

    @property
    def area(self) -> str:
        return self.id.split(".", 1)[0]


C = Clause

CFG = "python/ray/train/v2/api/config.py"
AIR = "python/ray/air/config.py"
CKPT = "python/ray/train/_checkpoint.py"
RESULT = "python/ray/train/v2/api/result.py"
FN = "python/ray/train/v2/api/train_fn_utils.py"
CTRL = "python/ray/train/v2/_internal/execution/controller/controller.py"
CKMGR = "python/ray/train/v2/_internal/execution/checkpoint/checkpoint_manager.py"
FAIL = "python/ray/train/v2/_internal/execution/failure_handling/default.py"
LOCAL = "python/ray/train/v2/_internal/execution/local_mode/"
WG = "python/ray/train/v2/_internal/execution/worker_group/worker_group.py"
ELASTIC = "python/ray/train/v2/_internal/execution/scaling_policy/elastic.py"
CKMGR_SCORE = "python/ray/train/_internal/checkpoint_manager.py:_get_checkpoint_score"
STORAGE = "python/ray/train/v2/_internal/execution/storage.py"
DOC_FT = "https://docs.ray.io/en/latest/train/user-guides/fault-tolerance.html"
TORCH_CFG = "python/ray/train/torch/config.py"
TORCH_UTILS = "python/ray/train/v2/torch/train_loop_utils.py"
WORKER_CTX = "python/ray/train/v2/_internal/execution/context.py"
JAX = "python/ray/train/v2/jax/"
TUNE = "python/ray/tune/"
BACKEND = ("python/ray/train/backend.py; python/ray/train/v2/_internal/callbacks/backend_setup.py; "
           "python/ray/train/v2/_internal/execution/worker_group/execution_group.py")

ALL = [
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
    # ---------------------------------------------------------------- retention
    C("retention.best-plus-latest", "MUST", "Retention keeps the best num_to_keep and the latest",
      "With num_to_keep=k, after each report the retained checkpoints are the best k by "
      "checkpoint_score_attribute (ties: later is better; without an attribute: the k most "
      "recent) plus always the latest one; evicted folders are deleted from storage.", CKMGR,
      "scores [3, 1, 2], k=1, max -> kept: 3 (best) and 2 (latest)",
      "Evicting the latest checkpoint would make a restart lose progress."),
    C("retention.no-leftovers", "MUST", "A finished run folder holds only its kept checkpoints' folders",
      "When fit() returns after a run without faults, the only folders in the run folder "
      "(hidden ones included) are those of the checkpoints it retained: each evicted "
      "checkpoint's folder is deleted whole, and nothing the run staged or wrote aside "
      "stays; files other than checkpoints (the snapshot, markers) lie directly in the run "
      "folder.", CKMGR + ":_save_state_and_delete_old_checkpoints",
      "num_to_keep=1, 4 reports of 2 ranks with a subfolder each -> the run folder's only "
      "folder is ckpt-0003",
      "Evicted checkpoints are usually the bulk of a run's storage; a hidden copy of each "
      "keeps every byte retention was meant to free."),
    C("retention.missing-score", "MUST", "A missing score attribute scores -inf",
      "A checkpoint whose metrics lack checkpoint_score_attribute does not fail the run; it "
      "is scored -inf before the order is applied, so it ranks worst under 'max' and best "
      "under 'min'.", CKMGR,
      ray_note="The docs do not say; Ray negates the score for 'min', turning the -inf of a "
      "missing attribute into the best possible score."),
    C("retention.non-finite-score", "MUST", "NaN scores rank worst, infinities as numbers",
      "A checkpoint whose score attribute is NaN ranks below every other checkpoint under "
      "both orders (below -inf and below a missing score; among NaNs the later is better), "
      "so retention evicts it first; +inf and -inf rank as numbers after the order is "
      "applied (+inf is the best under 'max' and the worst under 'min').", CKMGR_SCORE,
      "scores [nan, 1, -inf], k=1, max -> kept: 1 (best) and -inf (latest); the NaN "
      "folder is deleted",
      "A diverged step (loss = NaN) must never be kept as the best checkpoint, whichever "
      "order the metric uses."),
    C("retention.shared-name", "SHOULD", "A folder is deleted only when no kept checkpoint names it",
      "When reports reuse one checkpoint_dir_name (each upload writes into the same "
      "folder), evicting one of those checkpoints does not delete the folder while a "
      "retained checkpoint (the latest included) still names it; it is deleted once the "
      "last checkpoint naming it is evicted.", CKMGR + ":_save_state_and_delete_old_checkpoints",
      "num_to_keep=1, checkpoint_dir_name 'shared' at steps 0 and 1: after step 1 "
      "get_checkpoint() is 'shared' and its files exist",
      "A fixed checkpoint_dir_name ('latest') is a common pattern; deleting the folder "
      "the latest checkpoint lives in loses the run's progress.",
      ray_note="Ray 2.60 deletes the evicted entry's folder, which is the latest "
      "checkpoint's (get_checkpoint() then names a folder that does not exist), and when "
      "it evicts the second entry naming it, fit() raises ControllerError ('Path not "
      "found')."),
    C("retention.nested-score", "MUST", "Nested metric keys",
      "checkpoint_score_attribute looks into nested metric dicts with '/' separators "
      "('eval/acc' reads metrics['eval']['acc']).", CKMGR),
    C("validation.merge-and-rank", "MUST", "A validation's metrics join its checkpoint's",
      "With validation_config=ValidationConfig(fn, task_config), report(metrics, "
      "checkpoint=c, validation=True) registers c PENDING_VALIDATION (ranked by the "
      "reported metrics, never evicted while pending) and runs fn(c, **fn_kwargs) outside "
      "the workers; the dict it returns is merged into c's metrics, c becomes VALIDATED and "
      "moves to its place by checkpoint_score_attribute among the retained checkpoints, "
      "and retention runs again; a fn that raises leaves c VALIDATION_FAILED with its "
      "metrics and place unchanged. get_all_reported_checkpoints() (VALIDATED consistency) "
      "returns once no validation is pending; fit() returns after every validation "
      "settled, and Result.best_checkpoints carries the merged metrics.",
      CKMGR + ":update_checkpoints_with_validation_result",
      "num_to_keep=1, score 'val', fn returns {'val': 3}, {'val': 1}, raises, {'val': 2} "
      "-> kept: ckpt-0000 (val 3) and the latest ckpt-0003 (val 2)",
      "Validation scores (an eval metric computed off the training workers) are what "
      "users rank checkpoints by; a lost merge keeps the wrong checkpoints."),
    # ---------------------------------------------------------------- context
    C("context.ranks", "MUST", "TrainContext ranks on one node",
      "On each worker get_context() reports world size N, a distinct world rank in 0..N-1, "
      "local rank = world rank, local world size N and node rank 0 on a single node; "
      "get_experiment_name() is RunConfig.name.", "python/ray/train/v2/api/context.py"),
    C("context.collectives", "MUST", "broadcast_from_rank_zero and barrier",
      "In a training function on N workers, <root>.train.collective.broadcast_from_rank_zero"
      "(data) returns rank 0's data on every rank and barrier() returns None on every rank "
      "once all ranks called it.", "python/ray/train/collective/collectives.py",
      "rank r calls broadcast_from_rank_zero({'from_rank': r}) -> {'from_rank': 0} on both",
      "Ranks agree on a value (a run id, a vocabulary) without a framework's process group."),
    C("context.omp-threads", "MUST", "A worker's OpenMP threads follow its CPUs",
      "Unless OMP_NUM_THREADS is already set, every worker process starts with "
      "OMP_NUM_THREADS = floor(CPUs of resources_per_worker), at least 1: '1' by default, "
      "'2' with resources_per_worker={'CPU': 2}.",
      "python/ray/_private/utils.py:set_omp_num_threads_if_unset",
      "ScalingConfig(num_workers=2) -> os.environ['OMP_NUM_THREADS'] == '1' in each worker",
      "torch, XGBoost and LightGBM size their thread pools from it: N workers of one CPU on "
      "an N-core host must not each start N threads."),
    C("context.multi-node", "MUST", "Ranks are contiguous per node",
      "On several nodes, world ranks are contiguous per node, local_rank counts within the "
      "node, local_world_size is the node's worker count and node_rank numbers nodes in "
      "order of first appearance.", WG,
      "2 nodes x 2 workers: node 0 has ranks 0,1 and node 1 has ranks 2,3"),
    # ---------------------------------------------------------------- fault tolerance
    C("fault.restart", "MUST", "A failed worker restarts the whole group",
      "When a worker raises, exits or is killed and failures remain in the budget, every rank "
      "is restarted and runs the training function again from the top.", DOC_FT),
    C("fault.max-failures", "MUST", "max_failures counts restarts",
      "max_failures=N allows N restarts (N+1 attempts); 0 allows none; -1 is unlimited.",
      FAIL, "FailureConfig(max_failures=1): one crash recovers, a second fails the run"),
    C("fault.restore-latest", "MUST", "A restart resumes from the latest checkpoint",
      "After a restart get_checkpoint() on every rank is the same checkpoint: the latest one "
      "the run registered before the failure. The check leaves 0.5 s between a report and "
      "the next fault, so that any implementation has registered the report; the guarantee "
      "without that pause is the SHOULD clause fault.acknowledged-checkpoint.", DOC_FT,
      "crash at step 3 of 4 -> every rank of the next attempt starts from step 2's checkpoint"),
    C("fault.worker-group-error", "MUST", "fit raises WorkerGroupError",
      "When the budget is spent fit() raises WorkerGroupError, a TrainingFailedError, whose "
      "worker_failures maps world rank to the original exception (for a raising rank), and "
      "whose message is 'Training failed due to worker errors:' once, then for each failed "
      "rank a '[Rank N Error Snippet]' block holding that rank's error.", FAIL,
      "except WorkerGroupError as e: e.worker_failures[1] is the user's exception"),
    C("fault.user-callbacks", "MUST", "UserCallback hooks see every report and failure",
      "A RunConfig(callbacks=[c]) UserCallback's after_report is called once per "
      "consolidated report round, in order, with metrics = every rank's dict ordered by "
      "world rank and the round's Checkpoint (None without one); after_exception is called "
      "with {world rank: exception} of the ranks that failed, once per failed attempt; both "
      "get a run_context whose get_run_config() is the run's RunConfig.",
      "python/ray/train/v2/api/callback.py; "
      "python/ray/train/v2/_internal/callbacks/user_callback.py",
      "2 workers, rank 1 raises at report 1, max_failures=1: after_report for step 0, "
      "after_exception({1: ...}), after_report for steps 1 and 2",
      "Callbacks are how runs reach trackers and alerting; a missed failure or a report "
      "counted twice is a wrong dashboard."),
    C("fault.restart-first-report", "SHOULD", "A crash at a restarted attempt's first report is a worker failure",
      "A worker that fails before its first report on a restarted attempt is charged to "
      "max_failures like any other worker failure.", FAIL,
      ray_note="Ray 2.60 may classify it as a worker-group start failure and raise "
      "ControllerError with a budget of 0 (see research/ray_observed.md)."),
    C("fault.acknowledged-checkpoint", "SHOULD", "Acknowledged checkpoints survive failures",
      "A checkpoint whose report() returned on every rank before a failure is the one the "
      "restarted attempt resumes from (or a later one).", DOC_FT,
      "rank 1 dies right after report(step=2) returned; the restart sees step 2",
      "Users delete local state after report returns; resuming from an older checkpoint "
      "silently repeats work.",
      ray_note="Ray 2.60 can drop a report it has not consumed yet at restart and resume "
      "from the checkpoint before it."),
    # ---------------------------------------------------------------- resume
    C("resume.by-name", "MUST", "A second fit with the same name resumes",
      "fit() with the same (storage_path, name) as a finished or failed run starts with "
      "get_checkpoint() = that run's latest checkpoint.", DOC_FT),
    C("resume.corrupt-snapshot", "MUST", "A corrupt snapshot stops the resumed fit() before training",
      "When the run folder's checkpoint_manager_snapshot.json is not a snapshot (not JSON; "
      "a field missing or not of its type: checkpoint_results not a list, an entry without "
      "metrics, a report index or current_report_index that is not an integer, "
      "validated_checkpoint_dir_names not a list of "
      "strings; checkpoint_report_indices not one per checkpoint; pending_validation_specs "
      "not one per pending result; latest_checkpoint_result or a pending result naming a "
      "folder checkpoint_results does not list), fit() with that name raises before any "
      "worker runs the training function and leaves the snapshot as it was, and "
      "Result.from_path(run folder) raises.", CKMGR + ":_load_state",
      "checkpoint_report_indices one short (or one too many) -> fit() raises; no worker "
      "started; the file is "
      "unchanged",
      "Resuming from a snapshot read wrongly restores the wrong checkpoint or evicts the "
      "good ones; stopping keeps the run folder for a person to repair.",
      ray_note="Ray 2.60 raises ActorDiedError (its controller dies in __init__); it "
      "coerces numeric strings where integers belong ('3' is read as 3), which this clause "
      "leaves open."),
    C("resume.missing-checkpoint", "MUST", "A listed checkpoint folder gone stops the resumed fit()",
      "When a checkpoint folder the run's snapshot lists no longer exists, fit() with that "
      "name raises before any worker runs the training function and changes nothing in the "
      "run folder, and Result.from_path(run folder) raises an error naming the folder.",
      CKMGR + ":_assert_checkpoints_exist",
      "rm -r <run>/ckpt-0000; fit() raises, no worker started; Result.from_path raises",
      "Resuming without a checkpoint the snapshot promises would rank, restore or evict "
      "from a record that no longer matches storage; a person decides what to repair.",
      ray_note="Ray 2.60 raises ActorDiedError from fit() (its controller dies in "
      "__init__) and CheckpointManagerInitializationError from Result.from_path."),
    C("resume.retention", "MUST", "A resumed run ranks the earlier run's checkpoints",
      "A fit() that resumes (same storage_path and name) continues the earlier run's "
      "retention: the checkpoints the earlier run kept count toward num_to_keep and are "
      "ranked with the new ones by the score attribute (the report index continues, so on "
      "equal scores the later report is better), earlier folders that fall out are "
      "deleted, and Result.best_checkpoints lists the retained checkpoints of both runs.",
      CKMGR + ":_maybe_load_state_from_storage",
      "num_to_keep=2, max: first run 5, 1, 2; second run 3, 0 -> kept: 5 (first run), "
      "3 and the latest 0 (second run)",
      "A run resumed after a crash must not keep a worse checkpoint than it had, nor "
      "leave the earlier run's folders behind forever."),
    C("resume.nan-score", "SHOULD", "A run whose kept checkpoint scored NaN resumes",
      "A fit() resuming a run whose retained checkpoints include one with a NaN score "
      "starts, reads that score back as NaN and ranks it below every other checkpoint "
      "(clause retention.non-finite-score), so the next report evicts it.",
      CKMGR + ":_load_state",
      "num_to_keep=1, max: first run 1, NaN (the latest); second run 0.5, 2 -> kept: 2",
      "A diverged last step (loss NaN) is exactly when a run is resumed.",
      ray_note="Ray 2.60 writes the NaN score into its snapshot as null and the resumed "
      "fit() raises ControllerError (\"unsupported operand type(s) for *: 'float' and "
      "'NoneType'\")."),
    C("resume.snapshot-write-failure", "MUST", "A failed snapshot write loses nothing",
      "When writing the run's snapshot fails while a reported checkpoint is registered, or "
      "while a validation's result is merged (the storage file system raises), fit() "
      "raises ControllerError, no checkpoint that change would have evicted is deleted, "
      "and a later fit() of the same run resumes from the snapshot written last: "
      "get_checkpoint() at its start is the latest checkpoint registered before the "
      "failure, which is still whole; a checkpoint whose registration failed is in no "
      "listing or Result, and one whose validation result was not stored is validated "
      "again by the later fit().", CKMGR +
      ":_save_state_and_delete_old_checkpoints",
      "num_to_keep=1; the snapshot write of step 2's registration fails -> ControllerError; "
      "step 1's folder stays; the next fit() starts from step 1",
      "A storage outage at the wrong moment must cost at most the report it interrupted, "
      "never the checkpoint a restart needs."),
    C("report.object-store", "MUST", "A run on an object store",
      "With RunConfig(storage_filesystem=fs) where fs is a pyarrow S3FileSystem and "
      "storage_path='<bucket>/<prefix>', the run folder is <bucket>/<prefix>/<name>/ on fs: "
      "each retained checkpoint's folder there holds the files every rank passed to that "
      "report, the folders retention evicts are deleted from the bucket, Result.checkpoint "
      "and best_checkpoints are Checkpoints on fs (to_directory() downloads their files), "
      "a second fit() with the same name resumes from the latest checkpoint, and a rank's "
      "local folder reported with delete_local_checkpoint_after_upload=True is deleted once "
      "uploaded (the others stay); a checkpoint_dir_name several folders deep "
      "('epochs/0/e-0') is stored there and resumed from.", STORAGE,
      "RunConfig(storage_path='bucket/runs', storage_filesystem=pafs.S3FileSystem(...))",
      "Clusters keep checkpoints in object stores, where nothing can be renamed into place; "
      "what local disk proves says nothing about that path."),
    C("report.custom-filesystem", "MUST", "A run on a filesystem rooted elsewhere",
      "With RunConfig(storage_filesystem=fs) where fs is a pyarrow SubTreeFileSystem over a "
      "local folder and storage_path='runs', storage_path is a path on fs: the run folder "
      "is runs/<name>/ under the subtree's root and nothing is written elsewhere; its only "
      "folders are the retained checkpoints' (each holding the files every rank passed to "
      "that report), Result's checkpoints are Checkpoints on fs, and a second fit() with "
      "the same name resumes from the latest checkpoint, also from a checkpoint_dir_name "
      "several folders deep ('epochs/0/e-0').", STORAGE,
      "RunConfig(storage_path='runs', storage_filesystem=pafs.SubTreeFileSystem(root, "
      "pafs.LocalFileSystem()))",
      "Teams wrap storage in their own pyarrow filesystems (a subtree, HDFS, a mount "
      "adapter); such a filesystem is neither the local disk nor an object store, and a "
      "path resolved against the wrong root writes checkpoints where nobody looks."),
    C("report.uri-storage-path", "MUST", "A storage_path given as a file:// URI",
      "RunConfig(storage_path='file:///abs/folder') is the local folder /abs/folder: the run "
      "folder is /abs/folder/<name> on the local disk, Result.path is that path without "
      "the scheme, and Result.checkpoint is a Checkpoint on a pyarrow LocalFileSystem.",
      STORAGE, "RunConfig(storage_path='file:///mnt/runs')",
      "A URI is how one configuration names local, NFS and object storage alike; a file:// "
      "storage_path must not be refused as a relative path or land under a folder named "
      "'file:'."),
    # ---------------------------------------------------------------- local mode
    C("local.in-driver", "MUST", "Local mode runs in the driver",
      "num_workers=0 runs the training function synchronously in the process that called "
      "fit(), with world size 1 and rank 0.", LOCAL),
    C("local.result", "MUST", "Local mode report and Result",
      "In local mode nothing is persisted: Result.metrics is the metrics of the last "
      "report (even without a checkpoint); Result.checkpoint and get_checkpoint() are the "
      "Checkpoint object passed to the last report (None when that report had none); "
      "Result.path is None; return_value is the function's.", LOCAL,
      "report(m1, checkpoint=c); report(m2) -> result.metrics == m2, result.checkpoint None",
      "Users debug their loop in local mode; they must know it forgets a checkpoint as soon "
      "as a metrics-only report follows.",
      ray_note="Differs from distributed mode, where metric-only reports are dropped and the "
      "latest checkpoint stays. Notes that say local mode keeps the last checkpoint are "
      "wrong for 2.60."),
    C("local.collectives", "MUST", "Collectives of local mode's one rank",
      "In local mode <root>.train.collective.broadcast_from_rank_zero(data) returns data "
      "and barrier() returns None at once (the training function is the only rank).",
      LOCAL, "broadcast_from_rank_zero({'a': 1}) == {'a': 1}",
      "Code that syncs ranks must run unchanged in local mode, where it is debugged."),
    C("local.exceptions", "MUST", "Local mode exceptions propagate unwrapped",
      "An exception raised by the training function in local mode propagates from fit() "
      "as the same object, not wrapped in TrainingFailedError.", LOCAL),
    # ---------------------------------------------------------------- elastic
    C("elastic.start-what-fits", "MUST", "Elastic training starts with what fits",
      "num_workers=(min, max) starts with as many workers as the cluster can hold, up to max.",
      ELASTIC),
    C("elastic.wait-below-min", "MUST", "Elastic training waits below min",
      "While fewer than min workers fit, no worker group starts; once resources appear it "
      "starts.", ELASTIC),
    C("elastic.grow", "MUST", "Elastic training grows onto new nodes",
      "When nodes are added, the group restarts at the larger size within about "
      "elastic_resize_monitor_interval_s, resumes from the latest checkpoint the controller "
      "had taken (each rank's newest returned report may still be queued when the group "
      "stops: Ray 2.60 queues one report per rank), and the resize is not charged to "
      "max_failures.", ELASTIC),
    C("elastic.steady", "MUST", "An elastic group is left alone while nothing changes",
      "While the cluster's resources stay the same, the monitor's checks (at most one per "
      "elastic_resize_monitor_interval_s) neither restart nor resize a running elastic "
      "group: the run ends in the one attempt it started with.", ELASTIC +
      ":make_decision_for_running_worker_group",
      "num_workers=(1, 4) on 1 node x 2 CPUs for five monitor intervals -> one attempt of "
      "2 workers",
      "Each resize is a full restart from the latest checkpoint: one at every tick would "
      "lose the progress since that checkpoint again and again."),
    C("elastic.monitor-interval", "MUST", "A running group is considered for a resize once per interval",
      "A running elastic group is first considered for a resize elastic_resize_monitor_interval_s "
      "after it started, then again every interval: resources that appear while the group "
      "starts (after its size was chosen) are not used before the interval has passed, so a "
      "run shorter than the interval ends at the size it started with; a node added after "
      "the first consideration found nothing is used at a later one.", ELASTIC +
      ":make_decision_for_running_worker_group (worker_group_state.start_time, "
      "_latest_monitor_time)",
      "num_workers=(1, 4), interval 60 s, a node added during on_start, a 4-step run -> one "
      "attempt of 2 workers",
      "A resize restarts the group from its latest checkpoint; the interval is what bounds "
      "how often a growing cluster costs that."),
    # ---------------------------------------------------------------- backend
    C("backend.hooks", "MUST", "A custom Backend's hooks run around the training function",
      "For a BackendConfig subclass whose backend_cls is a Backend subclass, passed as "
      "DataParallelTrainer(backend_config=...): on_start and then on_training_start run once "
      "per worker group, in one process that is none of the workers, after the workers "
      "started and before the training function; what functions they run on the workers "
      "(execute, execute_single, execute_async with the root's get) set is seen by the "
      "training function, and get_context() works in them; the training function runs "
      "inside train_func_context() on every worker; on_shutdown runs after every rank "
      "returned, with the workers still up (its functions run in the same worker processes, "
      "after train_func_context exited).", BACKEND,
      "class B(Backend): def on_start(self, wg, cfg): wg.execute(set_env, 'X', '1')",
      "Every framework integration (torch, XGBoost, LightGBM, JAX, TensorFlow) is a backend; "
      "a third-party backend must work on any implementation of the contract."),
    C("backend.worker-group", "MUST", "The worker group a backend gets",
      "The worker_group passed to the hooks has len() == num_workers; execute(fn) returns "
      "fn's values in world-rank order; get_workers() lists the workers in world-rank "
      "order with metadata.pid (the worker's process), metadata.node_ip and "
      "distributed_context.world_rank / local_rank; get_resources_per_worker() is the "
      "resources of one worker ({'CPU': 1} by default).", BACKEND,
      "wg.execute_single(0, get_address_and_port)"),
    C("backend.on-start-error", "MUST", "An on_start that raises in the driver fails at once",
      "An exception raised by Backend.on_start itself fails fit() with ControllerError whose "
      "controller_failure is that exception; the training function never runs.", BACKEND,
      "on_start raises ValueError -> ControllerError(ValueError), no retry",
      "A backend rejects a bad configuration in on_start (TorchConfig(init_method='bad')); "
      "retrying cannot help."),
    C("backend.on-shutdown-error", "MUST", "An on_shutdown that raises fails a run that succeeded",
      "When every rank's training function returned and Backend.on_shutdown then raises, "
      "fit() raises ControllerError whose controller_failure is that exception; the hook "
      "ran once, after the training functions.", BACKEND +
      "; python/ray/train/v2/_internal/execution/controller/controller.py:513-518",
      "on_shutdown raises RuntimeError -> ControllerError(RuntimeError)",
      "A backend that cannot tear down cleanly (a process group that hangs, a tracker that "
      "does not stop) must not let the run report success."),
    C("backend.worker-error", "MUST", "A backend function that raises on a worker fails fit()",
      "An exception raised on a worker by a function on_start runs there fails fit() with "
      "ControllerError whose controller_failure is an instance of the worker's exception "
      "class; the training function never runs.", BACKEND,
      "ray.get(wg.execute_async(fn_raising_KeyError)) -> ControllerError(KeyError)",
      ray_note="Ray raises it at once (a RayTaskError(KeyError) is not a retryable controller "
      "error); the reference retries the group start twice first, since a rendezvous can "
      "fail by chance, then raises the same error."),
    C("backend.worker-death-retried", "MUST", "A worker that dies while the group starts is retried",
      "A worker process that dies while the worker group starts (here: in a function "
      "Backend.on_start runs on it, before any training function) is a start failure, "
      "charged to FailureConfig.controller_failure_limit (default -1: unlimited), never to "
      "max_failures: a group is started again and, when it starts, the run succeeds even "
      "with max_failures=0. With controller_failure_limit=0 fit() raises ControllerError "
      "and no training function runs.", BACKEND + "; " + FAIL + ":RETRYABLE_CONTROLLER_ERRORS",
      "rank 1 exits in the first on_start, max_failures=0 -> a second group trains, fit() "
      "succeeds",
      "A node that loses a worker while the group is set up (a preempted host, an OOM kill "
      "at import) must not end a run that has not started training."),
    C("backend.controller-error-shutdown", "MUST", "A controller error shuts the backend down",
      "When the run fails in the controller while a group runs (a UserCallback's after_report "
      "raises), fit() raises ControllerError whose controller_failure is that exception, "
      "and Backend.on_shutdown ran once, after on_start and on_training_start.", BACKEND +
      "; " + CTRL + ":_shutdown",
      "UserCallback.after_report raises RuntimeError -> ControllerError(RuntimeError); "
      "hooks on_start, on_training_start, on_shutdown"),
    # ---------------------------------------------------------------- torch
    C("torch.config", "MUST", "TorchConfig fields and defaults",
      "TorchConfig(backend=None, init_method='env', timeout_s=1800).", TORCH_CFG,
      "TorchConfig().init_method == 'env'"),
    C("torch.process-group", "MUST", "Workers run in one torch.distributed process group",
      "Under TorchTrainer every worker's training function runs inside an initialized "
      "torch.distributed default process group whose world size and rank are the Train "
      "context's; with no GPU the backend is gloo (an all_reduce across ranks works).",
      TORCH_CFG, "dist.get_world_size() == get_context().get_world_size()",
      "DDP and every collective rely on it; a wrong rank silently corrupts gradients."),
    C("torch.env", "MUST", "torchrun-style environment variables",
      "Workers see RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE and NODE_RANK equal to the "
      "context's values, and MASTER_ADDR / MASTER_PORT identical on every rank.", TORCH_CFG,
      "os.environ['RANK'] == str(get_context().get_world_rank())"),
    C("torch.device", "MUST", "get_device on CPU workers",
      "On a worker without GPUs get_device() is the cpu device and get_devices() is [cpu].",
      TORCH_UTILS),
    C("torch.prepare-model", "MUST", "prepare_model wraps in DDP",
      "With more than one worker prepare_model(model) returns a DistributedDataParallel "
      "wrapper; parallel_strategy=None returns the unwrapped module.", TORCH_UTILS),
    C("torch.prepare-data-loader", "MUST", "prepare_data_loader shards the data",
      "With more than one worker prepare_data_loader adds a DistributedSampler with "
      "num_replicas = world size and rank = world rank that keeps the loader's shuffle "
      "setting; the ranks' batches are disjoint and together cover the dataset.",
      TORCH_UTILS),
    # ---------------------------------------------------------------- accelerators
    C("accelerator.gpu-ids", "MUST", "Each GPU worker sees the GPUs it holds",
      "With use_gpu=True and a backend that does not share devices (DataParallelTrainer's "
      "BackendConfig), each worker's CUDA_VISIBLE_DEVICES lists exactly the GPU ids of its "
      "bundle: two workers of one GPU each on a 2-GPU node see '0' and '1' (one each); "
      "resources_per_worker={'GPU': 2} gives one worker '0,1'. The ids are the node's "
      "logical GPU ids, so the rule holds for GPUs a cluster declares as for real ones.",
      "python/ray/_private/accelerators/nvidia_gpu.py",
      "DataParallelTrainer(fn, scaling_config=ScalingConfig(num_workers=2, use_gpu=True))"),
    C("accelerator.gpu-share", "MUST", "TorchTrainer shares a node's GPUs among its workers",
      "With TorchTrainer (TorchConfig's backend has share_cuda_visible_devices=True) and "
      "GPU workers, every worker's CUDA_VISIBLE_DEVICES is the sorted union of the GPU ids "
      "the run's workers hold on its node, set before the training function starts: two "
      "workers of one GPU each on a 2-GPU node both see '0,1'.",
      "python/ray/train/v2/_internal/callbacks/accelerators.py",
      "TorchTrainer(fn, scaling_config=ScalingConfig(num_workers=2, use_gpu=True))"),
    C("accelerator.fractional-gpu", "MUST", "Fractional GPUs pack workers onto one GPU",
      "resources_per_worker={'GPU': 0.5} with use_gpu=True puts two workers on one GPU of a "
      "1-GPU node; both see CUDA_VISIBLE_DEVICES '0' (with TorchTrainer's sharing too).",
      "python/ray/_private/accelerators/nvidia_gpu.py",
      "ScalingConfig(num_workers=2, use_gpu=True, resources_per_worker={'GPU': 0.5})"),
    C("accelerator.rocm-ids", "SHOULD", "AMD GPUs are named in HIP_VISIBLE_DEVICES",
      "On a node whose GPUs are AMD (ROCm), a GPU worker's device ids go to "
      "HIP_VISIBLE_DEVICES, as Ray's AMDGPUAcceleratorManager writes them, and "
      "CUDA_VISIBLE_DEVICES is not set for them.",
      "python/ray/_private/accelerators/amd_gpu.py",
      "DataParallelTrainer(fn, scaling_config=ScalingConfig(num_workers=2, use_gpu=True)) "
      "on a ROCm node"),
    C("accelerator.torch-devices", "MUST", "get_device() is the worker's GPU by position",
      "In a TorchTrainer GPU worker get_devices() lists, for each GPU id the worker holds, "
      "cuda:<the id's position in CUDA_VISIBLE_DEVICES>, and get_device() is the first: two "
      "workers sharing '0,1' compute on cuda:0 and cuda:1, a worker of GPU: 2 on "
      "[cuda:0, cuda:1], two workers of GPU: 0.5 both on cuda:0. Where the GPUs are declared "
      "but torch reaches no CUDA device, an implementation may instead give every worker "
      "[cpu] (the reference does, so GPU code runs on simulated nodes; Ray names the cuda "
      "devices regardless).",
      "python/ray/air/_internal/device_manager/nvidia_gpu.py",
      "TorchTrainer(fn, scaling_config=ScalingConfig(num_workers=2, use_gpu=True)); "
      "get_devices()"),
    C("accelerator.prepare-on-device", "MUST", "prepare_model and prepare_data_loader use the "
      "worker's device",
      "In a GPU worker prepare_model(model) returns the model with its parameters on "
      "get_device() (cuda:0 for a worker of one real GPU) and the loader of "
      "prepare_data_loader yields batches on that device. On declared GPUs that torch cannot "
      "reach, where get_device() still names cuda, the check is skipped: nothing can be "
      "moved there.",
      "python/ray/train/v2/torch/train_loop_utils.py",
      "TorchTrainer(fn, scaling_config=ScalingConfig(num_workers=1, use_gpu=True)); "
      "prepare_model(nn.Linear(4, 2)); prepare_data_loader(DataLoader(...))"),
    C("accelerator.nccl", "MUST", "TorchTrainer's GPU workers join an NCCL process group",
      "With use_gpu=True and TorchConfig's default backend, the workers' torch.distributed "
      "group is NCCL, and a collective on tensors on get_device() completes. Checked only "
      "where the GPUs are real (NCCL needs CUDA devices); skipped, saying so, on declared "
      "ones.",
      "python/ray/train/torch/config.py",
      "TorchTrainer(fn, scaling_config=ScalingConfig(num_workers=1, use_gpu=True)); "
      "dist.get_backend()"),
    C("accelerator.type", "MUST", "accelerator_type places workers on nodes of that type",
      "ScalingConfig(accelerator_type='X') adds the resource 'accelerator_type:X' (0.001 per "
      "worker) to each worker's bundle, so the workers run only on nodes that publish it: "
      "on a node of A100 GPUs and one of T4 GPUs, fits asking for A100 run on the first "
      "and a fit asking for T4 on the second.",
      "python/ray/air/config.py",
      "ScalingConfig(num_workers=2, use_gpu=True, accelerator_type='A100')"),
    C("accelerator.tpu-chips", "MUST", "A TPU worker sees the chips it holds",
      "With use_tpu=True a worker holding one chip of a 4-chip TPU host sees that chip's id "
      "in TPU_VISIBLE_CHIPS with TPU_CHIPS_PER_HOST_BOUNDS '1,1,1'; one holding two "
      "(resources_per_worker={'TPU': 2}) sees two ids with '1,2,1'; TPU_HOST_BOUNDS is "
      "'1,1,1' (one host) for both. The chips are declared (simulated) here; the rule is "
      "the same on a TPU VM.",
      "python/ray/_private/accelerators/tpu.py",
      "ScalingConfig(num_workers=1, use_tpu=True, resources_per_worker={'TPU': 2})"),
    # ---------------------------------------------------------------- lightning
    C("lightning.names", "MUST", "ray.train.lightning names; the legacy trainer is gone",
      "ray.train.lightning exports exactly prepare_trainer, RayDDPStrategy, RayFSDPStrategy, "
      "RayDeepSpeedStrategy, RayLightningEnvironment and RayTrainReportCallback; "
      "RayTrainReportCallback.CHECKPOINT_NAME is 'checkpoint.ckpt'. The LightningTrainer and "
      "LightningConfigBuilder of older releases do not exist: importing them raises "
      "ImportError (cannot import name ...), not a deprecation error.",
      "python/ray/train/lightning/__init__.py",
      "from ray.train.lightning import LightningTrainer  # ImportError",
      "Code from older guides must fail at the import, where the fix is obvious: build a "
      "Lightning Trainer inside a TorchTrainer training function."),
    C("lightning.package", "MUST", "The integration binds to lightning.pytorch",
      "With the `lightning` package importable, the strategies, the environment and the "
      "callback subclass lightning.pytorch's DDPStrategy, FSDPStrategy, DeepSpeedStrategy, "
      "LightningEnvironment and Callback (pytorch_lightning's only when `lightning` is "
      "missing); with both installed, a pytorch_lightning.Trainer rejects RayDDPStrategy "
      "with ValueError ('You selected an invalid strategy name ...').",
      "python/ray/train/lightning/_lightning_utils.py:import_lightning",
      "import lightning.pytorch as pl; pl.Trainer(strategy=RayDDPStrategy())",
      "Mixing `pytorch_lightning` and `lightning.pytorch` imports is the usual cause of the "
      "ValueError; users must import the package the integration binds to."),
    C("lightning.prepare-trainer", "MUST", "prepare_trainer checks the strategy and the environment",
      "prepare_trainer(trainer) returns the same trainer when its strategy is one of the Ray "
      "strategies and its cluster environment is RayLightningEnvironment; another strategy "
      "raises RuntimeError('Invalid strategy class: <class>. To use PyTorch Lightning with "
      "Ray, the strategy object should be one of [...] class or its subclass.'), another "
      "environment (Lightning's default when the plugin is missing) RuntimeError('Invalid "
      "cluster environment plugin. The expected class is`ray.train.lightning."
      "RayLightningEnvironment` but got <class>!').",
      "python/ray/train/lightning/_lightning_utils.py:prepare_trainer",
      "prepare_trainer(pl.Trainer(strategy='ddp'))  # RuntimeError",
      ray_note="The missing space before the backtick is in Ray's message."),
    C("lightning.ranks", "MUST", "Lightning sees the train context's ranks and device",
      "Inside a TorchTrainer worker, a Lightning Trainer built with RayDDPStrategy and "
      "RayLightningEnvironment has world_size, global_rank, local_rank and node_rank equal to "
      "the train context's; RayLightningEnvironment returns the same; the strategy's "
      "root_device is ray.train.torch.get_device(), its distributed_sampler_kwargs "
      "{'num_replicas': world size, 'rank': world rank}, and Lightning's training loader "
      "gets a DistributedSampler.",
      "python/ray/train/lightning/_lightning_utils.py:RayLightningEnvironment",
      "trainer.global_rank == ray.train.get_context().get_world_rank()"),
    C("lightning.report", "MUST", "RayTrainReportCallback reports once per epoch from every rank",
      "RayTrainReportCallback() reports in on_train_epoch_end, on every rank, once per "
      "training epoch: the metrics are trainer.callback_metrics as Python numbers plus "
      "'epoch' (current_epoch) and 'step' (global_step), set last; validation metrics are "
      "included; the report passes checkpoint_upload_mode=SYNC (the default None) and "
      "validation=False. Each report registers a checkpoint, so Result.best_checkpoints holds "
      "one per epoch.",
      "python/ray/train/lightning/_lightning_utils.py:RayTrainReportCallback.on_train_epoch_end",
      "2 epochs -> result.metrics == {'loss': ..., 'val_loss': ..., 'epoch': 1, 'step': 8}",
      "Tuning and fault tolerance read these metrics; a report from only some ranks would "
      "hang the round."),
    C("lightning.checkpoint", "MUST", "The Lightning checkpoint is checkpoint.ckpt",
      "Each epoch's checkpoint folder holds exactly checkpoint.ckpt, written by "
      "trainer.save_checkpoint on global rank 0 (the other ranks report an empty folder); "
      "LightningModule.load_from_checkpoint(<folder>/checkpoint.ckpt) restores the model "
      "rank 0 had.",
      "python/ray/train/lightning/_lightning_utils.py:RayTrainReportCallback",
      "with result.checkpoint.as_directory() as d: "
      "Model.load_from_checkpoint(f'{d}/checkpoint.ckpt')"),
    C("lightning.ddp-equivalence", "MUST", "DDP through Lightning equals one process",
      "W workers with per-rank batch b, under RayDDPStrategy, end with identical weights, "
      "equal within float tolerance (1e-5 here) to one process training on global batches "
      "of W*b in the order Lightning's DistributedSampler gives (shuffled with seed 0, "
      "reseeded every epoch).", "python/ray/train/lightning/_lightning_utils.py:RayDDPStrategy",
      why="A wrong rank or sampler silently trains a different model."),
    C("lightning.local", "MUST", "Lightning in local mode",
      "With num_workers=0 the same training function runs in the driver with world size 1 "
      "and rank 0 as Lightning sees them; each epoch is reported; Result.metrics are the last "
      "epoch's. Result.checkpoint is the object passed to the last report, whose folder the "
      "callback has deleted: it no longer exists on disk.",
      "python/ray/train/v2/_internal/execution/local_mode/torch.py",
      ray_note="Ray 2.60 keeps no copy of a local-mode checkpoint, so the Lightning "
      "checkpoint of a local run is gone once fit() returns."),
    C("lightning.local-process-group", "MUST", "Local mode leaves no process group behind",
      "In local mode Lightning's DDP strategy creates a one-process torch.distributed group "
      "in the driver; when fit() returns, the TorchTrainer has destroyed it (Ray destroys "
      "any initialized default group after the training function returned), so the next "
      "local-mode fit in the same process starts without one.",
      "python/ray/train/v2/_internal/execution/local_mode/torch.py:LocalTorchController.run",
      why="A second local fit (a notebook cell run again) would otherwise inherit the group; "
      "under the launcher variables Lightning leaves set, TorchTrainer's local mode then "
      "refuses to start ('torch.distributed is already initialized')."),
    C("lightning.resume", "MUST", "A killed worker resumes from the latest epoch checkpoint",
      "When a worker dies mid-run (max_failures=1), the restarted attempt's get_checkpoint() "
      "on every rank is the last epoch's checkpoint; passing its checkpoint.ckpt as "
      "trainer.fit(ckpt_path=...) continues with the next epoch.", DOC_FT,
      "rank 1 exits at the start of epoch 1 -> both ranks restart from epoch 0's checkpoint"),
    # ---------------------------------------------------------------- transformers
    C("transformers.names", "MUST", "Hugging Face names; the legacy trainers are gone",
      "ray.train.huggingface.transformers exports exactly RayTrainReportCallback and "
      "prepare_trainer; RayTrainReportCallback.CHECKPOINT_NAME is 'checkpoint' (there is no "
      "module-level CHECKPOINT_NAME); ray.train.huggingface exports nothing. "
      "TransformersTrainer and AccelerateTrainer do not exist: importing them from "
      "ray.train.huggingface (or TransformersTrainer from its transformers module) raises "
      "ImportError.", "python/ray/train/huggingface/transformers/__init__.py",
      "from ray.train.huggingface import TransformersTrainer  # ImportError"),
    C("transformers.ranks", "MUST", "transformers.Trainer runs in the TorchTrainer's process group",
      "In a TorchTrainer worker on CPU, TrainingArguments(use_cpu=True) has world_size, "
      "process_index and local_process_index equal to the train context's, parallel_mode "
      "DISTRIBUTED and device cpu; each rank trains on its shard, so a run of E epochs over n "
      "samples with per-device batch b takes E*n/(W*b) steps.",
      "python/ray/train/huggingface/transformers/_transformers_utils.py",
      ray_note="Without use_cpu=True on GPU-less workers Accelerate treats each rank as a "
      "single process and every rank trains on the whole dataset."),
    C("transformers.report", "MUST", "RayTrainReportCallback reports at every save from every rank",
      "RayTrainReportCallback() reports in on_save, on every rank, once per checkpoint the "
      "Trainer saves; the metrics are all entries of state.log_history merged in order (the "
      "Trainer's own keys: loss, learning_rate, grad_norm, epoch, step, eval_* ...), and the "
      "checkpoint is a copy of the newest checkpoint-N folder of args.output_dir (none when "
      "the rank has no such folder).",
      "python/ray/train/huggingface/transformers/_transformers_utils.py:RayTrainReportCallback",
      "save_strategy='epoch', 2 epochs -> 2 reports per rank, result.metrics['epoch'] == 2"),
    C("transformers.checkpoint", "MUST", "The Hugging Face checkpoint is under checkpoint/",
      "A registered checkpoint holds one folder, 'checkpoint' (CHECKPOINT_NAME), with the "
      "Hugging Face checkpoint files; from_pretrained on it loads the model.",
      "python/ray/train/huggingface/transformers/_transformers_utils.py:RayTrainReportCallback",
      "GPT2LMHeadModel.from_pretrained(f'{d}/checkpoint')"),
    C("transformers.prepare-trainer", "MUST", "prepare_trainer changes the trainer's class",
      "prepare_trainer(trainer) returns the same object, whose class is now "
      "RayTransformersTrainer, a subclass of its former class. Its train and eval "
      "dataloaders take a dataset shard's batch iterator (iter_torch_batches(), as "
      "train_dataset, as eval_dataset, or under its name in an eval_dataset dict) as one "
      "batch per step, unchanged; any other dataset (a map-style torch Dataset) goes to "
      "the Trainer's own loaders.",
      "python/ray/train/huggingface/transformers/_transformers_utils.py:prepare_trainer",
      "Trainer(train_dataset=shard.iter_torch_batches(batch_size=4), max_steps=3) -> 3 "
      "steps of 4 rows"),
    C("transformers.import-error", "MUST", "The integration imports without transformers",
      "Importing ray.train.huggingface.transformers works when transformers is not "
      "installed; prepare_trainer then raises the ImportError of the missing package.",
      "python/ray/train/huggingface/transformers/_transformers_utils.py",
      "prepare_trainer(trainer)  # ModuleNotFoundError: transformers"),
    C("transformers.local", "MUST", "transformers.Trainer in local mode",
      "With num_workers=0 the training function runs in the driver as one process: the run "
      "takes E*n/b steps, Result.metrics has step == that count, epoch == E and eval_loss; "
      "Result.checkpoint is the object passed to the last report, whose temporary folder is "
      "gone once on_save returned.",
      "python/ray/train/v2/_internal/execution/local_mode/torch.py"),
    # ---------------------------------------------------------------- accelerate
    C("accelerate.world", "MUST", "Accelerate sees the TorchTrainer's world",
      "In a TorchTrainer worker on CPU, accelerate.Accelerator(cpu=True) has num_processes, "
      "process_index and local_process_index equal to the train context's world size, world "
      "rank and local rank, device cpu and distributed type MULTI_CPU; a loader passed "
      "through accelerator.prepare gives the ranks disjoint batches that together cover the "
      "dataset, and the ranks' weights stay identical. A plain Accelerator() on a GPU-less "
      "worker is a single process (DistributedType.NO).",
      "https://docs.ray.io/en/latest/train/huggingface-accelerate.html",
      "Accelerator(cpu=True).num_processes == ray.train.get_context().get_world_size()",
      ray_note="Ray has no Accelerate-specific API: the TorchTrainer's environment "
      "(RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR/PORT) and process group are what "
      "Accelerate reads."),
    C("accelerate.local", "MUST", "Accelerate in local mode",
      "With num_workers=0, Accelerator(cpu=True) in the training function is one process "
      "(num_processes 1, process_index 0, DistributedType.NO) and its prepared loader "
      "yields the whole dataset.",
      "python/ray/train/v2/_internal/execution/local_mode/torch.py"),
    # ---------------------------------------------------------------- xgboost
    C("xgboost.names", "MUST", "ray.train.xgboost names and the report callback's signature",
      "ray.train.xgboost exports RayTrainReportCallback, XGBoostConfig and XGBoostTrainer. "
      "RayTrainReportCallback subclasses xgboost.callback.TrainingCallback; its constructor "
      "takes metrics=None, filename='model.ubj', frequency=0, checkpoint_at_end=True, "
      "results_postprocessing_fn=None; CHECKPOINT_NAME is 'model.ubj'; the classmethod "
      "get_model(checkpoint, filename='model.ubj') returns the xgboost.Booster saved in a "
      "checkpoint it reported.",
      "python/ray/train/xgboost/__init__.py; python/ray/train/xgboost/_xgboost_utils.py",
      "from ray.train.xgboost import RayTrainReportCallback, XGBoostConfig, XGBoostTrainer",
      ray_note="Ray's __all__ also lists XGBoostCheckpoint, the V1 framework checkpoint; "
      "Train V2 reports plain Checkpoint folders that RayTrainReportCallback.get_model reads, "
      "so an implementation of V2 may omit it (the reference does, on purpose) and the check "
      "leaves it out."),
    C("xgboost.config", "MUST", "XGBoostConfig",
      "XGBoostConfig is a BackendConfig with one field, xgboost_communicator='rabit'; "
      "to_dict() is {'xgboost_communicator': 'rabit'}; backend_cls is a Backend subclass for "
      "'rabit' and raises NotImplementedError('Unsupported backend: <name>') for any other "
      "communicator.", "python/ray/train/xgboost/config.py; python/ray/train/v2/xgboost/config.py",
      "XGBoostConfig(xgboost_communicator='nccl').backend_cls  # NotImplementedError"),
    C("xgboost.trainer", "MUST", "XGBoostTrainer's signature; the legacy API raises",
      "XGBoostTrainer is a DataParallelTrainer taking train_loop_per_worker, then keyword-only "
      "train_loop_config, xgboost_config, scaling_config, run_config, datasets, "
      "dataset_config, validation_config, metadata, resume_from_checkpoint, label_column, "
      "params, num_boost_round, all defaulting to None (xgboost_config None means "
      "XGBoostConfig()). Any of the V1 trainer's label_column, params, num_boost_round that "
      "is not None (even '', {} or 0) raises DeprecationWarning('The legacy XGBoostTrainer "
      "API is deprecated. Please switch to passing in a custom `train_loop_per_worker` "
      "function instead. See this issue for more context: "
      "https://github.com/ray-project/ray/issues/50042') at construction (raised, not "
      "warned); metadata and resume_from_checkpoint raise DeprecationWarning as for every "
      "DataParallelTrainer; XGBoostTrainer.get_model(checkpoint) raises "
      "DeprecationWarning('`XGBoostTrainer.get_model` is deprecated. Use "
      "`RayTrainReportCallback.get_model` instead.').",
      "python/ray/train/v2/xgboost/xgboost_trainer.py",
      "XGBoostTrainer(fn, params={})  # raises DeprecationWarning",
      "Code written for the V1 trainer (params and label_column, no training function) must "
      "fail at construction, where the fix is obvious, not train something else."),
    C("xgboost.ranks", "MUST", "xgboost.collective sees the Train ranks",
      "Inside the training function of an XGBoostTrainer with W > 1 workers, the function "
      "runs in an xgboost collective: xgboost.collective.is_distributed() is True, "
      "get_world_size() == W and get_rank() == the train context's world rank; "
      "collective.allreduce works across the workers; xgboost.train on each rank's shard "
      "trains one model (every rank ends with the same booster and the same evaluation "
      "history, metrics being computed over all shards).",
      "python/ray/train/xgboost/config.py:_XGBoostRabitBackend",
      "xgboost.collective.get_rank() == ray.train.get_context().get_world_rank()",
      "Code that shards, logs or saves by rank must mean the same worker whether it asks "
      "xgboost or Train; a collective that silently fell back to one process per worker "
      "would train W different models."),
    C("xgboost.report", "MUST", "RayTrainReportCallback reports every round on every rank",
      "With RayTrainReportCallback(frequency=f) in xgboost.train, every rank calls report() "
      "after every boosting round i (0-based) with the last value of every evaluation "
      "metric, keyed '<eval name>-<metric>' (e.g. 'valid-rmse'); on the rounds with "
      "f > 0 and (i + 1) % f == 0 rank 0 attaches a checkpoint holding `filename` and the "
      "other ranks none. With checkpoint_at_end (the default) the callback makes one more "
      "report after training, with the last round's metrics and a checkpoint, unless the "
      "last round was just checkpointed; with frequency=0 that is the only checkpoint. "
      "Each reported checkpoint is registered (Result.best_checkpoints, in order).",
      "python/ray/train/xgboost/_xgboost_utils.py:RayReportCallback",
      "5 rounds, frequency=2 -> 6 reports per rank; checkpoints after rounds 1, 3 and at the "
      "end; 6 rounds, frequency=3 -> 6 reports, checkpoints after rounds 2 and 5 only",
      ray_note="The rounds the callback counts are those of the current xgboost.train call "
      "(the epoch xgboost passes), while the 'just checkpointed' test compares with "
      "Booster.num_boosted_rounds(): training on from an xgb_model that has rounds always "
      "adds the final report (see xgboost.resume)."),
    C("xgboost.report-metrics", "MUST", "The callback's metrics selection and renaming",
      "metrics=[keys] (a str is one key) reports only those '<eval>-<metric>' keys; "
      "metrics={report key: log key} reports each log value under its report key; "
      "results_postprocessing_fn, if given, receives that dict and its return value is "
      "reported. The selection applies to every report, the final one included.",
      "python/ray/train/xgboost/_xgboost_utils.py:RayReportCallback._get_report_dict",
      "RayTrainReportCallback(metrics={'loss': 'valid-rmse'}) -> report({'loss': ...})"),
    C("xgboost.checkpoint", "MUST", "The XGBoost checkpoint holds model.ubj",
      "A checkpoint the callback reports holds exactly `filename` ('model.ubj' by default), "
      "written by Booster.save_model (so the suffix picks the format: 'model.json' is "
      "JSON); RayTrainReportCallback.get_model(checkpoint, filename=...) loads it into a "
      "Booster with the rounds trained so far (num_boosted_rounds) and rank 0's predictions.",
      "python/ray/train/xgboost/_xgboost_utils.py:RayTrainReportCallback",
      "booster = RayTrainReportCallback.get_model(result.checkpoint)"),
    C("xgboost.local", "MUST", "XGBoostTrainer in local mode",
      "With num_workers=0 the training function runs without an xgboost collective "
      "(is_distributed() False, get_rank() 0, get_world_size() 1) and the callback reports "
      "every round plus the final checkpoint; Result.metrics are the last report's and "
      "Result.checkpoint the object passed to it, whose temporary folder is gone once "
      "fit() returns.",
      "python/ray/train/v2/xgboost/config.py:XGBoostConfig.train_func_context",
      why="Users debug their training function in local mode: it must not wait for a "
      "tracker that was never started."),
    C("xgboost.resume", "MUST", "A restarted XGBoost group trains on from the latest round",
      "With RayTrainReportCallback(frequency=1) and FailureConfig(max_failures=1), when a "
      "worker dies after round k (once that round's report is registered), the restarted "
      "workers get the checkpoint of round k from "
      "get_checkpoint(); get_model(it) has k + 1 rounds, and xgboost.train(..., "
      "num_boost_round=N - (k + 1), xgb_model=that booster) ends with a booster of N rounds "
      "on every rank, which Result.checkpoint holds.",
      "python/ray/train/xgboost/_xgboost_utils.py; " + DOC_FT,
      ray_note="On the restarted attempt the callback reports every round with a checkpoint "
      "and then once more at the end (its round count restarts at 0 with xgb_model, see "
      "xgboost.report), so the last checkpoint is registered twice."),
    # ---------------------------------------------------------------- lightgbm
    C("lightgbm.names", "MUST", "ray.train.lightgbm names, LightGBMConfig and the callback",
      "ray.train.lightgbm exports LightGBMConfig, LightGBMTrainer, RayTrainReportCallback, "
      "get_network_params and normalize_pandas_for_lightgbm. LightGBMConfig() is a "
      "BackendConfig without options (to_dict() == {}). RayTrainReportCallback's "
      "constructor takes metrics=None, filename='model.txt', frequency=0, "
      "checkpoint_at_end=True, results_postprocessing_fn=None; CHECKPOINT_NAME is "
      "'model.txt'; get_model(checkpoint, filename='model.txt') returns the "
      "lightgbm.Booster saved in a checkpoint it reported.",
      "python/ray/train/lightgbm/__init__.py; python/ray/train/lightgbm/_lightgbm_utils.py",
      ray_note="Ray's __all__ also lists LightGBMCheckpoint, the V1 framework checkpoint; "
      "Train V2 reports plain Checkpoint folders that RayTrainReportCallback.get_model reads, "
      "so an implementation of V2 may omit it (the reference does, on purpose) and the check "
      "leaves it out."),
    C("lightgbm.trainer", "MUST", "LightGBMTrainer's signature; the legacy API raises",
      "LightGBMTrainer is a DataParallelTrainer taking train_loop_per_worker, then "
      "keyword-only train_loop_config, lightgbm_config, scaling_config, run_config, "
      "datasets, dataset_config, validation_config, metadata, resume_from_checkpoint, "
      "label_column, params, num_boost_round, all defaulting to None. Any of label_column, "
      "params, num_boost_round that is not None raises DeprecationWarning('The legacy "
      "LightGBMTrainer API is deprecated. Please switch to passing in a custom "
      "`train_loop_per_worker` function instead. See this issue for more context: "
      "https://github.com/ray-project/ray/issues/50042'); metadata and "
      "resume_from_checkpoint raise DeprecationWarning; LightGBMTrainer.get_model(checkpoint) "
      "raises DeprecationWarning('`LightGBMTrainer.get_model` is deprecated. Use "
      "`RayTrainReportCallback.get_model` instead.').",
      "python/ray/train/v2/lightgbm/lightgbm_trainer.py",
      "LightGBMTrainer(fn, label_column='y')  # raises DeprecationWarning"),
    C("lightgbm.normalize-pandas", "MUST", "normalize_pandas_for_lightgbm",
      "normalize_pandas_for_lightgbm(df) maps Arrow-backed signed and unsigned integer, "
      "floating and boolean columns to the NumPy-nullable dtypes of the same width (Int32, "
      "UInt8, Float64, boolean, ...), leaves other columns (Arrow strings, NumPy columns) "
      "as they are, and returns a frame without Arrow columns itself, unchanged.",
      "python/ray/train/lightgbm/_lightgbm_utils.py:normalize_pandas_for_lightgbm",
      "normalize_pandas_for_lightgbm(ds.to_pandas())  # before lightgbm.Dataset",
      "Ray Data's to_pandas() keeps Arrow dtypes, which LightGBM's pandas input rejects."),
    C("lightgbm.network-params", "MUST", "get_network_params gives each rank LightGBM's network",
      "Inside a LightGBMTrainer with W workers, get_network_params() on each rank returns "
      "exactly num_machines == W, local_listen_port (an int, distinct per rank) and "
      "machines, the same string on every rank: 'host:port' of every rank joined with ',', "
      "in rank order, each rank's entry carrying its own local_listen_port. Merged into the "
      "params of lightgbm.train with tree_learner='data_parallel', the ranks train one "
      "model (the same predictions on every rank). Outside a trainer it returns {} (with a "
      "warning).", "python/ray/train/lightgbm/config.py",
      "lightgbm.train({**params, **ray.train.lightgbm.get_network_params()}, ...)",
      "LightGBM connects the machines itself; a wrong port or order and the workers never "
      "meet."),
    C("lightgbm.report", "MUST", "RayTrainReportCallback reports every iteration on every rank",
      "With RayTrainReportCallback(frequency=f) in lightgbm.train, every rank calls report() "
      "after every iteration with the iteration's evaluation results keyed "
      "'<valid name>-<metric>' (e.g. 'valid-l2'); rank 0 attaches a checkpoint on the "
      "iterations with f > 0 and (i + 1) % f == 0 and, with checkpoint_at_end (the "
      "default), on the last iteration; the other ranks report metrics only. There is no "
      "report after training: the last iteration's report carries the final checkpoint. "
      "In lightgbm.cv the results of the folds are reported as "
      "'<valid name>-<metric>-mean' and '<valid name>-<metric>-stdv'.",
      "python/ray/train/lightgbm/_lightgbm_utils.py:RayReportCallback.__call__",
      "7 iterations, frequency=3 -> 7 reports per rank; checkpoints at iterations 2, 5, 6; "
      "lightgbm.cv -> {'valid-l2-mean': ..., 'valid-l2-stdv': ...}"),
    C("lightgbm.checkpoint", "MUST", "The LightGBM checkpoint holds model.txt",
      "A checkpoint the callback reports holds exactly `filename` ('model.txt' by default), "
      "LightGBM's text model (Booster.save_model); RayTrainReportCallback.get_model(it) "
      "loads a Booster with the iterations trained so far that predicts as rank 0's did.",
      "python/ray/train/lightgbm/_lightgbm_utils.py:RayTrainReportCallback",
      "booster = RayTrainReportCallback.get_model(result.checkpoint)"),
    C("lightgbm.local", "MUST", "LightGBMTrainer in local mode",
      "With num_workers=0, get_network_params() in the training function returns {} and "
      "lightgbm.train runs on one machine; the callback reports every iteration, the last "
      "with a checkpoint; Result.metrics are the last report's and Result.checkpoint the "
      "object passed to it, whose temporary folder is gone once fit() returns.",
      "python/ray/train/v2/_internal/execution/local_mode/utils.py"),
    C("lightgbm.resume", "MUST", "A restarted LightGBM group trains on from the latest iteration",
      "With RayTrainReportCallback(frequency=1) and FailureConfig(max_failures=1), when a "
      "worker is killed after iteration k (once that iteration's report is registered), the "
      "restarted workers (with new network "
      "parameters) get the checkpoint of iteration k from get_checkpoint(); get_model(it) "
      "has k + 1 iterations, and lightgbm.train(..., num_boost_round=N - (k + 1), "
      "init_model=that booster) reports iterations k + 1 .. N - 1 (absolute: LightGBM "
      "counts on from the init model) and ends with a booster of N iterations on every "
      "rank, which Result.checkpoint holds.",
      "python/ray/train/lightgbm/_lightgbm_utils.py; " + DOC_FT),
    # ---------------------------------------------------------------- jax
    C("jax.names", "MUST", "ray.train.v2.jax is the import path of JaxTrainer and JaxConfig",
      "JaxTrainer and JaxConfig are imported from ray.train.v2.jax, whose __all__ is "
      "['JaxConfig', 'JaxTrainer']; there is no ray.train.jax (importing it raises "
      "ModuleNotFoundError).", JAX + "__init__.py",
      "from ray.train.v2.jax import JaxTrainer, JaxConfig",
      "JAX exists only in Train V2: code that imports it from the V1-style path would work "
      "on one implementation and fail on another."),
    C("jax.lazy-import", "MUST", "Importing ray.train.v2.jax does not import jax",
      "Importing ray.train.v2.jax (and constructing JaxConfig) does not import the jax "
      "package, so a driver without jax can build a JaxTrainer; jax is imported on the "
      "workers, where a missing jax fails the run.", JAX + "__init__.py; " + JAX + "config.py",
      "import sys, ray.train.v2.jax; 'jax' not in sys.modules",
      "On TPU hosts importing jax in the driver takes the TPU lock the workers need.",
      ray_note="The 'Jax isn't installed' guard in ray/train/v2/jax/__init__.py sits under "
      "TYPE_CHECKING, so it never runs."),
    C("jax.config", "MUST", "JaxConfig",
      "JaxConfig is a dataclass BackendConfig with the fields use_tpu=False and "
      "use_gpu=False, in this order (positional too); to_dict() is {'use_tpu': ..., "
      "'use_gpu': ...} with the values given; backend_cls is a Backend subclass. The fields "
      "are not validated at construction (JaxConfig(use_tpu=True, use_gpu=True) is "
      "accepted).", JAX + "config.py",
      "JaxConfig(use_gpu=True).to_dict() == {'use_tpu': False, 'use_gpu': True}"),
    C("jax.trainer", "MUST", "JaxTrainer's signature and its default JaxConfig",
      "JaxTrainer is a DataParallelTrainer taking train_loop_per_worker, then keyword-only "
      "train_loop_config, jax_config, scaling_config, dataset_config, run_config, datasets, "
      "validation_config, all defaulting to None; it has no metadata or "
      "resume_from_checkpoint parameter (passing one raises TypeError). Without a "
      "jax_config it uses JaxConfig(use_tpu=scaling_config.use_tpu, "
      "use_gpu=scaling_config.use_gpu), so JaxTrainer(fn) with no scaling_config raises "
      "AttributeError at construction; a jax_config given is used as is, even when it "
      "disagrees with the ScalingConfig (JaxConfig(use_gpu=True) with a CPU-only "
      "ScalingConfig is accepted).", JAX + "jax_trainer.py",
      "JaxTrainer(fn)  # AttributeError: 'NoneType' object has no attribute 'use_tpu'",
      ray_note="Ray's _validate_scaling_config override names an attribute that does not "
      "exist and is never called."),
    C("jax.distributed-cpu", "MUST", "JAX_PLATFORMS=cpu with use_gpu or use_tpu: one JAX job over all workers",
      "With JaxConfig(use_gpu=True) or JaxConfig(use_tpu=True) and "
      "RunConfig(worker_runtime_env={'env_vars': {'JAX_PLATFORMS': 'cpu'}}), W CPU workers "
      "form one multi-process JAX job before the training function starts: on every rank "
      "jax.distributed.is_initialized() is True, jax.process_count() == W, "
      "jax.process_index() == the world rank, jax.device_count() == W, "
      "jax.local_device_count() == 1 and the devices are 'cpu'; every rank names the same "
      "coordinator. The backend sets no CUDA_VISIBLE_DEVICES (cuda is not among the "
      "platforms) and, with one slice, no MEGASCALE_* variable.", JAX + "config.py",
      "JaxTrainer(fn, jax_config=JaxConfig(use_gpu=True), scaling_config=ScalingConfig("
      "num_workers=2), run_config=RunConfig(worker_runtime_env={'env_vars': "
      "{'JAX_PLATFORMS': 'cpu'}}))  # in fn: jax.process_count() == 2",
      "This is the only way to run a multi-process JAX job on CPUs (tests, CI, laptops): "
      "JaxConfig() alone starts no distributed JAX.",
      ray_note="Nothing but JAX_PLATFORMS is needed with jax 0.10: its CPU collectives "
      "default to gloo (jax_cpu_collectives_implementation, read from "
      "JAX_CPU_COLLECTIVES_IMPLEMENTATION). JaxConfig(use_gpu=True) asks Ray for no GPU: "
      "the resources come from the ScalingConfig alone."),
    C("jax.collectives", "MUST", "Cross-process JAX computations work in the job",
      "In that job, with rank r holding [r + 1] and [r + 1, 10 * (r + 1)]: "
      "multihost_utils.process_allgather gathers [1, ..., W] on every rank; "
      "jax.make_array_from_process_local_data on a 1-D Mesh of jax.devices() gives a "
      "global array of 2W elements whose jitted jnp.sum is the sum over all ranks (33 for "
      "W = 2); a jitted shard_map of jax.lax.psum over the mesh axis gives every rank the "
      "element-wise sum ([3, 30] for W = 2). Gradients averaged with process_allgather "
      "leave every rank with the same parameters after every step.",
      JAX + "config.py:_setup_jax_distributed_environment",
      "multihost_utils.process_allgather(jnp.array([rank + 1.0])) -> [[1.], [2.]]",
      "A job whose processes each saw only their own devices would train W different "
      "models without an error."),
    C("jax.train-loop", "MUST", "Reports and checkpoints of a JAX job",
      "A JAX training function reports through the Train API as any other: with every "
      "rank calling report() once per step and rank 0 attaching a checkpoint of its "
      "parameters saved with np.save, the run succeeds, Result.metrics is rank 0's last "
      "report and Result.checkpoint holds that step's files, with the parameters every "
      "rank ended with.", JAX + "jax_trainer.py; " + FN,
      "report({'step': s, 'loss': l}, checkpoint=Checkpoint.from_directory(d))  # rank 0"),
    C("jax.user-shutdown", "MUST", "The training function may shut jax.distributed down itself",
      "A training function that calls jax.distributed.shutdown() on every rank at its end "
      "sees jax.distributed.is_initialized() False afterwards, and the run still succeeds "
      "(the backend's own shutdown of an already shut down job is harmless).",
      JAX + "config.py:_shutdown_jax_distributed",
      "jax.distributed.shutdown()  # last line of fn"),
    C("jax.backend-shutdown", "SHOULD", "The backend shuts jax.distributed down after the function",
      "When the training function of a distributed JAX group (use_gpu or use_tpu) returns "
      "without shutting jax.distributed down, the backend calls jax.distributed.shutdown() "
      "in every worker process before the workers go away; afterwards "
      "jax.distributed.is_initialized() is False there. A driver variable "
      "JAX_DISTRIBUTED_SHUTDOWN_TIMEOUT_S that is not a number does not fail the run (the "
      "default is used).", JAX + "config.py:_JaxBackend.on_shutdown",
      why="The coordination service holds a port and threads on rank 0; a worker process "
      "reused or kept alive must not keep a dead job's client.",
      ray_note="Ray waits up to JAX_DISTRIBUTED_SHUTDOWN_TIMEOUT_S (default 30) for it and "
      "only logs a timeout or error."),
    C("jax.tpu-slices", "MUST", "A TPU job runs on whole slices with the TPU environment",
      "With ScalingConfig(num_workers=4, use_tpu=True, topology='2x2x2', "
      "accelerator_type='TPU-V4') on two 2-host slices, the job reserves both slices whole: "
      "ranks 0-1 run on the hosts of one slice and ranks 2-3 on the other, in the order of "
      "the hosts' TPU_WORKER_ID; every worker sees its host's TPU variables (TPU_NAME, "
      "TPU_WORKER_ID, ...), no TPU_VISIBLE_CHIPS (it holds all 4 chips of its host), the "
      "multislice variables MEGASCALE_NUM_SLICES=2, MEGASCALE_SLICE_ID (0, 0, 1, 1) and "
      "MEGASCALE_COORDINATOR_ADDRESS (rank 0's node address) replacing any the workers' "
      "environment set, MEGASCALE_PORT=8081 unless that environment set one, and "
      "jax.distributed over the 4 processes (process_index == world rank).",
      "python/ray/train/v2/jax/config.py; python/ray/util/tpu.py; "
      "python/ray/train/v2/_internal/execution/worker_group/worker_group.py",
      "JaxTrainer(fn, scaling_config=ScalingConfig(num_workers=4, use_tpu=True, "
      "topology='2x2x2', accelerator_type='TPU-V4'))",
      ray_note="Needs an adapter with TPU slices (capability tpu_slices): the reference "
      "simulates them with simcluster.tpu_slice (JAX computing on the CPU); the Ray adapter "
      "here has none, so the check is skipped on Ray. The rules are Ray's source: "
      "SlicePlacementGroup reserves whole slices, get_tpu_coordinator_env_vars gives the "
      "MEGASCALE_* variables."),
    C("jax.plain", "MUST", "JaxConfig() starts no distributed JAX",
      "With JaxConfig() (use_tpu and use_gpu False) and W workers, the backend does "
      "nothing: every worker is an independent single-process JAX (is_initialized() False, "
      "process_count() == 1, process_index() == 0, device_count() == 1) and trains on its "
      "own shard alone, while the Train API (ranks, report(), checkpoints) works as "
      "usual.", JAX + "config.py:_JaxBackend.on_start",
      "JaxTrainer(fn, jax_config=JaxConfig(), scaling_config=ScalingConfig(num_workers=2))"
      "  # in fn: jax.process_count() == 1",
      "Code that expects one job over all workers with the default config would silently "
      "train W models."),
    C("jax.local", "MUST", "JaxTrainer in local mode",
      "With num_workers=0 the training function runs in the process that called fit(), "
      "with no distributed JAX even with JaxConfig(use_gpu=True) (is_initialized() False, "
      "process_count() 1), world rank 0 of 1; Result.metrics is the last report's.",
      LOCAL, "JaxTrainer(fn, jax_config=JaxConfig(use_gpu=True), "
      "scaling_config=ScalingConfig(num_workers=0))"),
    C("jax.restart", "MUST", "A restarted JAX group is a new job that resumes from the checkpoint",
      "With FailureConfig(max_failures=1), when a worker of a distributed JAX group dies "
      "(os._exit(1)) after a report whose checkpoint is registered, the run restarts the "
      "group: new worker processes, each with jax.distributed initialised again "
      "(process_count() == W, process_index() == world rank, one coordinator shared by "
      "every rank) and working collectives; get_checkpoint() returns that report's "
      "checkpoint, whose np.save files load back to the parameters saved, training goes "
      "on from the next step, and the run ends as an uninterrupted one would (same "
      "parameters, Result.metrics of the last step).",
      JAX + "config.py:_JaxBackend; " + DOC_FT,
      "FailureConfig(max_failures=1); rank 1 calls os._exit(1) after step 1 -> attempt 1 "
      "restores step 1"),
    # ---------------------------------------------------------------- tensorflow
    C("tensorflow.names", "MUST", "ray.train.tensorflow's names; the Keras callback beside them",
      "ray.train.tensorflow's __all__ is ['TensorflowCheckpoint', 'TensorflowConfig', "
      "'prepare_dataset_shard', 'TensorflowTrainer'] (TensorflowTrainer is the V2 class); "
      "ReportCheckpointCallback is imported from ray.train.tensorflow.keras and is not in "
      "that __all__.", "python/ray/train/tensorflow/__init__.py; "
      "python/ray/train/tensorflow/keras.py",
      "from ray.train.tensorflow.keras import ReportCheckpointCallback"),
    C("tensorflow.import-error", "MUST", "Importing ray.train.tensorflow without TensorFlow",
      "ray.train.tensorflow imports tensorflow at import time; without it the import raises "
      "ModuleNotFoundError(\"TensorFlow isn't installed. To install TensorFlow, run 'pip "
      "install tensorflow'.\").", "python/ray/train/tensorflow/__init__.py",
      "import ray.train.tensorflow  # ModuleNotFoundError: TensorFlow isn't installed. ...",
      "The message says what to install instead of a bare 'No module named tensorflow'."),
    C("tensorflow.config", "MUST", "TensorflowConfig",
      "TensorflowConfig is a dataclass BackendConfig with no fields; to_dict() is {}; "
      "backend_cls is a Backend subclass.", "python/ray/train/tensorflow/config.py",
      "TensorflowConfig().to_dict() == {}"),
    C("tensorflow.trainer", "MUST", "TensorflowTrainer's signature",
      "TensorflowTrainer is a DataParallelTrainer taking train_loop_per_worker, then "
      "keyword-only train_loop_config, tensorflow_config, scaling_config, dataset_config, "
      "run_config, datasets, validation_config, metadata, resume_from_checkpoint, all "
      "defaulting to None; without a tensorflow_config it uses TensorflowConfig(); a "
      "metadata or resume_from_checkpoint given raises DeprecationWarning (raised, not "
      "warned) at construction.", "python/ray/train/v2/tensorflow/tensorflow_trainer.py",
      "TensorflowTrainer(fn, metadata={'a': 1})  # raises DeprecationWarning"),
    C("tensorflow.tf-config", "MUST", "Every worker gets TF_CONFIG",
      "Before the training function starts, worker i of W has TF_CONFIG = "
      "{'cluster': {'worker': [W distinct 'host:port', the same list on every worker, in "
      "rank order]}, 'task': {'type': 'worker', 'index': i}} and TF_USE_LEGACY_KERAS='1'.",
      "python/ray/train/tensorflow/config.py:_setup_tensorflow_environment",
      "json.loads(os.environ['TF_CONFIG'])['task'] == {'type': 'worker', 'index': rank}",
      "tf.distribute.MultiWorkerMirroredStrategy() reads TF_CONFIG to find its peers; the "
      "backend creates no collective itself."),
    C("tensorflow.legacy-keras", "SHOULD", "The workers' tf.keras is tf-keras",
      "With the tf-keras package installed and nothing set in the workers' environment, "
      "tf.keras in the training function is tf-keras (tf.keras.Model comes from the "
      "tf_keras package), and so is the base class of ReportCheckpointCallback, so a Keras "
      "model.fit under MultiWorkerMirroredStrategy with that callback trains (the same "
      "weights on every worker).",
      "python/ray/train/tensorflow/config.py:_setup_tensorflow_environment; "
      "python/ray/train/tensorflow/tensorflow_checkpoint.py",
      "TensorflowTrainer(fn, scaling_config=ScalingConfig(num_workers=2))  # in fn: "
      "tf.keras.Model.__module__.startswith('tf_keras')",
      "Keras 3's model.fit under MultiWorkerMirroredStrategy fails (ValueError: Attempt to "
      "convert a value (PerReplica:{...}) with an unsupported type); setting "
      "TF_USE_LEGACY_KERAS=1 is how Ray's backend means to avoid it.",
      ray_note="A Ray bug: TensorFlow reads TF_USE_LEGACY_KERAS when it is imported and when "
      "tf.keras is first used, and a Ray 2.60 worker does both before the backend sets the "
      "variable (running the backend's setup function imports ray.train.tensorflow, whose "
      "TensorflowCheckpoint.get_model annotation `tf.keras.Model` resolves tf.keras), so its "
      "workers get Keras 3 and the fit fails with that error. Workaround on Ray: "
      "RunConfig(worker_runtime_env={'env_vars': {'TF_USE_LEGACY_KERAS': '1'}}). The "
      "reference's node supervisors set the variable before they preload TensorFlow."),
    C("tensorflow.multi-worker", "MUST", "MultiWorkerMirroredStrategy trains one model over the workers",
      "A Keras model built inside MultiWorkerMirroredStrategy().scope() in the training "
      "function of W CPU workers has num_replicas_in_sync == W; model.fit on a different "
      "dataset per worker (prepare_dataset_shard: no auto-sharding) leaves every worker with "
      "the same weights after every epoch (the gradients are all-reduced).",
      "python/ray/train/tensorflow/config.py; python/ray/train/tensorflow/train_loop_utils.py",
      "with tf.distribute.MultiWorkerMirroredStrategy().scope(): model = build_model()",
      "W workers that each trained their own model would report success."),
    C("tensorflow.prepare-dataset-shard", "MUST", "prepare_dataset_shard",
      "prepare_dataset_shard(ds) returns ds with options whose "
      "experimental_distribute.auto_shard_policy is AutoShardPolicy.OFF, prefetched with "
      "tf.data.AUTOTUNE; its elements are those of ds.",
      "python/ray/train/tensorflow/train_loop_utils.py",
      "prepare_dataset_shard(shard.to_tf(...))"),
    C("tensorflow.callback-triggers", "MUST", "ReportCheckpointCallback's arguments",
      "ReportCheckpointCallback(checkpoint_on='epoch_end', report_metrics_on='epoch_end', "
      "metrics=None): each trigger is a str or a list of Keras hook names without 'on_' "
      "(epoch_begin/end, train/test/predict_batch_begin/end, train/test/predict_begin/end); "
      "any other raises ValueError('Invalid trigger time selected: <the triggers>. Must be "
      "one of <the allowed list>').", "python/ray/train/tensorflow/keras.py",
      "ReportCheckpointCallback(checkpoint_on='validation_end')  # ValueError"),
    C("tensorflow.callback-reports", "MUST", "ReportCheckpointCallback reports Keras logs with a model checkpoint",
      "With ReportCheckpointCallback() in model.fit, every rank reports at every epoch end "
      "the epoch's Keras logs and a checkpoint holding model.keras and the metadata "
      "{'_model_filename': 'model.keras'}: Result.metrics is rank 0's last epoch's logs, "
      "Result.metrics_dataframe has one row per epoch and Result.checkpoint is the last "
      "epoch's.", "python/ray/train/tensorflow/keras.py; "
      "python/ray/train/tensorflow/tensorflow_checkpoint.py",
      "model.fit(ds, epochs=3, callbacks=[ReportCheckpointCallback()])"),
    C("tensorflow.checkpoint", "MUST", "TensorflowCheckpoint",
      "TensorflowCheckpoint is a Checkpoint; from_model(model) warns DeprecationWarning "
      "('`TensorflowCheckpoint` is deprecated ...') and saves the model as model.keras in a "
      "new directory with the metadata {'_model_filename': 'model.keras'}; get_model() loads "
      "it (same weights); without that metadata key get_model() raises ValueError "
      "('`TensorflowCheckpoint` cannot retrieve the model if you override the checkpoint "
      "metadata. ...'). from_h5(file_path) copies a .h5 file (metadata: its file name) and "
      "from_saved_model(dir_path) a folder (metadata '.'); each raises ValueError for "
      "anything else (a missing file, a name not ending in .h5, a file given as the "
      "folder). preprocessor is keyword-only in all three.",
      "python/ray/train/tensorflow/tensorflow_checkpoint.py",
      "TensorflowCheckpoint.from_model(model).get_model()",
      ray_note="Ray warns at every construction (its @Deprecated patches __init__), "
      "including from_directory; the callback's internal path does not warn."),
    C("tensorflow.restart", "MUST", "A restarted Keras run resumes from the callback's checkpoint",
      "With FailureConfig(max_failures=1), when a worker exits after epoch k's checkpointed "
      "report (registered), the new workers get new TF_CONFIGs and get_checkpoint() returns "
      "epoch k's checkpoint (model.keras, metadata {'_model_filename': 'model.keras'}); "
      "tf.keras.models.load_model of it inside the strategy's scope has rank 0's weights "
      "after epoch k and an optimizer that counted k + 1 epochs of steps; fitting on from "
      "initial_epoch k + 1 trains the remaining epochs with the same weights on every rank.",
      "python/ray/train/tensorflow/keras.py; " + DOC_FT,
      "model.fit(ds, epochs=E, initial_epoch=model.optimizer.iterations // steps)"),
    # ---------------------------------------------------------------- Ray Data in Train
    C("data.dataset", "MUST", "The Ray Data subset a Train user builds datasets with",
      "The namespace beside `train` (ray.data) provides from_items, range and from_pandas, "
      "each returning a Dataset: from_items(list of dicts) has one row per dict with its "
      "keys as columns, from_items of other values has rows {'item': value}; range(n) has "
      "the column 'id' holding 0 .. n-1; from_pandas(df).to_pandas() gives df's columns and "
      "values back. A Dataset has count(); iter_rows() (dict rows); iter_batches(batch_size=k, "
      "batch_format='numpy' | 'pandas'), batches of k rows (dicts of arrays, or DataFrames) "
      "but a shorter last one; iter_torch_batches(batch_size=k), dicts of tensors with "
      "inferred dtypes (int64, float64), on the CPU outside a Train worker; materialize(), "
      "a Dataset with the same rows; to_pandas(). Rows come in no promised order.",
      "python/ray/data/read_api.py; python/ray/data/dataset.py",
      "ray.data.from_items([{'id': i} for i in range(10)]).count() == 10",
      "Framework-trainer code builds its data with these few calls; a mirror of ray.data "
      "that differs in them breaks every data test written for Ray."),
    C("data.config", "MUST", "DataConfig's signature; datasets_to_split is 'all' or a list",
      "DataConfig(datasets_to_split='all', execution_options=None, enable_shard_locality=True)"
      ". datasets_to_split must be the string 'all' or a list (of dataset names; [] splits "
      "nothing); anything else (another string, a tuple, a set, None) raises "
      "TypeError(\"`datasets_to_split` should be a 'all' or a list of strings of dataset "
      "names. Received <type name> with value <value>.\") at construction.",
      "python/ray/train/_internal/data_config.py:DataConfig.__init__",
      "DataConfig(datasets_to_split='train')  # TypeError: ... Received str with value train."),
    C("data.shard-split", "MUST", "A split dataset gives each rank an equal, disjoint shard",
      "For every dataset that DataConfig.datasets_to_split names (all of the trainer's "
      "`datasets` by default), get_dataset_shard(name) on each of W ranks returns a "
      "DataIterator over a shard of the dataset: the shards are disjoint, every shard has "
      "exactly floor(n / W) rows of the dataset's n, and the n mod W rows left over are "
      "read by no rank (streaming_split(W, equal=True)). Which rows a rank gets is not "
      "promised.",
      "python/ray/train/_internal/data_config.py:DataConfig.configure; "
      "python/ray/data/_internal/execution/operators/output_splitter.py",
      "21 rows, 2 workers -> each rank reads 10 rows, one row is read by nobody",
      "Data-parallel training averages gradients over ranks that must see different data, "
      "and equal shards keep ranks in step: a rank with one batch more would wait forever "
      "in an all-reduce its peers never join.",
      ray_note="Ray's OutputSplitter hands each block to the split with the fewest rows so "
      "far and gives no ordering guarantee; with from_items (one block per row) ranks got "
      "ids r, r + W, r + 2W, ... in every pass and again after a restart, but the clause "
      "does not rely on it."),
    C("data.shard-unsplit", "MUST", "A dataset not split gives every rank all its rows",
      "A dataset in the trainer's `datasets` that DataConfig.datasets_to_split (a list) "
      "leaves out is not sharded: get_dataset_shard(name) on every rank returns a "
      "DataIterator over all of its rows.",
      "python/ray/train/_internal/data_config.py:DataConfig.configure",
      "DataConfig(datasets_to_split=['train'])  # 'valid' is read whole on every rank"),
    C("data.shard-unknown", "MUST", "get_dataset_shard of an unknown name raises KeyError",
      "In a worker of a distributed run (num_workers >= 1), get_dataset_shard(name) for a "
      "name that is not a key of the trainer's `datasets`, and get_dataset_shard() with no "
      "name, raise KeyError(\"Dataset shard for '<name>' not found. Please ensure that the "
      "dataset is passed through the Trainer `datasets` argument.\") (<name> is 'None' "
      "without a name).",
      "python/ray/train/v2/_internal/callbacks/datasets.py:RayDatasetShardProvider",
      "ray.train.get_dataset_shard('nope')  # KeyError",
      ray_note="get_dataset_shard's docstring says it returns None when no dataset was "
      "passed to the trainer; it raises this KeyError instead."),
    C("data.shard-barrier", "MUST", "get_dataset_shard of a split dataset waits for rank 0",
      "get_dataset_shard(name) of a split dataset is a barrier: on a rank other than 0 it "
      "returns only after rank 0 has called get_dataset_shard(name) for that dataset (rank 0 "
      "builds the split for all ranks). Rank 0 does not wait for the others: it may get "
      "its shard and go on (e.g. report) before another rank asks for its own.",
      "python/ray/train/v2/_internal/data_integration/dataset_manager.py:"
      "DatasetManager._get_sharded_dataset_iterator",
      "rank 0 calls 1.5 s after rank 1; rank 1's call returns after rank 0's call began",
      "A rank cannot read a shard of a split that does not exist yet; returning early with "
      "an unconfigured iterator would hand out rows twice or not at all."),
    C("data.shard-cached", "SHOULD", "A second get_dataset_shard returns the same iterator",
      "Calling get_dataset_shard(name) again on the same worker returns the object the "
      "first call returned, without a new split (the shard is cached per worker), so code "
      "may call it at the top of every epoch.",
      "python/ray/train/v2/_internal/callbacks/datasets.py:RayDatasetShardProvider."
      "get_dataset_shard",
      "ray.train.get_dataset_shard('train') is ray.train.get_dataset_shard('train')"),
    C("data.epochs", "MUST", "Every pass over a shard is an epoch",
      "Each new pass over a split shard (iter_rows(), iter_batches(), iter_torch_batches() or "
      "materialize(), made by every rank alike) reads the shard again from the start: in "
      "every pass each rank reads floor(n / W) rows, disjoint from the other ranks' rows of "
      "that pass. iter_batches(batch_size=k) and iter_torch_batches(batch_size=k) yield "
      "batches of k rows but a shorter last one; materialize().to_pandas() holds the "
      "shard's rows with the dataset's columns.",
      "python/ray/data/iterator.py; "
      "python/ray/data/_internal/iterator/stream_split_iterator.py",
      "for epoch in range(2):\n    for batch in shard.iter_batches(batch_size=4): ...",
      "Training loops iterate a shard once per epoch; a shard that were exhausted after the "
      "first pass would silently train later epochs on nothing.",
      ray_note="In Ray 2.60 the passes of a rank over a from_items dataset held the same "
      "rows in the same order; the split gives no such guarantee, so the clause does not "
      "require it."),
    C("data.batches", "MUST", "Batches of exactly batch_size, every row once",
      "iter_batches and iter_torch_batches(batch_size=b, drop_last=..., "
      "prefetch_batches=..., local_shuffle_buffer_size=..., local_shuffle_seed=...) cut an "
      "epoch into batches of exactly b rows but one shorter (none with drop_last), "
      "whatever the dataset's blocks; each row comes once per epoch (all of them without "
      "drop_last); prefetching changes only the order (with prefetch_batches > 1 Ray may "
      "yield the short batch before others). With a local shuffle buffer a batch may be "
      "short wherever the buffer runs low (Ray 2.60's ShufflingBatcher takes what its "
      "shuffled generation holds): no batch is longer than b, and drop_last drops fewer "
      "than b rows at the end.", "python/ray/data/iterator.py; python/ray/data/_internal/block_batching/; python/ray/data/_internal/batcher.py",
      "from_items(10 rows).repartition(3).iter_batches(batch_size=4) -> 4, 4, 2 rows",
      "A training loop sizes its steps by batch_size; a lost or repeated row biases the "
      "epoch."),
    C("data.torch-batches", "MUST", "iter_torch_batches on a shard: dtypes, device, collate_fn",
      "On a shard in a TorchTrainer worker, iter_torch_batches(batch_size=k, dtypes=...) "
      "yields dicts of column name to torch.Tensor; dtypes given as a dict sets each "
      "column's dtype, a single torch dtype sets every column's; with device='auto' (the "
      "default) the tensors are on ray.train.torch.get_device() (the CPU for CPU workers). "
      "Passing both collate_fn and dtypes raises ValueError('collate_fn cannot be used with "
      "dtypes. You should manually convert the output Torch tensors to the desired dtype "
      "inside collate_fn.') when iter_torch_batches is called. A column of equal-length "
      "lists becomes one tensor (batch, length); a ragged one makes iteration raise.",
      "python/ray/data/iterator.py:DataIterator.iter_torch_batches",
      "shard.iter_torch_batches(batch_size=4, dtypes={'id': torch.int32, 'x': torch.float64})"),
    C("data.restart", "MUST", "A restarted group gets fresh equal shards; callables re-run",
      "When the worker group restarts after a failure, the new group's get_dataset_shard "
      "returns new shards of each dataset that again are disjoint with floor(n / W) rows "
      "each. A dataset given in `datasets` as a callable (returning a Dataset) is called "
      "once per worker-group start, after the previous group ended and before the new "
      "group's training functions run, and the shards are of the dataset it returned.",
      "python/ray/train/v2/_internal/callbacks/datasets.py:DatasetsCallback."
      "before_init_train_context",
      "datasets={'train': lambda: ray.data.read_parquet(path)}  # re-read at every restart",
      ray_note="Ray calls the callable in the controller actor, not in fit()'s process; it "
      "travels there pickled."),
    C("data.local", "MUST", "get_dataset_shard in local mode returns the whole Dataset",
      "With num_workers=0, get_dataset_shard(name) returns the Dataset given for that name "
      "(the Dataset itself, not a DataIterator, with all its rows; a callable in `datasets` "
      "is called once, when fit() starts, and its Dataset is returned). An unknown name, or "
      "no name, or any name when the trainer has no datasets, fails with an "
      "AssertionError whose message names the dataset (Ray: 'Dataset shard <name> not "
      "found.', <name> being None without a name).",
      "python/ray/train/v2/_internal/execution/train_fn_utils.py:LocalTrainFnUtils."
      "get_dataset_shard; " + LOCAL + "utils.py",
      "ray.train.get_dataset_shard('train').count() == len(rows)  # num_workers=0",
      ray_note="Unlike distributed mode, an unknown name raises AssertionError, not "
      "KeyError."),
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
