"""The scheduler interface: the Tuner calls `on_trial_add`, then `on_trial_result` for each
report (answering CONTINUE, PAUSE or STOP), and `on_trial_complete` or `on_trial_remove`.
Trials are any objects with a `trial_id`; the first argument is the tuner's controller, as
in Ray's signatures (the reference's schedulers do not use it)."""

from __future__ import annotations


class TrialScheduler:
    CONTINUE = "CONTINUE"
    PAUSE = "PAUSE"
    STOP = "STOP"
    NOOP = "NOOP"

    _metric = None
    _mode = None

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


class FIFOScheduler(TrialScheduler):
    """Runs every trial to its end, in the order they were added."""
