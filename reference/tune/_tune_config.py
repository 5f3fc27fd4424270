"""`TuneConfig`: how a Tuner searches (Ray 2.60's fields and defaults), validated."""

from __future__ import annotations

import dataclasses
import datetime
from typing import Any, Callable, Optional, Union

from reference.tune.schedulers import TrialScheduler

_DEPRECATED = "DEPRECATED"


@dataclasses.dataclass
class TuneConfig:
    mode: Optional[str] = None
    metric: Optional[str] = None
    search_alg: Any = None
    scheduler: Optional[TrialScheduler] = None
    num_samples: int = 1
    max_concurrent_trials: Optional[int] = None
    time_budget_s: Union[int, float, datetime.timedelta, None] = None
    reuse_actors: bool = False
    trial_name_creator: Optional[Callable] = None
    trial_dirname_creator: Optional[Callable] = None
    chdir_to_trial_dir: bool = _DEPRECATED

    def __post_init__(self):
        # a bad `mode` is Ray's error at Tuner.fit(), as in Ray (not here)
        if self.metric is not None and not isinstance(self.metric, str):
            raise TypeError(f"TuneConfig(metric={self.metric!r}): expected a metric name.")
        if isinstance(self.num_samples, bool) or not isinstance(self.num_samples, int) \
                or not (self.num_samples >= 1 or self.num_samples == -1):
            raise ValueError(f"TuneConfig(num_samples={self.num_samples!r}): expected an int "
                             ">= 1 (or -1: sample until time_budget_s runs out).")
        if self.max_concurrent_trials is not None and (
                isinstance(self.max_concurrent_trials, bool)
                or not isinstance(self.max_concurrent_trials, int)
                or self.max_concurrent_trials < 0):
            raise ValueError(f"TuneConfig(max_concurrent_trials={self.max_concurrent_trials!r}"
                             "): expected a positive int, or 0 or None for no limit.")
        if self.scheduler is not None and not isinstance(self.scheduler, TrialScheduler):
            raise TypeError(f"TuneConfig(scheduler={self.scheduler!r}): expected a scheduler "
                            "of reference.tune.schedulers (e.g. ASHAScheduler()).")
        budget = self.time_budget_s
        if isinstance(budget, datetime.timedelta):
            self.time_budget_s = budget.total_seconds()
        elif budget is not None and (isinstance(budget, bool)
                                     or not isinstance(budget, (int, float)) or budget <= 0):
            raise ValueError(f"TuneConfig(time_budget_s={budget!r}): expected seconds > 0, a "
                             "timedelta, or None.")
        if self.chdir_to_trial_dir != _DEPRECATED:
            raise DeprecationWarning(
                "`chdir_to_trial_dir` is deprecated: trials run in their own working "
                "directory as before; read files through absolute paths or "
                "tune.get_context().get_trial_dir().")
