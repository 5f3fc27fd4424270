"""The clauses of TensorFlow, and Ray Data in Train."""

from conformance._clauses._record import DOC_FT, LOCAL, C

CLAUSES = [
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
]
