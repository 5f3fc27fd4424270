"""TensorflowTrainer.fit() with real TensorFlow workers on the CPU: TF_CONFIG per rank, a
2-worker MultiWorkerMirroredStrategy Keras fit ending with the same weights on both ranks,
the callback's checkpoints, and a killed worker resuming from the Keras checkpoint."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

pytest.importorskip("tensorflow")
pytest.importorskip("tf_keras")

import reference.train as train  # noqa: E402
from reference.train.tensorflow import TensorflowTrainer  # noqa: E402

pytestmark = pytest.mark.slow
STEPS, EPOCHS = 3, 3


def fit(tmp_path, fn, config=None, **run):
    return TensorflowTrainer(fn, train_loop_config=config or {},
                             scaling_config=train.ScalingConfig(num_workers=2),
                             run_config=train.RunConfig(storage_path=str(tmp_path), **run)).fit()


def environment():
    import tensorflow as tf

    from reference.train.tensorflow.keras import ReportCheckpointCallback

    return {"rank": train.get_context().get_world_rank(),
            "tf_config": json.loads(os.environ["TF_CONFIG"]),
            "legacy": os.environ.get("TF_USE_LEGACY_KERAS"),
            "keras": tf.keras.Model.__module__.split(".")[0],
            "callback_keras": ReportCheckpointCallback.__mro__[1].__module__.split(".")[0]}


def test_every_rank_gets_its_tf_config_and_tf_keras(tmp_path):
    seen = fit(tmp_path, environment).return_value  # rank 0's
    urls = seen["tf_config"]["cluster"]["worker"]
    assert len(set(urls)) == 2 and all(u.rsplit(":", 1)[1].isdigit() for u in urls)
    assert seen["tf_config"]["task"] == {"type": "worker", "index": 0}
    assert (seen["legacy"], seen["keras"], seen["callback_keras"]) == ("1", "tf_keras",
                                                                       "tf_keras")


@pytest.mark.slow
def test_tf_keras_also_on_a_cluster_that_did_not_preload_tensorflow(tmp_path):
    """A cluster started for another framework (its supervisors never imported TensorFlow):
    the worker imports TensorFlow while unpickling the training function, before on_start;
    the backend's worker_env has TF_USE_LEGACY_KERAS set already (where Ray 2.60 fails)."""
    import reference
    import simcluster

    reference.shutdown()
    try:
        with simcluster.Cluster(nodes=[simcluster.NodeSpec(cpus=2)],
                                preload=reference.PRELOAD) as cluster:
            reference.init(address=cluster.address)
            seen = fit(tmp_path, environment).return_value
            reference.shutdown()
    finally:
        reference.shutdown()
    assert (seen["legacy"], seen["keras"], seen["callback_keras"]) == ("1", "tf_keras",
                                                                       "tf_keras")


def _both(config):
    seen = environment()
    with open(os.path.join(config["dir"], f"rank{seen['rank']}.json"), "w") as f:
        json.dump(seen, f)


def test_rank_one_gets_index_one_of_the_same_cluster(tmp_path):
    fit(tmp_path, _both, {"dir": str(tmp_path)})
    ranks = [json.load(open(tmp_path / f"rank{r}.json")) for r in (0, 1)]
    assert ranks[0]["tf_config"]["cluster"] == ranks[1]["tf_config"]["cluster"]
    assert [r["tf_config"]["task"]["index"] for r in ranks] == [0, 1]


def keras_fit(config):
    """Each rank fits its own rows (seeded by rank) under MultiWorkerMirroredStrategy; a
    restarted attempt loads the callback's model.keras and fits on."""
    import tensorflow as tf

    from reference.train.tensorflow import prepare_dataset_shard
    from reference.train.tensorflow.keras import ReportCheckpointCallback

    rank = train.get_context().get_world_rank()
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    restored, first = train.get_checkpoint(), 0
    with strategy.scope():
        if restored:
            with restored.as_directory() as d:
                model = tf.keras.models.load_model(os.path.join(d, "model.keras"))
            first = int(model.optimizer.iterations.numpy()) // STEPS
        else:
            model = tf.keras.Sequential([tf.keras.Input(shape=(3,)), tf.keras.layers.Dense(
                1, kernel_initializer="zeros")])
            model.compile(optimizer=tf.keras.optimizers.SGD(0.05), loss="mse")
    rng = np.random.default_rng(rank)
    x = rng.normal(size=(STEPS * 8, 3)).astype("float32")
    y = (x.sum(axis=1, keepdims=True) + 3 * rank).astype("float32")
    data = prepare_dataset_shard(tf.data.Dataset.from_tensor_slices((x, y)).batch(8).repeat())

    class Kill(tf.keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            if config.get("kill") and restored is None and rank == 1 and epoch == 1:
                train.get_all_reported_checkpoints()  # epoch 1's checkpoint is registered
                os._exit(1)

    model.fit(data, epochs=EPOCHS, steps_per_epoch=STEPS, initial_epoch=first, verbose=0,
              callbacks=[ReportCheckpointCallback(), Kill()])
    weights = np.concatenate([w.ravel() for w in model.get_weights()])
    with open(os.path.join(config["dir"], f"weights{rank}.npy"), "wb") as f:
        np.save(f, weights)
    return {"first_epoch": first, "replicas": strategy.num_replicas_in_sync}


def _weights(tmp_path):
    return [np.load(tmp_path / f"weights{r}.npy") for r in (0, 1)]


def test_multi_worker_mirrored_fit_ends_with_the_same_weights_on_both_ranks(tmp_path):
    result = fit(tmp_path, keras_fit, {"dir": str(tmp_path)})
    w0, w1 = _weights(tmp_path)
    # the ranks saw different rows: only the all-reduce can make their weights equal
    np.testing.assert_array_equal(w0, w1)
    assert np.abs(w0).max() > 0.1
    assert result.return_value == {"first_epoch": 0, "replicas": 2}
    assert len(result.metrics_dataframe) == EPOCHS and "loss" in result.metrics
    assert result.checkpoint.get_metadata() == {"_model_filename": "model.keras"}
    with result.checkpoint.as_directory() as d:
        assert sorted(os.listdir(d)) == [".metadata.json", "model.keras"]
        # the workers' Keras is tf-keras; this driver's tf.keras is Keras 3, which cannot
        # read the file, so it is loaded with tf_keras itself
        import tf_keras

        saved = tf_keras.models.load_model(os.path.join(d, "model.keras"))
    np.testing.assert_array_equal(np.concatenate([w.ravel() for w in saved.get_weights()]), w0)


def test_killed_worker_resumes_from_the_keras_checkpoint(tmp_path):
    result = fit(tmp_path, keras_fit, {"dir": str(tmp_path), "kill": True},
                 failure_config=train.FailureConfig(max_failures=1))
    assert result.return_value == {"first_epoch": 2, "replicas": 2}
    w0, w1 = _weights(tmp_path)
    np.testing.assert_array_equal(w0, w1)
    # epochs 0 and 1 on attempt 0, epoch 2 on attempt 1
    assert len(result.metrics_dataframe) == EPOCHS
