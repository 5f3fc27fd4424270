"""HyperBandScheduler: Ray's synchronous HyperBand (successive halving in brackets).

Trials fill brackets in the order they are added, band after band; band k holds brackets
s = 0, 1, ..., S - 1 with S = round(log(max_t) / log(eta)) + 1. Bracket s takes up to
n = ceil(S / (s + 1) * eta**s) trials and first judges them at the milestone
r = int(max_t * eta**-s) (time_attr units); a bracket whose r would be 0 is skipped (a None
in its band, as in Ray). A trial whose result reaches the milestone is PAUSED until every
live trial of its bracket has reached it; the trial that arrives last processes the
bracket: the best ceil(n / eta) are kept, the rest stop, and the milestone grows eta-fold
(up to max_t). Kept trials that are PAUSED stay PAUSED, marked so that
`choose_trial_to_run` hands them out again (Ray's HyperBand never unpauses them itself);
the trial that arrived goes on. Past the last milestone the bracket's trials stop
(`stop_last_trials`), or run on unjudged.

Ordering hazards, kept as in Ray: `controller.stop_trial` on a PAUSED trial calls back
`on_trial_remove`, which may process the bracket again; a bracket, once halved, is never
processed from `on_trial_remove` again (Ray's `is_being_processed` is not reset), so only a
result moves it on. `choose_trial_to_run` walks the bands in order and, within a band, the
brackets by completion (least complete first).
"""

from __future__ import annotations

import collections
import logging

import numpy as np

from reference.tune.error import TuneError
from reference.tune.schedulers._base import MetricScheduler

logger = logging.getLogger(__name__)

PAUSED, PENDING, RUNNING = "PAUSED", "PENDING", "RUNNING"


def _waits(trial) -> bool:
    """PAUSED, or (in Ray) saving before it pauses: a trial not running a training step."""
    return trial.status == PAUSED or bool(getattr(trial, "is_saving", False))


class _Bracket:
    def __init__(self, time_attr: str, size: int, milestone: int, max_t: float, eta: float,
                 halvings: int, stop_last_trials: bool):
        self.time_attr, self.max_t, self.eta = time_attr, max_t, eta
        self.size = size              # n: how many live trials it holds; shrinks per halving
        self.milestone = milestone    # r: where its live trials are judged next
        self.halvings = halvings      # halvings left
        self.stop_last_trials = stop_last_trials
        self.live: dict = {}          # trial_id -> [trial, its latest result or None]
        self.all_trials: list = []
        self.to_unpause: set = set()  # ids of kept PAUSED trials, until they report again
        self.processed = False
        self.progress = 0
        self.total_work = self._total_work(size, milestone, halvings)

    def _total_work(self, n, r, s) -> int:
        # Ray's estimate, whose cap uses the first milestone throughout: only the
        # completion percentage (the order choose_trial_to_run tries brackets in) uses it
        work, first = 0, r
        for _ in range(s + 1):
            work += int(n) * int(r)
            n = int(np.ceil(n / self.eta))
            r = int(min(r * self.eta, self.max_t - first))
        return work

    def time(self, result) -> float:
        if result is None:
            return 0
        if self.time_attr not in result:
            raise KeyError(f"HyperBandScheduler(time_attr={self.time_attr!r}): the result "
                           f"has no {self.time_attr!r} (keys: {sorted(result)}); report it, "
                           "or pass a time_attr the results carry")
        return result[self.time_attr]

    def filled(self) -> bool:
        return len(self.live) == self.size

    def add(self, trial) -> None:
        self.live[trial.trial_id] = [trial, None]
        self.all_trials.append(trial)

    def remove(self, trial) -> None:
        self.live.pop(trial.trial_id, None)

    def trials(self) -> list:
        return [trial for trial, _ in self.live.values()]

    def update(self, trial, result: dict) -> None:
        if trial.trial_id not in self.live:
            raise AssertionError(f"HyperBandScheduler got a result of trial {trial.trial_id}, "
                                 "which its bracket no longer tracks (stopped or removed)")
        entry = self.live[trial.trial_id]
        delta = self.time(result) - self.time(entry[1])
        if delta <= 0:
            logger.info("Restoring from a previous point in time. Previous=%s; Now=%s",
                        self.time(entry[1]), self.time(result))
        self.progress += delta
        entry[1] = result
        self.to_unpause.discard(trial.trial_id)

    def all_reached(self) -> bool:
        return all(self.time(result) >= self.milestone for _, result in self.live.values())

    def finished(self) -> bool:
        return self.stop_last_trials and self.halvings == 0 and self.all_reached()

    def continues(self, trial) -> bool:
        """Whether the trial runs on without waiting for the rest of its bracket."""
        if not self.stop_last_trials and self.halvings == 0:
            return True
        return self.time(self.live[trial.trial_id][1]) < self.milestone

    def halve(self, metric: str, sign: float) -> tuple[list, list]:
        if self.halvings == 0 and not self.stop_last_trials:
            return self.trials(), []
        self.halvings -= 1
        self.size = int(np.ceil(self.size / self.eta))
        self.milestone = int(min(self.milestone * self.eta, self.max_t))
        ranked = sorted(self.live.values(), key=lambda entry: sign * entry[1][metric])
        ranked = [trial for trial, _ in ranked]
        return ranked[-self.size:], ranked[:-self.size]

    def completion(self) -> float:
        if self.finished():
            return 1.0
        return min(self.progress / self.total_work, 1.0)

    def __repr__(self) -> str:
        counts = collections.Counter(t.status for t in self.all_trials)
        statuses = ", ".join(sorted(f"{k}: {v}" for k, v in counts.items()))
        return (f"Bracket(Max Size (n)={self.size}, Milestone (r)={self.milestone}, "
                f"completed={self.completion():.1%}): {{{statuses}}} ")


