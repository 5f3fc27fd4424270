"""TensorflowConfig and its backend: `TF_CONFIG` on every worker, as Ray 2.60 sets it.

`on_start` asks every worker for "<node address>:<free port>", then gives worker i
``TF_CONFIG = {"cluster": {"worker": [those, in rank order]}, "task": {"type": "worker",
"index": i}}`` and ``TF_USE_LEGACY_KERAS=1``. Nothing else: no collective is created here,
``tf.distribute.MultiWorkerMirroredStrategy()`` in the training function reads TF_CONFIG
and joins the workers itself (each worker's gRPC server listens on its port). There is no
on_shutdown, as in Ray: the workers' servers end with the processes.

The port is free when picked, not reserved (Ray's behaviour too); a lost race fails the
strategy's server start, and the next attempt picks anew.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any

from reference.train._internal.network import address_and_port, host_port
from reference.train.backend import Backend, BackendConfig

LEGACY_KERAS_VAR = "TF_USE_LEGACY_KERAS"


@dataclasses.dataclass
class TensorflowConfig(BackendConfig):
    """The TensorFlow backend's configuration: no fields, as in Ray."""

    @property
    def backend_cls(self):
        return _TensorflowBackend

    def to_dict(self) -> dict[str, Any]:
        return {}


def worker_url() -> str:
    """On a worker: its node address and a free port, "host:port"."""
    return host_port(*address_and_port())


def tf_config(worker_urls: list[str], index: int) -> dict:
    """The TF_CONFIG of worker `index` of a cluster of `worker_urls` (rank order)."""
    return {"cluster": {"worker": list(worker_urls)}, "task": {"type": "worker", "index": index}}


def setup_tensorflow_environment(worker_urls: list[str], index: int) -> None:
    """On a worker: TF_CONFIG for its rank, and tf-keras as tf.keras."""
    os.environ["TF_CONFIG"] = json.dumps(tf_config(worker_urls, index))
    os.environ[LEGACY_KERAS_VAR] = "1"


class _TensorflowBackend(Backend):
    # legacy_keras first: it sets TF_USE_LEGACY_KERAS before tensorflow is imported
    preload_modules = ("reference.train._internal.legacy_keras", "reference.train.tensorflow",
                       "reference.train.tensorflow.keras")
    # Also when the node supervisors did not preload TensorFlow (a cluster started for
    # another framework): the worker then imports it while unpickling the training function,
    # which is before on_start could set the variable (Ray's bug, tensorflow.legacy-keras).
    worker_env = {LEGACY_KERAS_VAR: "1"}

    def on_start(self, worker_group, backend_config: TensorflowConfig) -> None:
        import reference

        urls = worker_group.execute(worker_url)
        reference.get([worker_group.execute_single_async(rank, setup_tensorflow_environment,
                                                         urls, rank)
                       for rank in range(len(worker_group))])
