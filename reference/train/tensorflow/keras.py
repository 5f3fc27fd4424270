"""ReportCheckpointCallback: Keras's events reported through `reference.train.report`.

Ray's callback (`ray.train.tensorflow.keras`), alpha there too. On each event named in
`report_metrics_on` it reports the selected Keras `logs`; on each event in `checkpoint_on`
it reports them with a checkpoint: **every rank** saves its model as `model.keras` in a
fresh temporary directory (metadata `{"_model_filename": "model.keras"}`), reports it and
removes the directory once `report` returned (the report has copied or moved it). Under
MultiWorkerMirroredStrategy every rank holds the same weights, so any rank's file is the
model; saving on every rank also takes part in the strategy's collective save.

Event names are Keras's hooks without `on_`; `metrics` is None (all of `logs`), a key, a
list of keys, or {reported name: Keras key}.
"""

from __future__ import annotations

import shutil
from typing import Optional, Union

from tensorflow.keras.callbacks import Callback as _KerasCallback

from reference.train.tensorflow._checkpoint import TensorflowCheckpoint

#: the Keras events a trigger may name, in Ray's order (and its error message's)
TRIGGERS = [
    "epoch_begin", "epoch_end", "train_batch_begin", "train_batch_end", "test_batch_begin",
    "test_batch_end", "predict_batch_begin", "predict_batch_end", "train_begin", "train_end",
    "test_begin", "test_end", "predict_begin", "predict_end",
]


def _as_list(value) -> list:
    return [value] if isinstance(value, str) else list(value)


class ReportCheckpointCallback(_KerasCallback):
    """Keras callback for reporting and checkpointing: metrics are always reported with
    a checkpoint, even on an event missing from `report_metrics_on`.

    Args:
        checkpoint_on: event(s) at which to save and report a checkpoint.
        report_metrics_on: event(s) at which to report metrics alone.
        metrics: which Keras `logs` to report (see the module docstring).
    """

    def __init__(self, checkpoint_on: Union[str, list[str]] = "epoch_end",
                 report_metrics_on: Union[str, list[str]] = "epoch_end",
                 metrics: Optional[Union[str, list[str], dict[str, str]]] = None):
        super().__init__()
        checkpoint_on, report_metrics_on = _as_list(checkpoint_on), _as_list(report_metrics_on)
        on = list(set(checkpoint_on + report_metrics_on))
        if any(event not in TRIGGERS for event in on):
            # Ray's message, word for word
            raise ValueError(f"Invalid trigger time selected: {on}. Must be one of {TRIGGERS}")
        if not isinstance(metrics, (type(None), str, list, dict)):
            raise TypeError(f"ReportCheckpointCallback(metrics={metrics!r}): expected None, a "
                            "str, a list of str or a dict of {reported name: Keras key}.")
        self._checkpoint_on, self._report_metrics_on = checkpoint_on, report_metrics_on
        self._on = set(on)
        self._metrics = metrics

    def _select(self, logs: Optional[dict]) -> dict:
        logs = logs or {}
        if self._metrics is None:
            return dict(logs)
        if isinstance(self._metrics, str):
            return {self._metrics: logs[self._metrics]}
        if isinstance(self._metrics, list):
            return {key: logs[key] for key in self._metrics}
        return {name: logs[key] for name, key in self._metrics.items()}

    def _handle(self, logs: Optional[dict], when: str) -> None:
        from reference import train

        metrics = self._select(logs)
        if when in self._checkpoint_on:
            checkpoint = TensorflowCheckpoint._from_model_internal(self.model)
            try:
                train.report(metrics, checkpoint=checkpoint)
            finally:
                shutil.rmtree(checkpoint.path, ignore_errors=True)
        else:
            train.report(metrics, checkpoint=None)

    def _maybe(self, logs, when: str) -> None:
        if when in self._on:
            self._handle(logs, when)

    # Keras's hooks, each reporting when its event was selected
    def on_epoch_begin(self, epoch, logs=None):
        self._maybe(logs, "epoch_begin")

    def on_epoch_end(self, epoch, logs=None):
        self._maybe(logs, "epoch_end")

    def on_train_batch_begin(self, batch, logs=None):
        self._maybe(logs, "train_batch_begin")

    def on_train_batch_end(self, batch, logs=None):
        self._maybe(logs, "train_batch_end")

    def on_test_batch_begin(self, batch, logs=None):
        self._maybe(logs, "test_batch_begin")

    def on_test_batch_end(self, batch, logs=None):
        self._maybe(logs, "test_batch_end")

    def on_predict_batch_begin(self, batch, logs=None):
        self._maybe(logs, "predict_batch_begin")

    def on_predict_batch_end(self, batch, logs=None):
        self._maybe(logs, "predict_batch_end")

    def on_train_begin(self, logs=None):
        self._maybe(logs, "train_begin")

    def on_train_end(self, logs=None):
        self._maybe(logs, "train_end")

    def on_test_begin(self, logs=None):
        self._maybe(logs, "test_begin")

    def on_test_end(self, logs=None):
        self._maybe(logs, "test_end")

    def on_predict_begin(self, logs=None):
        self._maybe(logs, "predict_begin")

    def on_predict_end(self, logs=None):
        self._maybe(logs, "predict_end")

