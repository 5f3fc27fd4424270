"""ASHA (asynchronous successive halving), Ray's AsyncHyperBandScheduler.

Rungs sit at `grace_period * reduction_factor**k` (time_attr units, up to max_t); bracket s
starts its rungs `reduction_factor**s` later. When a trial's result reaches a rung it has
not been recorded at, its (mode-signed) metric is compared with the rung's cutoff, the
`1 - 1/reduction_factor` quantile of the values recorded there (NaN ignored): below it, the
trial stops; either way its value is recorded. A result at or past max_t stops the trial
(`stop_last_trials`). Trials are spread over brackets with probabilities favouring those
with more rungs, as in Ray (numpy's global random state picks).
"""

from __future__ import annotations

import logging
import math

import numpy as np

from reference.tune.schedulers._base import MetricScheduler, TrialScheduler

logger = logging.getLogger(__name__)

class _Bracket:
    def __init__(self, min_t: float, max_t: float, reduction_factor: float, s: int,
                 stop_last_trials: bool = True):
        self.rf = reduction_factor
        count = int(np.log(max_t / min_t) / np.log(reduction_factor) - s + 1)
        # highest rung first: a result is checked against the highest rung it reached
        self.rungs = [(min_t * reduction_factor ** (k + s), {}) for k in reversed(range(count))]
        self.stop_last_trials = stop_last_trials

    def cutoff(self, recorded: dict):
        if not recorded:
            return None
        return np.nanpercentile(list(recorded.values()), (1 - 1 / self.rf) * 100)

    def on_result(self, trial_id, t, reward) -> str:
        action = TrialScheduler.CONTINUE
        for milestone, recorded in self.rungs:
            if t >= milestone and trial_id in recorded and not self.stop_last_trials:
                break  # already judged at this rung: its decision stands
            if t < milestone or trial_id in recorded:
                continue
            cutoff = self.cutoff(recorded)
            if cutoff is not None and reward < cutoff:
                action = TrialScheduler.STOP
            if reward is None:
                logger.warning("Reward attribute is None! Consider reporting using a "
                               "different field.")
            else:
                recorded[trial_id] = reward
            break
        return action


class AsyncHyperBandScheduler(MetricScheduler):
    def __init__(self, time_attr: str = "training_iteration", metric: str | None = None,
                 mode: str | None = None, max_t: int = 100, grace_period: int = 1,
                 reduction_factor: float = 4, brackets: int = 1,
                 stop_last_trials: bool = True):
        # Ray asserts these (AssertionError, its messages first)
        for ok, ray_says, what in (
                (max_t > 0, "Max (time_attr) not valid!", f"max_t={max_t!r} must be > 0"),
                (max_t >= grace_period, "grace_period must be <= max_t!",
                 f"grace_period={grace_period!r}, max_t={max_t!r}"),
                (grace_period > 0, "grace_period must be positive!",
                 f"grace_period={grace_period!r}"),
                (reduction_factor > 1, "Reduction Factor not valid!",
                 f"reduction_factor={reduction_factor!r} must be > 1"),
                (brackets > 0, "brackets must be positive!", f"brackets={brackets!r}"),
                (mode in (None, "min", "max"), "`mode` must be 'min' or 'max'!",
                 f"mode={mode!r}")):
            if not ok:
                raise AssertionError(f"{ray_says} (ASHAScheduler({what}))")
        self._max_t, self._time_attr = max_t, time_attr
        self._metric, self._mode = metric, mode
        self._stop_last_trials = stop_last_trials
        self._brackets = [_Bracket(grace_period, max_t, reduction_factor, s, stop_last_trials)
                          for s in range(brackets)]
        self._trial_info: dict = {}
        self._num_stopped = 0

    @property
    def _sign(self) -> float | None:
        return {"max": 1.0, "min": -1.0}.get(self._mode)

    def on_trial_add(self, tune_controller, trial) -> None:
        super().on_trial_add(tune_controller, trial)
        sizes = np.array([len(b.rungs) for b in self._brackets])
        weights = math.e ** (sizes - sizes.max())
        index = np.random.choice(len(self._brackets), p=weights / weights.sum())
        self._trial_info[trial.trial_id] = self._brackets[index]

    def on_trial_result(self, tune_controller, trial, result: dict) -> str:
        if self._time_attr not in result or self._metric not in result:
            return self.CONTINUE
        if result[self._time_attr] >= self._max_t and self._stop_last_trials:
            action = self.STOP
        else:
            action = self._trial_info[trial.trial_id].on_result(
                trial.trial_id, result[self._time_attr], self._sign * result[self._metric])
        if action == self.STOP:
            self._num_stopped += 1
        return action

    def on_trial_complete(self, tune_controller, trial, result: dict) -> None:
        if self._time_attr not in result or self._metric not in result:
            return
        self._trial_info[trial.trial_id].on_result(
            trial.trial_id, result[self._time_attr], self._sign * result[self._metric])
        del self._trial_info[trial.trial_id]

    def on_trial_remove(self, tune_controller, trial) -> None:
        self._trial_info.pop(trial.trial_id, None)


ASHAScheduler = AsyncHyperBandScheduler
