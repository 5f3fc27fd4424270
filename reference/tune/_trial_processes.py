"""The Tune controller's trial processes (`TrialProcesses`, a part of `TuneController`):
each trial runs `trial_main` in a simcluster worker process of its own, started on a pool
thread and told to go once the loop has seen it start; ending a trial kills its process
(and with it what its trial started on the cluster), and the end of an experiment waits
until every one is gone. `_Dispatcher` routes a cluster endpoint's messages and exits to
the controller that started the worker.
"""

from __future__ import annotations

import logging
import os
import queue
import signal
import threading

from reference.train import Checkpoint
from reference.tune._session import TrialStart, trial_main
from reference.tune.experiment.trial import Trial

logger = logging.getLogger(__name__)

#: how long ending a trial waits for its process to be gone
EXIT_WAIT_S = 10.0


class _Dispatcher:
    """Routes a cluster endpoint's worker messages and exits to the controller that started
    that worker (one per endpoint: the endpoint's callbacks cannot be removed)."""

    _by_endpoint: dict[int, _Dispatcher] = {}
    _lock = threading.Lock()

    def __init__(self, cluster):
        self.cluster = cluster
        self.routes: dict[str, queue.Queue] = {}
        cluster.on_message(self._message)
        cluster.on_worker_exit(self._exit)

    @classmethod
    def of(cls, cluster) -> _Dispatcher:
        with cls._lock:
            found = cls._by_endpoint.get(id(cluster))
            if found is None or found.cluster is not cluster:
                found = cls._by_endpoint[id(cluster)] = cls(cluster)
            return found

    def _message(self, worker_id, obj) -> None:
        target = self.routes.get(worker_id)
        if target is not None:
            target.put(("message", worker_id, obj))

    def _exit(self, exit_info) -> None:
        target = self.routes.pop(exit_info.worker_id, None)
        if target is not None:
            target.put(("exit", exit_info.worker_id, exit_info))


class _Running:
    """A trial's live process and the placement it runs in."""

    def __init__(self, trial: Trial, handle, placement):
        self.trial, self.handle, self.placement = trial, handle, placement
        self.ended = False       # the trial told us how it ended (done / error)


class TrialProcesses:
    """The process half of `TuneController` (its state: cluster, events, running, ending,
    starting, dispatcher, _pool)."""

    def _launch(self, trial: Trial, placement) -> None:
        restore = trial.restore_from
        trial.restore_from = None
        iteration, time_total = 0, 0.0
        if restore is not None:
            metrics = self._checkpoint_metrics(restore)
            iteration = metrics.get("training_iteration", 0)
            time_total = metrics.get("time_total_s", 0.0)
        trial.iteration, trial.time_total_s = iteration, time_total
        start = TrialStart(
            fn=self.trainable, config=trial.config, trial_id=trial.trial_id,
            trial_name=getattr(trial, "custom_name", trial.name), trial_dir=trial.path,
            experiment_name=self.experiment_name, experiment_path=self.experiment_path,
            bundles=trial.bundles, restore_path=restore.path if restore else None,
            checkpoint_index=trial.checkpoint_index, iteration=iteration,
            time_total_s=time_total)
        token = object()
        self.starting[trial.trial_id] = token
        self._set_status(trial, Trial.RUNNING)
        self._call("on_trial_start", trial=trial)
        self._pool.submit(self._start_process, trial, placement, start, token)

    def _start_process(self, trial: Trial, placement, start: TrialStart, token) -> None:
        """On a pool thread (a start waits for the fork): start the trial's process and
        route its messages here; the loop then tells it to go."""
        try:
            handle = self.cluster.start_worker(
                placement.node_ids[0], trial_main, args=(start,), bundle=placement[0],
                env={"TUNE_ORIG_WORKING_DIR": os.getcwd()}, name=f"tune:{trial.name}",
                # fault plans select trial processes by these ("trial=*_00001")
                tags={"trial": trial.trial_id, "trial_name": trial.name})
        except Exception as exc:  # noqa: BLE001 - a start that failed is a trial failure
            self.events.put(("start_failed", None, (trial, placement, token, exc)))
            return
        self.dispatcher.routes[handle.id] = self.events
        self.events.put(("started", handle.id, (trial, placement, token, handle)))

    def _started(self, worker_id: str, trial: Trial, placement, token, handle) -> None:
        proc = _Running(trial, handle, placement)
        current = self.starting.get(trial.trial_id) is token
        if current:
            del self.starting[trial.trial_id]
        if not current or trial.status != Trial.RUNNING or self._stop_all:
            proc.ended = True  # stopped while starting: it never runs the function
            self.ending[worker_id] = proc
            self.cluster.kill_worker(worker_id, signal.SIGKILL)
        else:
            self.running[worker_id] = proc
            self.cluster.send(worker_id, "GO")  # its process waits for this first
        early = self._early_exits.pop(worker_id, None)
        if early is not None:
            self._handle("exit", worker_id, early)

    def _checkpoint_metrics(self, checkpoint: Checkpoint) -> dict:
        for trial in self.trials:
            for ckpt, metrics in trial.checkpoints:
                if ckpt.path == checkpoint.path:
                    return metrics
        return {}

    def _ack_and_end(self, worker_id: str) -> None:
        try:
            self.cluster.send(worker_id, "ACK")
        except Exception:  # noqa: BLE001 - it may be gone already
            pass

    def _end_process(self, trial: Trial) -> None:
        """End the trial's process (SIGKILL unless it ended itself). Its placement is released
        when its exit arrives, and by then the cluster has killed the Train workers the trial
        started and released their resources (they belong to its process), so the next
        trial's start finds them free."""
        self.starting.pop(trial.trial_id, None)  # a start in flight is ended when it lands
        for worker_id, proc in list(self.running.items()):
            if proc.trial is trial:
                del self.running[worker_id]
                self.ending[worker_id] = proc
                if not proc.ended:
                    self.cluster.kill_worker(worker_id, signal.SIGKILL)

    def _shutdown(self) -> None:
        """End every process of the experiment and wait until each is gone (with what its
        trial started on the cluster)."""
        self._pool.shutdown(wait=True)
        while True:  # starts that landed after the loop ended
            try:
                kind, worker_id, payload = self.events.get_nowait()
            except queue.Empty:
                break
            if kind == "started":
                self.starting.clear()
                self._started(worker_id, *payload)
            elif kind == "start_failed":
                payload[1].release()
        for proc in list(self.running.values()):
            self._end_process(proc.trial)
        for worker_id, proc in list(self.ending.items()):
            try:
                proc.handle.wait(EXIT_WAIT_S)
            except TimeoutError:
                logger.warning("The process of trial %s did not exit within %s s.",
                               proc.trial, EXIT_WAIT_S)
            self.dispatcher.routes.pop(worker_id, None)
            proc.placement.release()
        self.ending.clear()
        self._save()
