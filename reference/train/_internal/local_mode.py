"""Local mode (`ScalingConfig(num_workers=0)`): the training function runs in the driver.

No workers, no storage, no retries. `report` only remembers the last call: its metrics
become `Result.metrics` (with or without a checkpoint), and its checkpoint (None when it had
none) is what `get_checkpoint()` and `Result.checkpoint` return; nothing is registered, so
`get_all_reported_checkpoints()` is `[]`. Exceptions propagate unwrapped. Unlike Ray, the
session is cleared when the function returns, so the utilities raise again outside the
function.
"""

from __future__ import annotations

import logging
from typing import Any, Callable

from reference.train._context import TrainContext
from reference.train._internal.session import Session, set_session

logger = logging.getLogger(__name__)


class LocalSession(Session):
    def __init__(self, context: TrainContext, datasets: dict | None = None):
        self.context = context
        self._datasets = datasets
        self.last_metrics: dict | None = None
        self.last_checkpoint = None

    def report(self, metrics, checkpoint, checkpoint_dir_name, upload_mode, delete_local,
               upload_fn, validation) -> None:
        self.last_metrics = metrics
        self.last_checkpoint = checkpoint
        logger.info("Reported metrics: %s", metrics)

    def get_checkpoint(self):
        return self.last_checkpoint

    def get_all_reported_checkpoints(self, consistency_mode, timeout_s) -> list:
        return []  # nothing is registered in local mode

    def get_dataset_shard(self, name):
        if not self._datasets or name not in self._datasets:  # Ray's message, then the fix
            raise AssertionError(f"Dataset shard {name} not found. Pass it to the trainer as "
                                 f"`datasets={{{name!r}: ...}}`.")
        return self._datasets[name]


def run_local(train_fn: Callable[[], Any], context: TrainContext, datasets: dict | None):
    from reference.train._result import Result

    datasets = {k: v() if callable(v) else v for k, v in (datasets or {}).items()}
    session = LocalSession(context, datasets)
    set_session(session)
    try:
        value = train_fn()
    finally:
        set_session(None)
    return Result(metrics=session.last_metrics, checkpoint=session.last_checkpoint, error=None,
                  path=None, return_value=value)