class HyperBandScheduler(MetricScheduler):
    def __init__(self, time_attr: str = "training_iteration", metric: str | None = None,
                 mode: str | None = None, max_t: int = 81, reduction_factor: float = 3,
                 stop_last_trials: bool = True):
        if not max_t > 0:  # Ray asserts these (AssertionError, its message first)
            raise AssertionError(f"Max (time_attr) not valid! (HyperBandScheduler(max_t="
                                 f"{max_t!r}): expected > 0)")
        if mode and mode not in ("min", "max"):
            raise AssertionError(f"`mode` must be 'min' or 'max'! (HyperBandScheduler(mode="
                                 f"{mode!r}))")
        # Ray divides by log(eta) and, with max_t < 1, retries empty brackets forever
        if not reduction_factor > 1:
            raise ValueError(f"HyperBandScheduler(reduction_factor={reduction_factor!r}): "
                             "expected a number > 1.")
        if not max_t >= 1:
            raise ValueError(f"HyperBandScheduler(max_t={max_t!r}): expected >= 1, the "
                             "first milestone of every bracket would be 0.")
        self._time_attr, self._metric, self._mode = time_attr, metric, mode
        self._max_t, self._eta = max_t, reduction_factor
        self._stop_last_trials = stop_last_trials
        self._per_band = int(np.round(np.log(max_t) / np.log(reduction_factor))) + 1
        self._bands: list[list] = [[]]
        self._current: _Bracket | None = None   # the bracket new trials join
        self._trial_info: dict = {}              # trial_id -> its bracket
        self._num_stopped = 0

    def on_trial_add(self, tune_controller, trial) -> None:
        super().on_trial_add(tune_controller, trial)
        if self._current is None or self._current.filled():
            self._current = self._new_bracket()
        self._current.add(trial)
        self._trial_info[trial.trial_id] = self._current

    def _new_bracket(self) -> _Bracket:
        while True:
            if len(self._bands[-1]) == self._per_band:
                self._bands.append([])
            band = self._bands[-1]
            s = len(band)
            if s >= self._per_band:
                raise AssertionError("Current band is filled!")
            milestone = int(self._max_t * self._eta ** (-s))
            if milestone == 0:
                logger.info("Bracket too small - Retrying...")
                band.append(None)
                continue
            size = int(np.ceil(self._per_band / (s + 1) * self._eta ** s))
            bracket = _Bracket(self._time_attr, size, milestone, self._max_t, self._eta, s,
                               self._stop_last_trials)
            band.append(bracket)
            return bracket

    def on_trial_result(self, tune_controller, trial, result: dict) -> str:
        bracket = self._trial_info[trial.trial_id]
        bracket.update(trial, result)
        if bracket.continues(trial):
            return self.CONTINUE
        return self._process(tune_controller, bracket)

    def _stop(self, tune_controller, bracket: _Bracket, trial) -> None:
        tune_controller.stop_trial(trial)
        bracket.remove(trial)  # a controller that does not call on_trial_remove back

    def _process(self, tune_controller, bracket: _Bracket) -> str:
        """Judge the bracket once all its live trials reached the milestone. At most one of
        them runs (the one whose result brought us here): it gets the returned action;
        the paused ones are stopped, or kept for choose_trial_to_run."""
        if not bracket.all_reached():
            return self.PAUSE
        if bracket.finished():
            for trial in bracket.trials():
                if trial.status == PAUSED:
                    self._stop(tune_controller, bracket, trial)
            return self.STOP
        bracket.processed = True
        good, bad = bracket.halve(self._metric, self._sign)
        self._num_stopped += len(bad)
        action = self.PAUSE
        for trial in bad:
            if _waits(trial):
                self._stop(tune_controller, bracket, trial)
            elif trial.status == RUNNING:
                bracket.remove(trial)
                action = self.STOP
            else:
                raise TuneError(f"Trial with unexpected bad status encountered: {trial} is "
                                f"{trial.status}")
        for trial in good:
            if bracket.continues(trial):
                if trial.is_finished():
                    raise AssertionError(f"Good trial {trial.trial_id} is in an invalid state: "
                                         f"{trial.status}")
                if _waits(trial):
                    bracket.to_unpause.add(trial.trial_id)
                elif trial.status == RUNNING:
                    action = self.CONTINUE
            elif bracket.finished():
                if _waits(trial):
                    self._stop(tune_controller, bracket, trial)
                elif trial.status == RUNNING:
                    bracket.remove(trial)
                    action = self.STOP
        return action

    def on_trial_remove(self, tune_controller, trial) -> None:
        bracket = self._trial_info[trial.trial_id]
        bracket.remove(trial)
        if not bracket.finished() and not bracket.processed:
            self._process(tune_controller, bracket)

    def on_trial_complete(self, tune_controller, trial, result: dict) -> None:
        self.on_trial_remove(tune_controller, trial)

    def on_trial_error(self, tune_controller, trial) -> None:
        self.on_trial_remove(tune_controller, trial)

    def choose_trial_to_run(self, tune_controller):
        for band in self._bands:
            brackets = sorted((b for b in band if b is not None), key=_Bracket.completion)
            for bracket in brackets:
                for trial in bracket.trials():
                    if trial.status == PENDING or (
                            trial.status == PAUSED and trial.trial_id in bracket.to_unpause):
                        return trial
        return None

    def debug_string(self) -> str:
        out = (f"Using HyperBand: num_stopped={self._num_stopped} "
               f"total_brackets={sum(len(band) for band in self._bands)}")
        for i, band in enumerate(self._bands):
            out += f"\nRound #{i}:"
            out += "".join(f"\n  {bracket}" for bracket in band if bracket)
        return out
