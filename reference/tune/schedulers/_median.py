"""MedianStoppingRule, as Ray's: stop a trial whose best result so far is worse than the
median of the other trials' running means up to the same time.

At a result at time t (time_attr, default `time_total_s`) past `grace_period`, the trials
that have reached t give their running means (the mean of their results in
[grace_period, t]; NaN and infinite means are left out); with at least
`min_samples_required` of them, a trial whose best result is strictly worse than their
median is stopped (`hard_stop`) or paused. With too few samples it is paused to yield to
pending or paused trials, at most once per `min_time_slice`, else it continues.
"""

from __future__ import annotations

import collections

import numpy as np

from reference.tune.schedulers._base import MetricScheduler

WAITING = ("PENDING", "PAUSED")


class MedianStoppingRule(MetricScheduler):
    def __init__(self, time_attr: str = "time_total_s", metric: str | None = None,
                 mode: str | None = None, grace_period: float = 60.0,
                 min_samples_required: int = 3, min_time_slice: int = 0,
                 hard_stop: bool = True):
        if mode not in (None, "min", "max"):
            raise AssertionError(f"`mode` must be 'min' or 'max'. (MedianStoppingRule(mode="
                                 f"{mode!r}))")
        self._time_attr, self._metric, self._mode = time_attr, metric, mode
        self._grace_period, self._min_samples = grace_period, min_samples_required
        self._min_time_slice, self._hard_stop = min_time_slice, hard_stop
        self._stopped: set = set()
        self._last_pause: dict = collections.defaultdict(lambda: float("-inf"))
        self._results: dict = collections.defaultdict(list)  # trial id -> results

    def _better(self, a: float, b: float) -> float:
        return max(a, b) if self._mode == "max" else min(a, b)

    def on_trial_result(self, tune_controller, trial, result: dict) -> str:
        if self._time_attr not in result or self._metric not in result:
            return self.CONTINUE
        key = trial.trial_id
        if key in self._stopped:
            return self.CONTINUE  # paused once already (hard_stop=False): FIFO from now
        t = result[self._time_attr]
        self._results[key].append(result)
        if t < self._grace_period:
            return self.CONTINUE
        others = [k for k, rs in self._results.items() if k != key and rs[-1][self._time_attr] >= t]
        means = [m for m in (self._running_mean(k, t) for k in others) if np.isfinite(m)]
        if len(means) < self._min_samples:
            return self._insufficient(tune_controller, key, t)
        median = np.median(means)
        best = self._best(key)
        if self._better(median, best) != best:
            self._stopped.add(key)
            return self.STOP if self._hard_stop else self.PAUSE
        return self.CONTINUE

    def on_trial_complete(self, tune_controller, trial, result: dict) -> None:
        self._results[trial.trial_id].append(result)

    def _insufficient(self, tune_controller, key, t) -> str:
        waiting = [] if tune_controller is None else [
            x for x in tune_controller.get_live_trials() if x.status in WAITING]
        if t - self._last_pause[key] > self._min_time_slice and waiting:
            self._last_pause[key] = t
            return self.PAUSE
        return self.CONTINUE

    def _running_mean(self, key, t: float) -> float:
        scoped = [r[self._metric] for r in self._results[key]
                  if self._grace_period <= r[self._time_attr] <= t]
        return float(np.mean(scoped)) if scoped else float("nan")

    def _best(self, key) -> float:
        values = [r[self._metric] for r in self._results[key]]
        return max(values) if self._mode == "max" else min(values)
