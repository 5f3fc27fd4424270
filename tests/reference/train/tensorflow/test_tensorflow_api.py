"""reference.train.tensorflow without a fit: the names, the missing-TensorFlow error, the
config, the trainer's arguments, the callback's arguments, TensorflowCheckpoint and
prepare_dataset_shard; and the callback in a local-mode fit (real Keras, this process)."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings

import pytest

tf = pytest.importorskip("tensorflow")

import reference.train as train  # noqa: E402
import reference.train.tensorflow as rtf  # noqa: E402
from reference.train.tensorflow import (  # noqa: E402
    TensorflowCheckpoint,
    TensorflowConfig,
    TensorflowTrainer,
    prepare_dataset_shard,
)
from reference.train.tensorflow.keras import TRIGGERS, ReportCheckpointCallback  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), *[os.pardir] * 4))


def model():
    m = tf.keras.Sequential([tf.keras.Input(shape=(2,)), tf.keras.layers.Dense(1)])
    m.compile(optimizer="sgd", loss="mse", metrics=["mae"])
    return m


def test_all_is_rays():
    assert rtf.__all__ == ["TensorflowCheckpoint", "TensorflowConfig", "prepare_dataset_shard",
                           "TensorflowTrainer"]


def test_import_without_tensorflow_raises_rays_message():
    code = ("import sys; sys.modules['tensorflow'] = None\n"
            "try:\n    import reference.train.tensorflow\n"
            "except ModuleNotFoundError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, cwd=ROOT)
    assert out.stdout.strip() == ("TensorFlow isn't installed. To install TensorFlow, run "
                                  "'pip install tensorflow'."), out.stderr[-2000:]


def test_config_has_no_fields_and_the_trainer_defaults_to_it():
    assert TensorflowConfig().to_dict() == {}
    trainer = TensorflowTrainer(lambda: None, scaling_config=train.ScalingConfig(num_workers=2))
    assert isinstance(trainer.backend_config, TensorflowConfig)
    with pytest.raises(DeprecationWarning, match="metadata"):
        TensorflowTrainer(lambda: None, metadata={"a": 1})
    with pytest.raises(TypeError):
        TensorflowTrainer(lambda: None, TensorflowConfig())  # keyword-only, as in Ray


def test_invalid_trigger_raises_rays_message():
    with pytest.raises(ValueError) as info:
        ReportCheckpointCallback(checkpoint_on="validation_end")
    assert str(info.value) == (f"Invalid trigger time selected: ['validation_end', "
                               f"'epoch_end']. Must be one of {TRIGGERS}") or str(
        info.value) == (f"Invalid trigger time selected: ['epoch_end', 'validation_end']. "
                        f"Must be one of {TRIGGERS}")
    with pytest.raises(TypeError, match="metrics=3"):
        ReportCheckpointCallback(metrics=3)


def test_checkpoint_warns_when_public_not_when_internal(tmp_path):
    m = model()
    with pytest.warns(DeprecationWarning, match="`TensorflowCheckpoint` is deprecated"):
        ckpt = TensorflowCheckpoint.from_model(m)
    assert ckpt.get_metadata() == {"_model_filename": "model.keras"}
    assert sorted(os.listdir(ckpt.path)) == [".metadata.json", "model.keras"]
    assert [w.tolist() for w in ckpt.get_model().get_weights()] == \
        [w.tolist() for w in m.get_weights()]
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*TensorflowCheckpoint", category=Warning)
        TensorflowCheckpoint._from_model_internal(m)
    ckpt.set_metadata({"other": 1})
    with pytest.raises(ValueError, match="cannot retrieve the model if you override"):
        ckpt.get_model()
    with pytest.raises(ValueError, match="preprocessor="):
        TensorflowCheckpoint.from_model(m, preprocessor=object())
    with pytest.raises(ValueError, match="file_path="):  # checked before any construction
        TensorflowCheckpoint.from_h5(str(tmp_path / "missing.h5"))


def test_prepare_dataset_shard_turns_auto_sharding_off():
    ds = prepare_dataset_shard(tf.data.Dataset.range(4).batch(3))
    assert ds.options().experimental_distribute.auto_shard_policy == \
        tf.data.experimental.AutoShardPolicy.OFF
    assert [b.tolist() for b in ds.as_numpy_iterator()] == [[0, 1, 2], [3]]
    with pytest.raises(TypeError, match="tf_dataset_shard=\\[1\\]"):
        prepare_dataset_shard([1])


def _fit_with_callback(config):
    x = tf.random.stateless_normal((16, 2), seed=(1, 2))
    m = model()
    m.fit(x, x[:, :1], epochs=3, batch_size=8, verbose=0,
          callbacks=[ReportCheckpointCallback(**config)])


def test_callback_in_local_mode_selects_and_renames_metrics(tmp_path):
    result = TensorflowTrainer(
        _fit_with_callback,
        train_loop_config={"checkpoint_on": "train_end", "report_metrics_on": "epoch_end",
                           "metrics": {"err": "mae"}},
        scaling_config=train.ScalingConfig(num_workers=0),
        run_config=train.RunConfig(storage_path=str(tmp_path), name="local")).fit()
    # epoch ends report metrics only; train_end reports them with the checkpoint
    assert list(result.metrics) == ["err"]
    # local mode keeps the reported Checkpoint object, as Ray's does, and the callback has
    # removed its temporary folder once report() returned: nothing persists
    assert result.checkpoint is not None and not os.path.exists(result.checkpoint.path)
