"""The per-process training session that `report`, `get_context`, ... talk to.

Exactly one session is active in a process that runs a training function: a
`LocalSession` in the driver for local mode, a worker session (see `worker_group`) in a
worker process. Outside of one, every training-function utility raises RuntimeError.
"""

from __future__ import annotations

import abc
import os
import threading
from typing import Any

_lock = threading.Lock()
_current: Session | None = None
#: set in a process that runs a Tune trial's function (by reference.tune, to the trial id)
TUNE_TRIAL_ENV = "TRAINSPEC_TUNE_TRIAL_ID"

#: the utilities that name the Tune equivalent when called from a Tune trial's function
TUNE_REPLACED = ("report", "get_context", "get_checkpoint", "get_preemption_info")


class Session(abc.ABC):
    context: Any
    #: a worker of a run (not local mode): what Ray's distributed-only behaviour keys on
    distributed: bool = False

    @abc.abstractmethod
    def report(self, metrics: dict, checkpoint, checkpoint_dir_name: str | None,
               upload_mode, delete_local: bool | None, upload_fn, validation) -> None: ...

    @abc.abstractmethod
    def get_checkpoint(self): ...

    def get_dataset_shard(self, name: str | None):
        raise KeyError(f"Dataset shard for {name!r} not found: pass the dataset to the trainer "
                       "as `datasets={name: dataset}`.")

    @abc.abstractmethod
    def get_all_reported_checkpoints(self, consistency_mode, timeout_s) -> list:
        """`ReportedCheckpoint`s of the checkpoints the run holds, worst to best."""

    def collective(self, kind: str, data: Any) -> Any:
        """One collective over all ranks: "barrier" (None), "broadcast" (rank 0's `data`)
        or "preemption" (a PreemptionInfo or None). This default is a session of one rank
        that nothing preempts (local mode): a barrier passes, a broadcast returns `data`."""
        return data if kind == "broadcast" else None


def set_session(session: Session | None) -> None:
    global _current
    with _lock:
        _current = session


def get_session(fn_name: str) -> Session:
    with _lock:
        session = _current
    if session is None and fn_name in TUNE_REPLACED and os.environ.get(TUNE_TRIAL_ENV):
        raise DeprecationWarning(
            f"`train.{fn_name}` is deprecated when running in a function passed to Tune. "
            f"Please use the equivalent `tune` API instead (`reference.tune.{fn_name}`).")
    if session is None:
        raise RuntimeError(  # Ray's message, then the fix
            f"`{fn_name}` cannot be used outside of a Ray Train training function. You are "
            "calling this API from the driver or another non-training process. These "
            "utilities are only available within a function launched by `trainer.fit()`. "
            "Call it inside the function passed as `train_loop_per_worker`."
        )
    return session
