"""The clauses of LightGBM and JAX."""

from conformance._clauses._record import DOC_FT, FN, JAX, LOCAL, C

CLAUSES = [
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
]
