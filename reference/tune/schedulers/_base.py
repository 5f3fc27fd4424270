"""The scheduler interface: the Tuner calls `on_trial_add`, then `on_trial_result` for each
report (answering CONTINUE, PAUSE, STOP, or NOOP when the scheduler already acted on the
trial itself), and `on_trial_complete`, `on_trial_error` or `on_trial_remove`; whenever a
slot is free it asks `choose_trial_to_run` for a PENDING or PAUSED trial (or None).

Trials have `trial_id`, `status` ("PENDING", "RUNNING", "PAUSED", "TERMINATED", "ERROR"),
`config`, `last_result` and `checkpoint`; the first argument of every method is the Tuner's
controller, as in Ray's signatures: `get_trials()` (in the order added), `get_live_trials()`,
`stop_trial(trial)`, `pause_trial(trial, should_checkpoint=True)`. Its `stop_trial` calls
back `on_trial_remove` for a PENDING or PAUSED trial and `on_trial_complete` for a RUNNING
one, as Ray's does."""

from __future__ import annotations


class TrialScheduler:
    CONTINUE = "CONTINUE"
    PAUSE = "PAUSE"
    STOP = "STOP"
    NOOP = "NOOP"

    _metric = None
    _mode = None

    @property
    def metric(self) -> str | None:
        return self._metric

    def set_search_properties(self, metric: str | None, mode: str | None, **spec) -> bool:
        """Take the TuneConfig's metric and mode unless the scheduler has its own; False
        when both set one (Ray's rule: the Tuner then raises)."""
        if (self._metric and metric) or (self._mode and mode):
            return False
        if metric:
            self._metric = metric
        if mode:
            self._mode = mode
        return True

    def on_trial_add(self, tune_controller, trial) -> None:
        pass

    def on_trial_result(self, tune_controller, trial, result: dict) -> str:
        return self.CONTINUE

    def on_trial_complete(self, tune_controller, trial, result: dict) -> None:
        pass

    def on_trial_remove(self, tune_controller, trial) -> None:
        pass

    def on_trial_error(self, tune_controller, trial) -> None:
        pass

    def choose_trial_to_run(self, tune_controller):
        """Ray's FIFO choice: the first PENDING trial in the order added, else the first
        PAUSED one, else None."""
        trials = tune_controller.get_trials()
        for status in ("PENDING", "PAUSED"):
            for trial in trials:
                if trial.status == status:
                    return trial
        return None

    def debug_string(self) -> str:
        return f"Using {type(self).__name__}."


DEFAULT_METRIC = "_metric"


class MetricScheduler(TrialScheduler):
    """A scheduler that compares a metric: a mode without a metric means Ray's anonymous
    metric, and a trial cannot be added before both are known."""

    def set_search_properties(self, metric, mode, **spec) -> bool:
        if not super().set_search_properties(metric, mode, **spec):
            return False
        if self._metric is None and self._mode:
            self._metric = DEFAULT_METRIC
        return True

    def on_trial_add(self, tune_controller, trial) -> None:
        if not self._metric or self._mode not in ("min", "max"):
            raise ValueError(
                f"{type(self).__name__} has been instantiated without a valid `metric` "
                f"({self._metric}) or `mode` ({self._mode}) parameter. Either pass these "
                "parameters when instantiating the scheduler, or pass them as parameters to "
                "`tune.TuneConfig()`")

    @property
    def _sign(self) -> float | None:
        """+1 for mode "max", -1 for "min": scores are compared as sign * metric."""
        return {"max": 1.0, "min": -1.0}.get(self._mode)


class FIFOScheduler(TrialScheduler):
    """Runs every trial to its end, in the order they were added."""

    def debug_string(self) -> str:
        return "Using FIFO scheduling algorithm."
