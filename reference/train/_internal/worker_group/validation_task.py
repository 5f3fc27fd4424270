"""Validation tasks on simcluster: one worker process per validation, holding a bundle of
the resources `ValidationConfig(ray_remote_kwargs=...)` asks for (a Ray task's defaults:
1 CPU, no GPU), so that a validation never runs inside a training worker and waits, as a
Ray task does, while those resources are in use.

The controller must not block on the cluster: `start` tries the placement once and answers
None when the resources are busy (the caller tries again at its next poll).
"""

from __future__ import annotations

import logging
import signal
import threading

logger = logging.getLogger(__name__)

#: the ray.remote options a validation task honours here (the rest are Ray's scheduling)
SUPPORTED_REMOTE_KWARGS = ("num_cpus", "num_gpus", "resources")
#: how long a killed validation process gets to be reaped before the kill is logged
KILL_WAIT_S = 10.0


def task_bundle(ray_remote_kwargs: dict) -> dict:
    """The resource bundle of a validation task, from Ray's `.options(...)` keywords."""
    if not isinstance(ray_remote_kwargs, dict):
        raise TypeError(f"ValidationConfig(ray_remote_kwargs={ray_remote_kwargs!r}): expected "
                        "a dict such as {'num_cpus': 1, 'num_gpus': 0, 'resources': {}}.")
    other = sorted(set(ray_remote_kwargs) - set(SUPPORTED_REMOTE_KWARGS))
    if other:
        raise ValueError(
            f"ValidationConfig(ray_remote_kwargs={ray_remote_kwargs!r}): the reference runs "
            f"validation tasks with {list(SUPPORTED_REMOTE_KWARGS)} only, not {other}; drop "
            "those keys.")
    resources = ray_remote_kwargs.get("resources") or {}
    if not isinstance(resources, dict):
        raise TypeError(f"ValidationConfig(ray_remote_kwargs={{'resources': {resources!r}}}): "
                        "expected a dict of resource name -> amount.")
    asked = {"num_cpus": ray_remote_kwargs.get("num_cpus", 1),
             "num_gpus": ray_remote_kwargs.get("num_gpus", 0),
             **{f"resources[{k!r}]": v for k, v in resources.items()}}
    for name, amount in asked.items():
        if isinstance(amount, bool) or not isinstance(amount, (int, float)) or amount < 0:
            raise ValueError(f"ValidationConfig(ray_remote_kwargs=...): {name}={amount!r} "
                             "must be a non-negative number.")
    bundle = {"CPU": asked["num_cpus"], "GPU": asked["num_gpus"], **resources}
    return {name: float(amount) for name, amount in bundle.items() if amount > 0}


class _Task:
    def __init__(self, worker, placement):
        self.worker, self.placement = worker, placement


class SimclusterValidationLauncher:
    def __init__(self, cluster, ray_remote_kwargs: dict):
        self.cluster = cluster
        self.bundle = task_bundle(ray_remote_kwargs)

    def start(self, fn, args: tuple, name: str):
        from simcluster import PlacementTimeout

        placement = None
        if self.bundle:
            try:
                placement = self.cluster.place([self.bundle], "PACK", timeout_s=0)
            except PlacementTimeout:
                return None  # in use now: the next poll tries again
            node, bundle = None, placement[0]
        else:  # a zero-resource task runs on any live node
            node = next(n.id for n in self.cluster.nodes if n.state == "up")
            bundle = None
        try:
            worker = self.cluster.start_worker(node, fn, args=args, bundle=bundle, name=name)
        except BaseException:
            if placement is not None:
                placement.release()
            raise
        return _Task(worker, placement)

    def outcome(self, task: _Task):
        """None while the process runs; else (True, its dict) or (False, the error text)."""
        exit = task.worker.exit
        if exit is None:
            return None
        self._release(task)
        if exit.ok:
            return True, exit.result
        return False, exit.traceback or f"{exit.error!r} (reason {exit.reason!r})"

    def kill(self, task: _Task) -> None:
        task.worker.kill(signal.SIGKILL)
        try:
            task.worker.wait(KILL_WAIT_S)
        except TimeoutError:
            logger.error("The validation process %s did not exit %s s after SIGKILL.",
                         task.worker, KILL_WAIT_S)
        self._release(task)

    @staticmethod
    def wait(tasks: list, timeout: float | None) -> None:
        # MAX_IN_FLIGHT_VALIDATIONS is 1: waiting on the first one is waiting on any. With
        # none started (waiting for resources) the caller's poll deadline bounds the wait.
        if not tasks:
            threading.Event().wait(timeout)
            return
        try:
            tasks[0].worker.wait(timeout)
        except TimeoutError:
            pass

    @staticmethod
    def _release(task: _Task) -> None:
        if task.placement is not None and not task.placement.released:
            task.placement.release()
