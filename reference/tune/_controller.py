"""The Tune controller: runs an experiment's trials on the cluster, in the driver.

One loop, in the thread that called `Tuner.fit()`:

1. Start trials while a slot is free: the scheduler chooses a PENDING or PAUSED trial (or
   none, and then the search algorithm gives the next config, which becomes a new trial).
   A trial gets its resources as a placement (default 1 CPU) and runs `trial_main` in its
   own simcluster worker process; `max_concurrent_trials` bounds the running ones.
2. Wait for an event of a trial process: a result (answered at once: CONTINUE, or the
   process is ended for STOP and PAUSE), its end, its error, or its exit.
3. Persist the experiment state (for `Tuner.restore`) and show progress.

A trial process is a cluster client of its own when its function runs a Train fit, so when
the Tuner ends a trial's process (a scheduler's STOP, a PAUSE, the end of the experiment),
the cluster kills that trial's Train workers and releases their resources at once.
A failed trial (its function raised or its process died) is restarted from its latest
checkpoint while `FailureConfig.max_failures` allows; otherwise it ends in ERROR and the
others go on (unless `fail_fast`).
"""

from __future__ import annotations

import logging
import os
import queue
import secrets
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Optional

from reference.exceptions import RayActorError
from reference.train import Checkpoint
from reference.tune._experiment_files import REFRESH_S, ExperimentFiles, _searched, _tag
from reference.tune._trial_processes import TrialProcesses, _Dispatcher, _Running
from reference.tune.experiment.trial import Trial
from reference.tune.logger.defaults import default_callbacks
from reference.tune.stopper import as_stopper, flatten
from reference.tune.trainable import normalize_resources

logger = logging.getLogger(__name__)


