"""Stand-ins for the scheduler comparison tests (test_hyperband.py, test_pbt.py): a trial
as the reference's controller shows it to schedulers, and Ray's TuneController as
schedulers see it, used on both sides of a comparison."""

from __future__ import annotations


class Trial:
    PENDING, RUNNING, PAUSED = "PENDING", "RUNNING", "PAUSED"
    TERMINATED, ERROR = "TERMINATED", "ERROR"

    def __init__(self, trial_id: str, config: dict | None = None, experiment_tag: str = ""):
        self.trial_id, self.config, self.experiment_tag = trial_id, dict(config or {}), \
            experiment_tag
        self.status, self.last_result = Trial.PENDING, {}
        self.checkpoint = self.restore_from = None
        self.experiment_path = ""

    def set_config(self, config: dict) -> None:
        self.config = config

    def set_experiment_tag(self, tag: str) -> None:
        self.experiment_tag = tag

    def is_finished(self) -> bool:
        return self.status in (Trial.TERMINATED, Trial.ERROR)

    def __str__(self) -> str:
        return self.trial_id


class Controller:
    """`stop_trial` calls back `on_trial_remove` (PENDING, PAUSED) or `on_trial_complete`
    (RUNNING), then marks the trial TERMINATED; `pause_trial` pauses a running trial;
    `stopped` and `pauses` record what the scheduler asked for."""

    search_alg = None

    def __init__(self, scheduler):
        self.scheduler, self.trials, self.stopped, self.pauses = scheduler, [], [], []

    def get_trials(self):
        return list(self.trials)

    def get_live_trials(self):
        return [t for t in self.trials if not t.is_finished()]

    def stop_trial(self, trial) -> None:
        if trial.is_finished():
            return
        if trial.status in ("PENDING", "PAUSED"):
            self.scheduler.on_trial_remove(self, trial)
        else:
            self.scheduler.on_trial_complete(self, trial, trial.last_result)
        self.stopped.append(self.trials.index(trial))
        trial.status = "TERMINATED"

    def pause_trial(self, trial, should_checkpoint: bool = True) -> None:
        self.pauses.append((self.trials.index(trial), should_checkpoint))
        if trial.status == "RUNNING":
            trial.status = "PAUSED"

    def unpause_trial(self, trial) -> None:
        if trial.status == "PAUSED":
            trial.status = "PENDING"
