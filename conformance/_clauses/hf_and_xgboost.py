"""The clauses of Lightning, Hugging Face Transformers and Accelerate, and XGBoost."""

from conformance._clauses._record import DOC_FT, C

CLAUSES = [
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
]
