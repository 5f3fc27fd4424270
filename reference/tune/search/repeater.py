"""`Repeater`: each suggestion of a searcher runs `repeat` times; the searcher sees one
trial per group (the first, its "primary") and, once every repeat has completed, the mean
of their metrics (NaN for a repeat that reported no metric; NaNs left out of the mean).

`num_samples` counts all trials, repeats included: 15 with repeat=5 is 3 suggestions.
With `set_index` each config carries `TRIAL_INDEX` (0 .. repeat-1), e.g. to seed with.
"""

from __future__ import annotations

import copy
import logging
import warnings

import numpy as np

from reference.tune.search.searcher import Searcher, WrappingSearcher

logger = logging.getLogger(__name__)

TRIAL_INDEX = "__trial_index__"


def warn_num_samples(searcher, num_samples: int) -> None:
    if isinstance(searcher, Repeater) and num_samples % searcher.repeat:
        logger.warning(
            "`num_samples` is now expected to be the total number of trials, including the "
            "repeat trials. For example, set num_samples=15 if you intend to obtain 3 search "
            "algorithm suggestions and repeat each suggestion 5 times. Any leftover trials "
            "(num_samples mod repeat) will be ignored.")


class _TrialGroup:
    """The trials sharing one suggestion; `scores` maps trial id -> metric (None: not
    yet reported), in the order the trials joined."""

    def __init__(self, primary_trial_id: str, config: dict, max_trials: int):
        if not isinstance(config, dict):
            raise AssertionError(f"config is not a dict, got {config}")
        self.primary_trial_id = primary_trial_id
        self.config = config
        self.max_trials = max_trials
        self.scores: dict[str, float | None] = {primary_trial_id: None}

    def full(self) -> bool:
        return len(self.scores) == self.max_trials

    def finished_reporting(self) -> bool:
        return self.full() and None not in self.scores.values()


class Repeater(WrappingSearcher):
    def __init__(self, searcher: Searcher, repeat: int = 1, set_index: bool = True):
        if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1:
            raise ValueError(f"Repeater(repeat={repeat!r}): expected an int >= 1.")
        self.searcher = searcher
        self.repeat = repeat
        self._set_index = set_index
        self._groups: list[_TrialGroup] = []
        self._trial_id_to_group: dict[str, _TrialGroup] = {}
        self._current_group: _TrialGroup | None = None
        super().__init__(metric=searcher.metric, mode=searcher.mode)

    def set_search_properties(self, metric, mode, config: dict, **spec) -> bool:
        return self.searcher.set_search_properties(metric, mode, config, **spec)

    def suggest(self, trial_id: str):
        group = self._current_group
        if group is None or group.full():
            config = self.searcher.suggest(trial_id)
            if config is None or config == Searcher.FINISHED:
                return config
            group = _TrialGroup(trial_id, copy.deepcopy(config), max_trials=self.repeat)
            self._groups.append(group)
            self._current_group = group
        else:
            group.scores.setdefault(trial_id, None)
        index = list(group.scores).index(trial_id)
        config = group.config.copy()
        if self._set_index:
            config[TRIAL_INDEX] = index
        self._trial_id_to_group[trial_id] = group
        return config

    def on_trial_complete(self, trial_id: str, result: dict | None = None, **kwargs) -> None:
        if trial_id not in self._trial_id_to_group:
            raise KeyError(f"Trial {trial_id} not in group; cannot report score. Seen trials: "
                           f"{list(self._trial_id_to_group)}")
        group = self._trial_id_to_group[trial_id]
        metric = self.searcher.metric
        score = result[metric] if result and metric in result else np.nan
        if score is None:
            raise ValueError("Internal Error: Score cannot be None.")
        group.scores[trial_id] = score
        if group.finished_reporting():
            with warnings.catch_warnings():  # all NaN: the mean is NaN, said once here
                warnings.simplefilter("ignore", RuntimeWarning)
                mean = np.nanmean(list(group.scores.values()))
            self.searcher.on_trial_complete(group.primary_trial_id, result={metric: mean},
                                            **kwargs)