class TuneController(TrialProcesses, ExperimentFiles):
    def __init__(self, *, trainable, trainable_name: str, param_space: dict, tune_config,
                 run_config, experiment_path: str, experiment_name: str, search_alg,
                 scheduler, trials: Optional[list[Trial]] = None, reporter=None,
                 experiment_id: Optional[str] = None):
        self.trainable, self.trainable_name = trainable, trainable_name
        self.param_space = param_space
        self.tune_config, self.run_config = tune_config, run_config
        self.experiment_path, self.experiment_name = experiment_path, experiment_name
        self.search_alg, self.scheduler = search_alg, scheduler
        self.trials: list[Trial] = list(trials or [])
        self.experiment_id = experiment_id or secrets.token_hex(3)[:5]
        self.stopper = as_stopper(run_config.stop)
        self.failure_config = run_config.failure_config
        self.checkpoint_config = run_config.checkpoint_config
        # the user's, then the per-trial file loggers Ray adds (progress.csv, result.json,
        # params.json / .pkl, TensorBoard events) unless the user passed their own
        self.callbacks = default_callbacks(list(run_config.callbacks or []))
        self.reporter = reporter
        self.events: queue.Queue = queue.Queue()
        self.running: dict[str, _Running] = {}      # worker id -> live process
        self.starting: dict[str, object] = {}       # trial id -> token of a start in flight
        self.ending: dict[str, _Running] = {}       # worker id -> ended, exit not seen yet
        self._early_exits: dict[str, Any] = {}
        self._pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="tune-start")
        self.iteration = 0
        self.fail_fast_error: Optional[BaseException] = None
        self._stop_all = False
        self._saved_at = 0.0
        self._search_finished = False
        self._idle_reason = "full"
        self.max_pending_trials = 1  # set in run(), from the cluster's CPUs

    # -- what schedulers and searchers may call -----------------------------------------
    def get_trials(self) -> list[Trial]:
        return list(self.trials)

    def get_live_trials(self) -> list[Trial]:
        return [t for t in self.trials if not t.is_finished()]

    def stop_trial(self, trial: Trial) -> None:
        """End a trial as TERMINATED (a scheduler's or stopper's decision)."""
        if trial.is_finished():
            return
        if trial.status == Trial.RUNNING:
            flat = flatten(trial.last_result)
            self.scheduler.on_trial_complete(self, trial, flat)
            self.search_alg.on_trial_complete(trial.trial_id, result=flat)
        else:
            self.scheduler.on_trial_remove(self, trial)
            self.search_alg.on_trial_complete(trial.trial_id)
        self._end_process(trial)
        self._set_status(trial, Trial.TERMINATED)
        if trial.results:
            trial.last_result = {**trial.last_result, "done": True}
        self._call("on_trial_complete", trial=trial)

    def pause_trial(self, trial: Trial, should_checkpoint: bool = True) -> None:
        """End a running trial's process; it resumes later from its latest checkpoint
        (a function trainable's state is what it reported)."""
        if trial.status not in (Trial.RUNNING, Trial.PENDING):
            return
        self._end_process(trial)
        if trial.restore_from is None:
            trial.restore_from = trial.checkpoint
        self._set_status(trial, Trial.PAUSED)

    def unpause_trial(self, trial: Trial) -> None:
        if trial.status == Trial.PAUSED:
            self._set_status(trial, Trial.PENDING)

    # -- the loop ---------------------------------------------------------------------------
    def run(self, cluster) -> list[Trial]:
        self.cluster = cluster
        self.dispatcher = _Dispatcher.of(cluster)
        self.max_pending_trials = max_pending_trials(self.search_alg, cluster)
        deadline = (None if not self.tune_config.time_budget_s
                    else time.monotonic() + self.tune_config.time_budget_s)
        for cb in self.callbacks:
            cb.setup(stop=self.run_config.stop, num_samples=self.tune_config.num_samples)
        try:
            while True:
                self._start_trials()
                if self._done():
                    break
                timeout = REFRESH_S
                if deadline is not None:
                    timeout = min(timeout, max(0.0, deadline - time.monotonic()))
                self._handle_events(timeout)
                if deadline is not None and time.monotonic() >= deadline:
                    logger.info("Reached the time budget of %ss: stopping every trial.",
                                self.tune_config.time_budget_s)
                    self._stop_everything()
                self.iteration += 1
                self._save(throttle=True)
                if self.reporter:
                    self.reporter.refresh(self.trials)
        finally:
            self._shutdown()
        self._call("on_experiment_end")
        return self.trials

    def _done(self) -> bool:
        if self._stop_all:
            return not (self.running or self.starting)
        if self.running or self.starting:
            return False
        waiting = [t for t in self.trials if t.status in (Trial.PENDING, Trial.PAUSED)]
        if waiting:
            if self._idle_reason == "no-candidate":
                from reference.tune.error import TuneError

                raise TuneError(
                    f"There are paused or pending trials ({', '.join(map(str, waiting))}) but "
                    "the scheduler chose none to run and no trial is running.")
            return False
        return self._search_finished or self.search_alg.is_finished()

    def _start_trials(self) -> None:
        from simcluster import PlacementTimeout, Unschedulable

        limit = self.tune_config.max_concurrent_trials or None
        self._idle_reason = "full"
        self.max_pending_trials = 1  # set in run(), from the cluster's CPUs
        while not self._stop_all:
            if limit is not None and len(self.running) + len(self.starting) >= limit:
                return
            self._add_pending_trials()
            trial = self.scheduler.choose_trial_to_run(self)
            if trial is None:
                self._idle_reason = "no-candidate"
                return
            try:
                placement = self.cluster.place(trial.bundles, "PACK", timeout_s=0)
            except PlacementTimeout:
                return  # wait for a trial (or a Train run inside one) to free resources
            except (Unschedulable, ValueError) as exc:
                self._fail_for_good(trial, RuntimeError(
                    f"Trial {trial} requests resources {trial.bundles} that the nodes of the "
                    f"cluster can never hold: {exc}. Use tune.with_resources(...) with less."))
                continue
            self._launch(trial, placement)

    def _add_pending_trials(self) -> None:
        """Ray's rule: ask the search algorithm for trials while fewer than
        `max_pending_trials` wait, so a scheduler sees the trials it will judge together
        (HyperBand's brackets) before they run."""
        while sum(t.status == Trial.PENDING for t in self.trials) < self.max_pending_trials:
            if not self._add_trial():
                return

    def _add_trial(self) -> bool:
        if self._search_finished or self.search_alg.is_finished():
            self._search_finished = True
            return False
        index = len(self.trials)
        trial_id = f"{self.experiment_id}_{index:05d}"
        config = self.search_alg.next_config(trial_id)
        if config is None:
            self._search_finished = self.search_alg.is_finished()
            return False
        trial = Trial(self.trainable_name, trial_id, config,
                      experiment_tag=f"{index}" + (f"_{tag}" if (tag := _tag(
                          self.param_space, config)) else ""),
                      bundles=self._bundles(config), experiment_path=self.experiment_path)
        creator = self.tune_config.trial_dirname_creator
        stamp = time.strftime("%Y-%m-%d_%H-%M-%S")
        trial.dir_name = (creator(trial) if creator
                          else f"{trial.name}_{trial.experiment_tag}"[:120] + f"_{stamp}")
        name_creator = self.tune_config.trial_name_creator
        if name_creator is not None:
            trial.custom_name = str(name_creator(trial))
        trial.evaluated_params = {"/".join(map(str, path)): value
                                  for path, value in _searched(self.param_space, config)}
        self.trials.append(trial)
        self.scheduler.on_trial_add(self, trial)
        return True

    def _bundles(self, config: dict) -> list[dict]:
        wanted = getattr(self.trainable, "_tune_resources", None)
        if callable(wanted):
            wanted = wanted(config)
        return normalize_resources(wanted) if wanted is not None else [{"CPU": 1.0}]

    # -- events -----------------------------------------------------------------------------
    def _handle_events(self, timeout: float) -> None:
        try:
            event = self.events.get(timeout=timeout)
        except queue.Empty:
            return
        while True:
            self._handle(*event)
            try:
                event = self.events.get_nowait()
            except queue.Empty:
                return

    def _handle(self, kind: str, worker_id: str, payload) -> None:
        if kind == "started":
            self._started(worker_id, *payload)
            return
        if kind == "start_failed":
            trial, placement, token, exc = payload
            placement.release()
            if self.starting.get(trial.trial_id) is token:
                del self.starting[trial.trial_id]
                if trial.status == Trial.RUNNING:
                    self._failed(trial, RayActorError(
                        f"Starting the process of trial {trial} failed: {exc}"), None)
            return
        if kind == "exit" and worker_id in self.ending:
            self.ending.pop(worker_id).placement.release()
            return
        proc = self.running.get(worker_id)
        if proc is None:
            if kind == "exit":  # before the loop heard that it started
                self._early_exits[worker_id] = payload
            return  # else: a process this controller already ended
        trial = proc.trial
        if kind == "exit":
            del self.running[worker_id]
            proc.placement.release()
            if not proc.ended:
                why = (f"exit code {payload.code}" if payload.code is not None
                       else f"signal {payload.signal}")
                self._failed(trial, RayActorError(
                    f"The process of trial {trial} died unexpectedly ({why}, "
                    f"{payload.reason})."), None)
            return
        tag = payload[0]
        if tag == "result":
            self._on_result(proc, worker_id, payload[1], payload[2])
        elif tag == "done":
            proc.ended = True
            self._ack_and_end(worker_id)
            if trial.status == Trial.RUNNING:
                self.stop_trial(trial)
        elif tag == "error":
            proc.ended = True
            error = payload[1]
            if error is not None and hasattr(error, "as_instanceof_cause"):
                error = error.as_instanceof_cause()
            self._ack_and_end(worker_id)
            self._failed(trial, error or RuntimeError(payload[2]), payload[2])

    def _on_result(self, proc: _Running, worker_id: str, result: dict,
                   dir_name: Optional[str]) -> None:
        trial = proc.trial
        trial.results.append(result)
        trial.last_result = result
        trial.iteration = result["training_iteration"]
        trial.time_total_s = result["time_total_s"]
        if dir_name is not None:
            checkpoint = Checkpoint(os.path.join(trial.path, dir_name))
            trial.checkpoints.append((checkpoint, result))
            trial.checkpoint_index = int(dir_name.rsplit("_", 1)[1]) + 1
            self._apply_retention(trial)
            self._call("on_checkpoint", trial=trial, checkpoint=checkpoint)
            self._call("on_trial_save", trial=trial)
        flat = flatten(result)
        stop = stop_all = False
        if self.stopper is not None:  # the trial's verdict first: stop_all may count it
            stop = self.stopper(trial.trial_id, result)
            stop_all = self.stopper.stop_all()
        if stop or stop_all:
            decision = "STOP"
            self._stop_all = self._stop_all or stop_all
        else:
            decision = self.scheduler.on_trial_result(self, trial, flat)
        if decision != "STOP":
            self.search_alg.on_trial_result(trial.trial_id, flat)
        self._call("on_trial_result", trial=trial, result=result)
        if self.reporter:
            self.reporter.on_result(trial, result)
        if decision == "CONTINUE":
            self.cluster.send(worker_id, "CONTINUE")
        elif decision == "STOP":
            self.stop_trial(trial)
        elif decision == "PAUSE":
            self.pause_trial(trial)
        elif decision != "NOOP":
            raise ValueError(f"Invalid decision: {decision}")
        elif trial.status == Trial.RUNNING:
            self.cluster.send(worker_id, "CONTINUE")
        if self._stop_all:
            self._stop_everything()

    def _failed(self, trial: Trial, error: BaseException, text: Optional[str]) -> None:
        self._end_process(trial)
        trial.num_failures += 1
        max_failures = self.failure_config.max_failures
        if not self._stop_all and (max_failures < 0 or trial.num_failures <= max_failures):
            logger.info("Trial %s failed (%s); restarting it (failure %d of %s allowed)%s.",
                        trial, error, trial.num_failures,
                        "unlimited" if max_failures < 0 else max_failures,
                        " from its latest checkpoint" if trial.checkpoint else "")
            trial.restore_from = trial.checkpoint
            self._set_status(trial, Trial.PENDING)
            self._call("on_trial_recover", trial=trial)
            return
        self._fail_for_good(trial, error, text)

    def _fail_for_good(self, trial: Trial, error: BaseException,
                       text: Optional[str] = None) -> None:
        self.scheduler.on_trial_error(self, trial)
        self.search_alg.on_trial_complete(trial.trial_id, error=True)
        trial.error = error
        trial.error_text = text or f"{type(error).__name__}: {error}"
        self._write_error(trial)
        self._set_status(trial, Trial.ERROR)
        self._call("on_trial_error", trial=trial)
        if self.failure_config.fail_fast:
            self.fail_fast_error = error
            self._stop_everything()

    # -- processes --------------------------------------------------------------------------
    def _stop_everything(self) -> None:
        self._stop_all = True
        for trial in self.trials:
            if trial.status in (Trial.RUNNING, Trial.PENDING, Trial.PAUSED) and \
                    not self.fail_fast_error:
                self.stop_trial(trial)
            elif trial.status == Trial.RUNNING:
                self._end_process(trial)

    def _set_status(self, trial: Trial, status: str) -> None:
        trial.status = status
        if self.reporter:
            self.reporter.on_status(trial)

    def _call(self, hook: str, **kwargs) -> None:
        for cb in self.callbacks:
            getattr(cb, hook)(iteration=self.iteration, trials=self.trials, **kwargs)


def max_pending_trials(search_alg, cluster) -> int:
    """How many trials may wait to start, as Ray decides it: TUNE_MAX_PENDING_TRIALS_PG if
    set; for the basic variant generator max(200, 1.1 x the cluster's CPUs); for a searcher
    its ConcurrencyLimiter's limit, else 1 (so it suggests from the latest results)."""
    from reference.tune.search import BasicVariantGenerator

    configured = os.environ.get("TUNE_MAX_PENDING_TRIALS_PG", "auto")
    if configured != "auto":
        return int(configured)
    if not isinstance(search_alg, BasicVariantGenerator):
        searcher = getattr(search_alg, "searcher", None)
        while searcher is not None:
            if hasattr(searcher, "max_concurrent") and hasattr(searcher, "searcher"):
                return searcher.max_concurrent
            searcher = getattr(searcher, "searcher", None)
        return 1
    return max(200, int(cluster.total_resources().get("CPU", 1.0) * 1.1))
