"""`ConcurrencyLimiter`: at most `max_concurrent` suggestions of a searcher live at once.

A suggestion is live from the `suggest` that made it until its `on_trial_complete`; past
the limit `suggest` answers None without asking the searcher. With `batch=True` the
searcher hears of completions only when the whole live batch has completed (then all at
once, in the order they completed), so it always suggests from complete batches. A searcher
whose `set_max_concurrency` returns True limits itself: the limiter then passes every call
straight through, as Ray's does.
"""

from __future__ import annotations

import logging

from reference.tune.search.searcher import Searcher, WrappingSearcher

logger = logging.getLogger(__name__)


class ConcurrencyLimiter(WrappingSearcher):
    def __init__(self, searcher: Searcher, max_concurrent: int, batch: bool = False):
        if isinstance(max_concurrent, bool) or not isinstance(max_concurrent, int) \
                or max_concurrent <= 0:
            # Ray asserts here; the type stays Ray's, the message says what is allowed
            raise AssertionError(f"ConcurrencyLimiter(max_concurrent={max_concurrent!r}): "
                                 "expected a positive int.")
        if not isinstance(searcher, Searcher):
            raise RuntimeError(
                f"The `ConcurrencyLimiter` only works with `Searcher` objects (got "
                f"{type(searcher)}). Please try to pass `max_concurrent` to the search "
                "generator directly.")
        self.searcher = searcher
        self.max_concurrent = max_concurrent
        self.batch = batch
        self.live_trials: set[str] = set()
        self.num_unfinished_live_trials = 0
        self.cached_results: dict[str, tuple] = {}
        self._limit_concurrency = not searcher.set_max_concurrency(max_concurrent)
        super().__init__(metric=searcher.metric, mode=searcher.mode)

    def set_max_concurrency(self, max_concurrent: int) -> bool:
        self.max_concurrent = max_concurrent
        return True

    def set_search_properties(self, metric, mode, config: dict, **spec) -> bool:
        self._limit_concurrency = not self.searcher.set_max_concurrency(self.max_concurrent)
        return self.searcher.set_search_properties(metric, mode, config, **spec)

    def suggest(self, trial_id: str):
        if not self._limit_concurrency:
            return self.searcher.suggest(trial_id)
        if trial_id in self.live_trials:
            raise AssertionError(f"Trial ID {trial_id} must be unique: already found in set.")
        if len(self.live_trials) >= self.max_concurrent:
            logger.debug("No suggestion for %s: %s/%s trials live.", trial_id,
                         len(self.live_trials), self.max_concurrent)
            return None
        suggestion = self.searcher.suggest(trial_id)
        if suggestion is not None and suggestion != Searcher.FINISHED:
            self.live_trials.add(trial_id)
            self.num_unfinished_live_trials += 1
        return suggestion

    def on_trial_result(self, trial_id: str, result: dict) -> None:
        self.searcher.on_trial_result(trial_id, result)

    def on_trial_complete(self, trial_id: str, result: dict | None = None,
                          error: bool = False) -> None:
        if not self._limit_concurrency:
            return self.searcher.on_trial_complete(trial_id, result=result, error=error)
        if trial_id not in self.live_trials:
            return None
        if not self.batch:
            self.searcher.on_trial_complete(trial_id, result=result, error=error)
            self.live_trials.remove(trial_id)
            self.num_unfinished_live_trials -= 1
            return None
        self.cached_results[trial_id] = (result, error)
        self.num_unfinished_live_trials -= 1
        if self.num_unfinished_live_trials > 0:
            return None
        for done_id, (done_result, done_error) in self.cached_results.items():
            self.searcher.on_trial_complete(done_id, result=done_result, error=done_error)
            self.live_trials.remove(done_id)
        self.cached_results = {}
        self.num_unfinished_live_trials = 0
        return None

    def add_evaluated_point(self, parameters: dict, value: float, error: bool = False,
                            pruned: bool = False, intermediate_values: list | None = None):
        return self.searcher.add_evaluated_point(parameters, value, error, pruned,
                                                 intermediate_values)
