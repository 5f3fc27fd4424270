"""TensorflowTrainer, TensorflowConfig, TensorflowCheckpoint, prepare_dataset_shard and the
Keras ReportCheckpointCallback of `ray.train.tensorflow` (clauses `tensorflow.*`).

The fits run `conformance.tf_probe.tf_probe` (see there) on 2 CPU workers:
- "main": a MultiWorkerMirroredStrategy Keras fit of EPOCHS epochs with
  ReportCheckpointCallback(), the workers started with TF_USE_LEGACY_KERAS=1
  (`RunConfig(worker_runtime_env=...)`: what a Ray 2.60 user needs, see
  `tensorflow.legacy-keras`);
- "restart": the same with FailureConfig(max_failures=1); rank 1 exits after the
  checkpointed report of epoch 1 on attempt 0;
- "default": the main fit with nothing in the workers' environment.

Every check needs tensorflow (skipped without it) except `tensorflow.import-error`, which
runs with tensorflow hidden from a fresh interpreter.
"""

from __future__ import annotations

import dataclasses
import inspect
import os
import shutil
import subprocess
import sys
import tempfile
import warnings

import pytest

from conformance import assertions, tf_probe
from conformance.catalogue import clause
from conformance.scenarios import shared

WORKERS = 2
#: the workers' environment of the main and restart fits
LEGACY = {"TF_USE_LEGACY_KERAS": "1"}
NAMES = ["TensorflowCheckpoint", "TensorflowConfig", "TensorflowTrainer",
         "prepare_dataset_shard"]
TRIGGERS = ["epoch_begin", "epoch_end", "train_batch_begin", "train_batch_end",
            "test_batch_begin", "test_batch_end", "predict_batch_begin", "predict_batch_end",
            "train_begin", "train_end", "test_begin", "test_end", "predict_begin",
            "predict_end"]


def _tf(impl):
    pytest.importorskip("tensorflow")
    return impl.framework("tensorflow")


def _noop(config=None):
    return None


def _run(impl, key: str, mode: str, failure: bool = False, env: dict | None = LEGACY,
         check_success: bool = True):
    def build(impl):
        _tf(impl)
        outcome, journal = tf_probe.run_fit(
            impl, mode, WORKERS, env=env,
            failure_config=impl.train.FailureConfig(max_failures=1) if failure else None)
        setting = (f"{impl.name}: TensorflowTrainer(num_workers={WORKERS}"
                   + (f", worker env {env}" if env else ", nothing in the workers' env")
                   + (", FailureConfig(max_failures=1); rank "
                      f"{tf_probe.KILL['rank']} calls os._exit(1) after the checkpointed "
                      f"report of epoch {tf_probe.KILL['epoch']} on attempt 0" if failure else "")
                   + f") running conformance.tf_probe.tf_probe (mode {mode!r}): a "
                   "MultiWorkerMirroredStrategy Keras fit with ReportCheckpointCallback()")
        return outcome, journal, setting

    outcome, journal, setting = shared(impl, key, build)
    if not check_success:
        return outcome, journal, setting
    return assertions.succeeded(outcome, setting), journal, setting


def _by_rank(journal, ev: str, attempt: int = 0) -> dict:
    return {e["rank"]: e for e in journal.events(ev) if e["attempt"] == attempt}


def _epochs(journal, rank: int, attempt: int = 0) -> list:
    return sorted((e for e in journal.events("tf_epoch")
                   if (e["rank"], e["attempt"]) == (rank, attempt)), key=lambda e: e["epoch"])


def _same_weights(journal, attempt: int, setting: str) -> None:
    """Every rank has the same weights after each epoch of `attempt`."""
    __tracebackhide__ = True
    per_rank = {r: [e["weights"] for e in _epochs(journal, r, attempt)] for r in range(WORKERS)}
    for rank in range(1, WORKERS):
        assertions.equal(per_rank[rank], per_rank[0],
                         f"rank {rank}'s weights after each epoch of attempt {attempt} "
                         "(rank 0's: the gradients are all-reduced)", setting)


