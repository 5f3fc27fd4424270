"""XGBoostConfig and its backend: a tracker in the driver, the workers joined through
``xgboost.collective``.

- `on_training_start` (driver): starts an ``xgboost.RabitTracker`` for the group's size on
  the address the workers reach the driver at, sorted by task id, and waits for it in a
  daemon thread; every worker gets the tracker's arguments plus a `dmlc_task_id` of
  ``[xgboost.ray-rank=<world rank, 8 digits>]:<worker pid>``, so xgboost's ranks follow the
  Train world ranks (the tracker sorts by it).
- `train_func_context`: the training function runs inside
  ``xgboost.collective.CommunicatorContext(**those arguments)`` on the workers of a
  distributed run (not in local mode).
- `on_shutdown`: waits up to 5 s for the tracker to finish, as Ray does, and logs if it
  did not. When the group failed (some rank did not return from its training function:
  the reference answers a call to such a rank at once with RayActorError) the tracker waits
  for a worker that is gone, so it is left (a daemon thread) without that wait: recovery
  is not held up 5 s, which Ray's backend spends there.

Several fits in one driver may run at once (threads), so the backend, a singleton as every
Backend, keeps one tracker per worker group.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import threading
from typing import Any

from reference.train.backend import Backend, BackendConfig

logger = logging.getLogger(__name__)

#: the collective arguments of this worker process (set by the backend)
_xgboost_args: dict = {}
_xgboost_args_lock = threading.Lock()


def _set_xgboost_args(args: dict) -> None:
    global _xgboost_args
    with _xgboost_args_lock:
        _xgboost_args = args


def _get_xgboost_args() -> dict:
    with _xgboost_args_lock:
        return _xgboost_args


def set_communicator_args(args: dict) -> None:
    """On a worker: the tracker's arguments with this rank's task id."""
    from reference.train import get_context

    args = dict(args, dmlc_task_id=f"[xgboost.ray-rank={get_context().get_world_rank():08}]:"
                                   f"{os.getpid()}")
    _set_xgboost_args(args)


def _returned() -> bool:
    return True


@contextlib.contextmanager
def _collective_context():
    from reference.train._internal.local_mode import LocalSession
    from reference.train._internal.session import get_session

    if isinstance(get_session("XGBoostConfig.train_func_context"), LocalSession):
        yield
        return
    from xgboost.collective import CommunicatorContext

    with CommunicatorContext(**_get_xgboost_args()):
        yield


@dataclasses.dataclass
class XGBoostConfig(BackendConfig):
    """How distributed xgboost communicates: only the "rabit" communicator (xgboost's
    tracker-based collective) exists; another value is a NotImplementedError."""

    xgboost_communicator: str = "rabit"

    @property
    def train_func_context(self):
        return _collective_context

    @property
    def backend_cls(self):
        if self.xgboost_communicator == "rabit":
            return XGBoostBackend
        raise NotImplementedError(f"Unsupported backend: {self.xgboost_communicator}")

    def to_dict(self) -> dict[str, Any]:
        return {"xgboost_communicator": self.xgboost_communicator}


class XGBoostBackend(Backend):
    preload_modules = ("xgboost", "reference.train.xgboost")

    def __init__(self):
        self._waits: dict[int, threading.Thread] = {}
        self._lock = threading.Lock()

    def on_training_start(self, worker_group, backend_config: XGBoostConfig) -> None:
        from xgboost import RabitTracker

        from reference.util import get_node_ip_address

        n = len(worker_group)
        tracker = RabitTracker(n_workers=n, host_ip=get_node_ip_address(), sortby="task")
        tracker.start()
        wait = threading.Thread(target=tracker.wait_for, daemon=True,
                                name="xgboost-tracker")
        wait.start()
        with self._lock:
            self._waits[id(worker_group)] = wait
        args = {"n_workers": n, **tracker.worker_args()}
        logger.debug("RabitTracker started: %s", args)
        worker_group.execute(set_communicator_args, args)

    def on_shutdown(self, worker_group, backend_config: XGBoostConfig) -> None:
        with self._lock:
            wait = self._waits.pop(id(worker_group), None)
        if wait is None:
            return
        import reference
        from reference.exceptions import GetTimeoutError, RayActorError, RayTaskError

        try:
            reference.get(worker_group.execute_async(_returned), timeout=5)
        except (RayActorError, RayTaskError, GetTimeoutError):
            logger.debug("The group failed: its RabitTracker is left waiting (daemon thread).")
            return
        timeout = 5
        wait.join(timeout=timeout)
        if wait.is_alive():
            logger.warning("During shutdown, the RabitTracker thread failed to join within "
                           "%s seconds. The workers are stopped all the same.", timeout)
