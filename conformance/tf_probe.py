"""Training function of the TensorFlow checks (clauses `tensorflow.*`).

`tf_probe` runs on every worker of a TensorflowTrainer. It journals what the backend gave
the worker (TF_CONFIG, TF_USE_LEGACY_KERAS) and which Keras TensorFlow resolved
(`tf.keras.Model`'s package, and the package of the root base class of the
implementation's `ReportCheckpointCallback`: Keras's Callback), then builds a one-layer Keras model inside
`tf.distribute.MultiWorkerMirroredStrategy().scope()` (zero initial weights), compiles it
with SGD and MSE and fits EPOCHS epochs of STEPS steps on its own rows (`shard(rank)`:
different on every rank, so identical weights on all ranks prove the gradient all-reduce)
through the implementation's `prepare_dataset_shard`, with the implementation's
`ReportCheckpointCallback()` (defaults: a checkpoint and all logs at every epoch end)
followed by a callback that journals the weights after each epoch.

`config["mode"]`:
- "main": just the above;
- "restart": on attempt 0, rank KILL["rank"] calls os._exit(1) right after the report of
  epoch KILL["epoch"] (once it is registered). A later attempt loads the model from
  get_checkpoint()'s `model.keras` inside the strategy's scope and fits on from the epoch
  after the one the optimizer's step counter says it finished.
"""

from __future__ import annotations

import importlib
import json
import os

from conformance.probe import Journal, exit_after_registered

EPOCHS = 3
STEPS = 4
BATCH = 8
FEATURES = 3
LR = 0.05
KILL = {"rank": 1, "epoch": 1}
ENV = ("TF_CONFIG", "TF_USE_LEGACY_KERAS")


def shard(rank: int):
    """(x, y) of one rank as float32: STEPS * BATCH rows, different per rank."""
    import numpy as np

    rng = np.random.default_rng(300 + rank)
    x = rng.normal(size=(STEPS * BATCH, FEATURES)).astype("float32")
    y = (x @ np.array([1.0, -2.0, 0.5]) + 1.0 + rank).astype("float32").reshape(-1, 1)
    return x, y


def _weights(model) -> list:
    return [w.tolist() for w in model.get_weights()]


#: the ReportCheckpointCallback of each mode: every log by default, a list of keys
CALLBACK_ARGS = {"main": {}, "restart": {"metrics": ["loss"]}}


def tf_probe(config: dict) -> None:
    train = importlib.import_module(config["train_module"])
    tft = importlib.import_module(config["train_module"] + ".tensorflow")
    tfk = importlib.import_module(config["train_module"] + ".tensorflow.keras")
    journal = Journal(config["journal"])
    mode = config["mode"]
    ctx = train.get_context()
    rank, world = ctx.get_world_rank(), ctx.get_world_size()
    attempt = journal.next_attempt(rank)
    import tensorflow as tf

    env = {k: os.environ.get(k) for k in ENV}
    callback_base = tfk.ReportCheckpointCallback.__mro__[-2]  # Keras's Callback, below object
    journal.record(ev="tf_start", rank=rank, world=world, attempt=attempt, pid=os.getpid(),
                   env=env, tf_config=json.loads(env["TF_CONFIG"]) if env["TF_CONFIG"] else None,
                   keras=tf.keras.Model.__module__.split(".")[0],
                   callback_keras=callback_base.__module__.split(".")[0])
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    journal.record(ev="tf_strategy", rank=rank, attempt=attempt,
                   replicas=strategy.num_replicas_in_sync)

    restored = train.get_checkpoint()
    first = 0
    with strategy.scope():
        if restored is not None:
            with restored.as_directory() as d:
                files = sorted(os.listdir(d))
                model = tf.keras.models.load_model(os.path.join(d, "model.keras"))
            first = int(model.optimizer.iterations.numpy()) // STEPS
            journal.record(ev="tf_restored", rank=rank, attempt=attempt, files=files,
                           epochs_done=first, weights=_weights(model),
                           metadata=restored.get_metadata())
        else:
            model = tf.keras.Sequential([
                tf.keras.Input(shape=(FEATURES,)),
                tf.keras.layers.Dense(1, kernel_initializer="zeros", bias_initializer="zeros"),
            ])
            model.compile(optimizer=tf.keras.optimizers.SGD(LR), loss="mse")

    x, y = shard(rank)
    data = tft.prepare_dataset_shard(
        tf.data.Dataset.from_tensor_slices((x, y)).batch(BATCH).repeat())

    class Recorder(tf.keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            journal.record(ev="tf_epoch", rank=rank, attempt=attempt, epoch=epoch,
                           logs={k: float(v) for k, v in (logs or {}).items()},
                           weights=_weights(self.model))
            if mode == "restart" and attempt == 0 and (rank, epoch) == (KILL["rank"],
                                                                        KILL["epoch"]):
                exit_after_registered(train, journal, "tf_kill", rank, attempt, epoch, epoch=epoch)

    model.fit(data, epochs=EPOCHS, steps_per_epoch=STEPS, initial_epoch=first, verbose=0,
              callbacks=[tfk.ReportCheckpointCallback(**CALLBACK_ARGS[mode]), Recorder()])
    journal.record(ev="tf_end", rank=rank, attempt=attempt, weights=_weights(model))


# ------------------------------------------------------------------------ driver side
def run_fit(impl, mode: str, num_workers: int, failure_config=None, env: dict | None = None,
            deadline_s: float = 240.0):
    """fit() of the implementation's TensorflowTrainer running `tf_probe`; returns
    (outcome, journal)."""
    from conformance.scenarios import TrainerFactory, workspace

    t = impl.train
    tft = impl.framework("tensorflow")
    folder = workspace()
    journal = os.path.join(folder, "journal")
    os.makedirs(journal)
    run_config = dict(name=f"tf-{mode}", storage_path=os.path.join(folder, "s"))
    if failure_config is not None:
        run_config["failure_config"] = failure_config
    if env:
        run_config["worker_runtime_env"] = {"env_vars": dict(env)}
    kwargs = dict(train_loop_per_worker=tf_probe,
                  train_loop_config={"train_module": t.__name__, "journal": journal,
                                     "mode": mode},
                  scaling_config=t.ScalingConfig(num_workers=num_workers),
                  run_config=t.RunConfig(**run_config))
    factory = TrainerFactory(tft.TensorflowTrainer, kwargs, journal_dir=journal)
    outcome = impl.fit(factory, max(impl.fit_deadline_s, deadline_s))
    return outcome, Journal(journal)