def _tiny_model(tf):
    model = tf.keras.Sequential([tf.keras.Input(shape=(2,)), tf.keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    return model


# ------------------------------------------------------------------------ no fit
@clause("tensorflow.names")
def check_names(impl):
    tft = _tf(impl)
    assertions.equal(sorted(tft.__all__), sorted(NAMES), f"{tft.__name__}.__all__", impl.name)
    for name in NAMES:
        assertions.equal(hasattr(tft, name), True, f"{tft.__name__}.{name} exists", impl.name)
    keras = impl.framework("tensorflow.keras")
    assertions.equal(hasattr(keras, "ReportCheckpointCallback"), True,
                     f"{keras.__name__}.ReportCheckpointCallback exists", impl.name)
    assertions.equal("ReportCheckpointCallback" in tft.__all__, False,
                     f"ReportCheckpointCallback in {tft.__name__}.__all__", impl.name)


@clause("tensorflow.import-error")
def check_import_error_without_tensorflow(impl):
    name = impl.train.__name__ + ".tensorflow"
    code = ("import sys\nsys.modules['tensorflow'] = None\n"
            f"try:\n    import {name}\nexcept ModuleNotFoundError as e:\n"
            "    print('MNF', e)\nelse:\n    print('imported')\n")
    root = os.path.dirname(os.path.dirname(os.path.abspath(tf_probe.__file__)))
    path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, env=dict(os.environ, PYTHONPATH=path), cwd=root)
    assertions.equal(done.stdout.strip().splitlines()[-1:],
                     ["MNF TensorFlow isn't installed. To install TensorFlow, run 'pip "
                      "install tensorflow'."],
                     f"import {name} with tensorflow missing (stderr: "
                     f"{done.stderr[-1500:]!r})", impl.name)


@clause("tensorflow.config")
def check_config(impl):
    tft = _tf(impl)
    backend = impl.framework("backend")
    cls = tft.TensorflowConfig
    assertions.equal(dataclasses.is_dataclass(cls), True, "TensorflowConfig is a dataclass",
                     impl.name)
    assertions.equal(dataclasses.fields(cls), (), "TensorflowConfig fields", impl.name)
    config = cls()
    assertions.equal(isinstance(config, backend.BackendConfig), True,
                     f"TensorflowConfig() is a {backend.__name__}.BackendConfig", impl.name)
    assertions.equal(config.to_dict(), {}, "TensorflowConfig().to_dict()", impl.name)
    assertions.equal(isinstance(config.backend_cls, type)
                     and issubclass(config.backend_cls, backend.Backend), True,
                     "TensorflowConfig().backend_cls is a Backend subclass", impl.name)


@clause("tensorflow.trainer")
def check_trainer(impl):
    tft = _tf(impl)
    t = impl.train
    cls = tft.TensorflowTrainer
    assertions.equal(issubclass(cls, impl.DataParallelTrainer), True,
                     "TensorflowTrainer subclasses DataParallelTrainer", impl.name)
    params = inspect.signature(cls.__init__).parameters
    seen = [(k, p.kind.name, p.default) for k, p in params.items()][1:]
    keyword = ["train_loop_config", "tensorflow_config", "scaling_config", "dataset_config",
               "run_config", "datasets", "validation_config", "metadata",
               "resume_from_checkpoint"]
    assertions.equal(seen, [("train_loop_per_worker", "POSITIONAL_OR_KEYWORD",
                             inspect.Parameter.empty)]
                     + [(k, "KEYWORD_ONLY", None) for k in keyword],
                     "TensorflowTrainer.__init__ parameters (name, kind, default)", impl.name)
    trainer = cls(_noop, scaling_config=t.ScalingConfig(num_workers=2))
    assertions.equal(type(trainer.backend_config).__name__, "TensorflowConfig",
                     "TensorflowTrainer(fn).backend_config (the default)", impl.name)
    for name, value in (("metadata", {"a": 1}),
                        ("resume_from_checkpoint",
                         t.Checkpoint.from_directory(os.path.dirname(__file__)))):
        try:
            cls(_noop, **{name: value})
        except DeprecationWarning:
            pass
        else:
            raise AssertionError(f"TensorflowTrainer(fn, {name}=...) returned, expected "
                                 f"DeprecationWarning raised [{impl.name}]")


@clause("tensorflow.callback-triggers")
def check_callback_triggers(impl):
    _tf(impl)
    cls = impl.framework("tensorflow.keras").ReportCheckpointCallback
    params = inspect.signature(cls.__init__).parameters
    assertions.equal([(k, p.default) for k, p in params.items()][1:],
                     [("checkpoint_on", "epoch_end"), ("report_metrics_on", "epoch_end"),
                      ("metrics", None)],
                     "ReportCheckpointCallback.__init__ parameters (name, default)", impl.name)
    for kwargs in ({"checkpoint_on": "validation_end"},
                   {"report_metrics_on": ["epoch_end", "batch_end"]}):
        try:
            cls(**kwargs)
        except ValueError as exc:
            text = str(exc)
        else:
            raise AssertionError(f"ReportCheckpointCallback(**{kwargs}) returned, expected "
                                 f"ValueError [{impl.name}]")
        bad = next(v for v in (kwargs.get("checkpoint_on"), "batch_end") if v)
        assertions.equal((text.startswith("Invalid trigger time selected: "),
                          repr(bad) in text, text.endswith(f"Must be one of {TRIGGERS}")),
                         (True, True, True), f"ValueError of ReportCheckpointCallback("
                         f"**{kwargs}): {text!r} (prefix, names the bad event, lists the "
                         "allowed ones)", impl.name)
    for event in TRIGGERS:
        cls(checkpoint_on=[event], report_metrics_on=event)


@clause("tensorflow.checkpoint")
def check_checkpoint(impl):
    import numpy as np

    tft = _tf(impl)
    import tensorflow as tf

    model = _tiny_model(tf)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        checkpoint = tft.TensorflowCheckpoint.from_model(model)
    texts = [str(w.message) for w in caught if issubclass(w.category, DeprecationWarning)]
    assertions.equal(any("`TensorflowCheckpoint` is deprecated" in s for s in texts), True,
                     f"a DeprecationWarning from TensorflowCheckpoint.from_model (seen "
                     f"{texts})", impl.name)
    assertions.equal(isinstance(checkpoint, impl.train.Checkpoint), True,
                     "TensorflowCheckpoint.from_model(...) is a Checkpoint", impl.name)
    assertions.equal(checkpoint.get_metadata(), {"_model_filename": "model.keras"},
                     "TensorflowCheckpoint.from_model(model).get_metadata()", impl.name)
    assertions.equal(sorted(os.listdir(checkpoint.path)), [".metadata.json", "model.keras"],
                     "files of TensorflowCheckpoint.from_model(model)", impl.name)
    loaded = checkpoint.get_model()
    assertions.equal([w.tolist() for w in loaded.get_weights()],
                     [w.tolist() for w in model.get_weights()],
                     "get_model().get_weights() (those of the saved model)", impl.name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        other = tft.TensorflowCheckpoint.from_directory(tempfile.mkdtemp())
    try:
        other.get_model()
    except ValueError as exc:
        assertions.equal(str(exc).startswith("`TensorflowCheckpoint` cannot retrieve the "
                                             "model if you override the checkpoint metadata"),
                         True, f"get_model() without _model_filename: {exc}", impl.name)
    else:
        raise AssertionError("get_model() of a checkpoint without _model_filename returned, "
                             f"expected ValueError [{impl.name}]")
    np.testing.assert_equal(tft.TensorflowCheckpoint.MODEL_FILENAME_KEY, "_model_filename")
    plain = tf.keras.Sequential([tf.keras.Input(shape=(2,)), tf.keras.layers.Dense(1)])
    _check_other_constructors(tft.TensorflowCheckpoint, plain, impl.name)


def _check_other_constructors(cls, model, setting: str) -> None:
    """from_h5 and from_saved_model: their signatures, what they refuse, a model read back
    (`model` uncompiled: the H5 format keeps no Keras 3 loss)."""
    for name, first in (("from_model", "model"), ("from_h5", "file_path"),
                        ("from_saved_model", "dir_path")):
        params = inspect.signature(getattr(cls, name)).parameters
        assertions.equal([(k, p.kind.name) for k, p in params.items()],
                         [(first, "POSITIONAL_OR_KEYWORD"), ("preprocessor", "KEYWORD_ONLY")],
                         f"TensorflowCheckpoint.{name} parameters (name, kind)", setting)
    folder = tempfile.mkdtemp()
    h5 = os.path.join(folder, "model.h5")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.save(h5)
        not_h5 = os.path.join(folder, "model.bin")
        shutil.copy(h5, not_h5)
        for label, call in (("from_h5(<a .bin file>)", lambda: cls.from_h5(not_h5)),
                            ("from_h5(<no such .h5>)",
                             lambda: cls.from_h5(os.path.join(folder, "none.h5"))),
                            ("from_saved_model(<a file>)", lambda: cls.from_saved_model(h5))):
            try:
                call()
            except ValueError:
                continue
            raise AssertionError(f"TensorflowCheckpoint.{label} returned, expected "
                                 f"ValueError [{setting}]")
        checkpoint = cls.from_h5(h5)
        assertions.equal(checkpoint.get_metadata(), {"_model_filename": "model.h5"},
                         "TensorflowCheckpoint.from_h5(<model.h5>).get_metadata()", setting)
        loaded = checkpoint.get_model()
        saved = cls.from_saved_model(folder)  # a folder: the whole folder is the checkpoint
    assertions.equal([w.tolist() for w in loaded.get_weights()],
                     [w.tolist() for w in model.get_weights()],
                     "from_h5(...).get_model().get_weights() (those of the saved model)",
                     setting)
    assertions.equal((saved.get_metadata(), sorted(os.listdir(saved.path))),
                     ({"_model_filename": "."}, [".metadata.json", "model.bin", "model.h5"]),
                     "TensorflowCheckpoint.from_saved_model(<folder>) (metadata, files)",
                     setting)


@clause("tensorflow.prepare-dataset-shard")
def check_prepare_dataset_shard(impl):
    tft = _tf(impl)
    import tensorflow as tf

    ds = tft.prepare_dataset_shard(tf.data.Dataset.range(5).batch(2))
    assertions.equal(ds.options().experimental_distribute.auto_shard_policy,
                     tf.data.experimental.AutoShardPolicy.OFF,
                     "auto_shard_policy of prepare_dataset_shard(ds)", impl.name)
    assertions.equal(type(ds).__name__, "_PrefetchDataset",
                     "type of prepare_dataset_shard(ds) (a prefetch on top)", impl.name)
    assertions.equal([b.tolist() for b in ds.as_numpy_iterator()], [[0, 1], [2, 3], [4]],
                     "elements of prepare_dataset_shard(range(5).batch(2))", impl.name)


# ------------------------------------------------------------------------ main fit
@clause("tensorflow.tf-config")
def check_tf_config(impl):
    result, journal, setting = _run(impl, "tf-main", "main")
    starts = _by_rank(journal, "tf_start")
    assertions.equal(sorted(starts), list(range(WORKERS)), "ranks that started", setting)
    urls = starts[0]["tf_config"]["cluster"]["worker"]
    assertions.equal((len(urls), len(set(urls)), all(":" in u for u in urls)),
                     (WORKERS, WORKERS, True),
                     f"TF_CONFIG cluster.worker {urls} (one distinct host:port per rank)",
                     setting)
    for rank, e in sorted(starts.items()):
        assertions.equal(e["tf_config"], {"cluster": {"worker": urls},
                                          "task": {"type": "worker", "index": rank}},
                         f"rank {rank}: TF_CONFIG", setting)
        assertions.equal(e["env"]["TF_USE_LEGACY_KERAS"], "1",
                         f"rank {rank}: TF_USE_LEGACY_KERAS", setting)


@clause("tensorflow.legacy-keras")
def check_legacy_keras_by_default(impl):
    outcome, journal, setting = _run(impl, "tf-default", "main", env=None,
                                     check_success=False)
    starts = _by_rank(journal, "tf_start")
    assertions.equal(sorted(starts), list(range(WORKERS)), "ranks that started", setting)
    for rank, e in sorted(starts.items()):
        assertions.equal((e["env"]["TF_USE_LEGACY_KERAS"], e["keras"], e["callback_keras"]),
                         ("1", "tf_keras", "tf_keras"),
                         f"rank {rank}: (TF_USE_LEGACY_KERAS, package of tf.keras.Model, "
                         "package of the Keras Callback that ReportCheckpointCallback derives from)", setting)
    assertions.succeeded(outcome, setting)
    _same_weights(journal, 0, setting)


@clause("tensorflow.multi-worker")
def check_multi_worker(impl):
    result, journal, setting = _run(impl, "tf-main", "main")
    replicas = {r: e["replicas"] for r, e in _by_rank(journal, "tf_strategy").items()}
    assertions.equal(replicas, dict.fromkeys(range(WORKERS), WORKERS),
                     "rank -> MultiWorkerMirroredStrategy().num_replicas_in_sync", setting)
    for rank in range(WORKERS):
        assertions.equal([e["epoch"] for e in _epochs(journal, rank)],
                         list(range(tf_probe.EPOCHS)), f"rank {rank}: epochs trained",
                         setting)
    _same_weights(journal, 0, setting)
    first = _epochs(journal, 0)[0]["weights"]
    assertions.equal(first != [[[0.0]] * tf_probe.FEATURES, [0.0]], True,
                     f"weights after epoch 0 moved from zero ({first})", setting)


@clause("tensorflow.callback-reports")
def check_callback_reports(impl):
    result, journal, setting = _run(impl, "tf-main", "main")
    epochs = _epochs(journal, 0)
    assertions.equal(sorted(result.metrics), sorted(epochs[-1]["logs"]),
                     "keys of result.metrics (the Keras logs of the last epoch)", setting)
    assertions.equal(abs(result.metrics["loss"] - epochs[-1]["logs"]["loss"]) < 1e-6, True,
                     f"result.metrics['loss']={result.metrics['loss']!r}, rank 0's last "
                     f"epoch logged {epochs[-1]['logs']['loss']!r}", setting)
    frame = result.metrics_dataframe
    assertions.equal(len(frame), tf_probe.EPOCHS, "rows of result.metrics_dataframe (one "
                     "report per epoch end)", setting)
    assertions.equal(result.checkpoint is not None, True, "result.checkpoint is not None",
                     setting)
    assertions.equal(result.checkpoint.get_metadata(), {"_model_filename": "model.keras"},
                     "result.checkpoint.get_metadata()", setting)
    with result.checkpoint.as_directory() as d:
        assertions.equal(sorted(os.listdir(d)), [".metadata.json", "model.keras"],
                         "result.checkpoint files", setting)
    assertions.equal(len(result.best_checkpoints), tf_probe.EPOCHS,
                     "len(result.best_checkpoints) (a checkpoint per epoch)", setting)


# ------------------------------------------------------------------------ restart fit
@clause("tensorflow.restart")
def check_restart(impl):
    result, journal, setting = _run(impl, "tf-restart", "restart", failure=True)
    kill = tf_probe.KILL
    (killed,) = journal.events("tf_kill")
    assertions.equal((killed["rank"], killed["epoch"]), (kill["rank"], kill["epoch"]),
                     "(rank, epoch) of the os._exit(1)", setting)
    assertions.equal(sorted({e["attempt"] for e in journal.events("tf_start")}), [0, 1],
                     "attempts that started", setting)
    second = _by_rank(journal, "tf_start", 1)
    urls = second[0]["tf_config"]["cluster"]["worker"]
    for rank, e in sorted(second.items()):
        assertions.equal(e["tf_config"]["task"], {"type": "worker", "index": rank},
                         f"rank {rank}: TF_CONFIG task on attempt 1", setting)
        assertions.equal(e["tf_config"]["cluster"]["worker"], urls,
                         f"rank {rank}: TF_CONFIG cluster on attempt 1", setting)
    saved = [e for e in _epochs(journal, 0, 0) if e["epoch"] == kill["epoch"]]
    restored = _by_rank(journal, "tf_restored", 1)
    assertions.equal(sorted(restored), list(range(WORKERS)),
                     "ranks of attempt 1 that got a checkpoint from get_checkpoint()", setting)
    for rank, e in sorted(restored.items()):
        assertions.equal((e["epochs_done"], e["files"], e["metadata"]),
                         (kill["epoch"] + 1, [".metadata.json", "model.keras"],
                          {"_model_filename": "model.keras"}),
                         f"rank {rank}: (epochs the restored optimizer counts, files, "
                         "metadata) of get_checkpoint() on attempt 1", setting)
        assertions.equal(e["weights"], saved[0]["weights"],
                         f"rank {rank}: weights of the restored model (rank 0's after "
                         f"epoch {kill['epoch']})", setting)
    for rank in range(WORKERS):
        assertions.equal([e["epoch"] for e in _epochs(journal, rank, 1)],
                         list(range(kill["epoch"] + 1, tf_probe.EPOCHS)),
                         f"rank {rank}: epochs trained on attempt 1", setting)
    _same_weights(journal, 1, setting)
    assertions.equal(len(result.metrics_dataframe) >= tf_probe.EPOCHS, True,
                     "rows of result.metrics_dataframe", setting)
    assertions.equal(sorted(result.metrics), ["loss"], "keys of result.metrics "
                     "(ReportCheckpointCallback(metrics=['loss']))", setting)
