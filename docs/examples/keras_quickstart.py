"""TensorflowTrainer: Ray 2.60's Keras quick start, on synthetic data.

    python docs/examples/keras_quickstart.py [--impl reference|ray] [--workers 2] [--epochs 4]

What it shows (Ray's "Get Started with Distributed Training using TensorFlow/Keras"):
- the model built and compiled inside `tf.distribute.MultiWorkerMirroredStrategy().scope()`
  in the training function: TensorflowTrainer gives every worker its `TF_CONFIG`, the
  strategy joins the workers and all-reduces the gradients;
- the data as a dataset of rows split across the workers (`datasets={"train": ...}`,
  `train.get_dataset_shard("train")`), turned into a `tf.data.Dataset` and passed through
  `prepare_dataset_shard` (the strategy must not shard it again). Ray's guide uses
  `shard.to_tf(...)`; the reference's datasets have no `to_tf`, so this reads the shard as
  NumPy batches, which both implementations have;
- `RunConfig(worker_runtime_env=...)` with `TF_USE_LEGACY_KERAS=1`: Ray 2.60 needs it for
  tf-keras in its workers (clause `tensorflow.legacy-keras`); the reference does not;
- `ReportCheckpointCallback()` in `model.fit`: every epoch end reports Keras's logs and a
  checkpoint holding `model.keras`, so `result.metrics` holds the last epoch's logs and
  `result.checkpoint` the model.

The rows are y = 2x on 200 points, so nothing is downloaded.
"""

from __future__ import annotations

import argparse
import importlib
import os


def build_model():
    import tensorflow as tf

    return tf.keras.Sequential([
        tf.keras.layers.InputLayer(input_shape=()),
        # add the feature dimension: (batch_size,) -> (batch_size, 1)
        tf.keras.layers.Flatten(),
        tf.keras.layers.Dense(10),
        tf.keras.layers.Dense(1),
    ])


def train_func(config: dict):
    import numpy as np
    import tensorflow as tf

    train = importlib.import_module(config["impl"] + ".train")
    tftrain = importlib.import_module(config["impl"] + ".train.tensorflow")
    keras = importlib.import_module(config["impl"] + ".train.tensorflow.keras")

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    with strategy.scope():
        # model building and compiling must be inside `strategy.scope()`
        model = build_model()
        model.compile(optimizer=tf.keras.optimizers.SGD(learning_rate=config["lr"]),
                      loss=tf.keras.losses.mean_squared_error,
                      metrics=[tf.keras.metrics.mean_absolute_error])

    shard = train.get_dataset_shard("train")
    batches = list(shard.iter_batches(batch_size=config["batch_size"], batch_format="numpy"))
    x = np.concatenate([b["x"] for b in batches]).astype("float32")
    y = np.concatenate([b["y"] for b in batches]).astype("float32")
    dataset = tftrain.prepare_dataset_shard(
        tf.data.Dataset.from_tensor_slices((x, y)).batch(config["batch_size"]))
    history = model.fit(dataset, epochs=config["epochs"], verbose=0,
                        callbacks=[keras.ReportCheckpointCallback()])
    return history.history


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--impl", choices=["reference", "ray"], default="reference")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=4)
    args = parser.parse_args()
    root = importlib.import_module(args.impl)
    train = importlib.import_module(args.impl + ".train")
    data = importlib.import_module(args.impl + ".data")
    from_tf = importlib.import_module(args.impl + ".train.tensorflow")

    config = {"impl": args.impl, "lr": 0.1, "batch_size": 20, "epochs": args.epochs}
    train_dataset = data.from_items([{"x": x / 200, "y": 2 * x / 200} for x in range(200)])
    trainer = from_tf.TensorflowTrainer(
        train_loop_per_worker=train_func,
        train_loop_config=config,
        scaling_config=train.ScalingConfig(num_workers=args.workers),
        datasets={"train": train_dataset},
        # Not in Ray's guide, needed on Ray 2.60 with TensorFlow >= 2.16: its workers import
        # TensorFlow before the backend sets this variable, so without it tf.keras is Keras 3
        # and model.fit under the strategy fails. The reference sets it early enough.
        run_config=train.RunConfig(
            worker_runtime_env={"env_vars": {"TF_USE_LEGACY_KERAS": "1"}}),
    )
    result = trainer.fit()
    print("final metrics:", {k: float(v) for k, v in result.metrics.items()})
    with result.checkpoint.as_directory() as folder:
        print("checkpoint files:", sorted(os.listdir(folder)))
    root.shutdown()


if __name__ == "__main__":
    main()
