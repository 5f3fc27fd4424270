"""The clauses of checkpoint retention, the train context, fault tolerance and resuming a run."""

from conformance._clauses._record import CKMGR, CKMGR_SCORE, DOC_FT, FAIL, STORAGE, WG, C

CLAUSES = [
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
]
