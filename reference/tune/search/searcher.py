"""The two interfaces of a search: `Searcher` (what users subclass: suggests one config per
trial id and hears how the trial went) and `SearchAlgorithm` (what the Tuner's controller
drives: hands out whole trial configs for an experiment, and says when none will come).

The controller only ever talks to a `SearchAlgorithm`: `BasicVariantGenerator`, or a
`SearchGenerator` around a `Searcher`. Its calls, in order:

1. `set_search_properties(metric, mode, param_space) -> bool` (False: the algorithm had
   its own space or metric, and the Tuner raises Ray's error if param_space still holds
   search domains);
2. `add_configurations(param_space, num_samples)` (num_samples=-1: unbounded);
3. repeatedly `next_config(trial_id) -> dict | None` (None: nothing now, perhaps later)
   until `is_finished()`; `on_trial_result` / `on_trial_complete` as trials report;
4. `get_state()` / `set_state(state)` around an interruption (`Tuner.restore`).
"""

from __future__ import annotations

import abc
import copy
import glob
import logging
import os
import uuid
from typing import Any

logger = logging.getLogger(__name__)

#: Ray's messages for the three ways a searcher can be missing its setup
UNRESOLVED_SEARCH_SPACE = (
    "You passed a `{par}` parameter to {cls} that contained unresolved search space "
    "definitions. {cls} should however be instantiated with fully configured search spaces "
    "only. To use Ray Tune's automatic search space conversion, pass the space definition as "
    "part of the `param_space` argument to `tune.Tuner()` instead.")
UNDEFINED_SEARCH_SPACE = (
    "Trying to sample a configuration from {cls}, but no search space has been defined. "
    "Either pass the `{space}` argument when instantiating the search algorithm, or pass a "
    "`param_space` to `tune.Tuner()`.")
UNDEFINED_METRIC_MODE = (
    "Trying to sample a configuration from {cls}, but the `metric` ({metric}) or `mode` "
    "({mode}) parameters have not been set. Either pass these arguments when instantiating "
    "the search algorithm, or pass them to `tune.TuneConfig()`.")


def _check_metric_mode(metric, mode) -> None:
    """Ray's checks (AssertionErrors, as Ray raises), skipped until both are given."""
    if not mode or not metric:
        return
    if not isinstance(metric, type(mode)):
        raise AssertionError("metric and mode must be of the same type")
    if isinstance(mode, str):
        if mode not in ("min", "max"):
            raise AssertionError("if `mode` is a str must be 'min' or 'max'!")
    elif isinstance(mode, list):
        if len(mode) != len(metric):
            raise AssertionError("Metric and mode must be the same length")
        if not all(m in ("min", "max", "obs") for m in mode):
            raise AssertionError("All of mode must be 'min' or 'max' or 'obs'!")
    else:
        raise ValueError("Mode most either be a list or string")


class Searcher:
    """Suggests a config for each trial id and is told each trial's results (Ray's API).

    Subclasses override `suggest` and `on_trial_complete` (and call `super().__init__`).
    `suggest` returns a config, None (nothing now: ask again later) or `Searcher.FINISHED`
    (no more, ever).
    """

    FINISHED = "FINISHED"
    CKPT_FILE_TMPL = "searcher-state-{}.pkl"

    def __init__(self, metric: str | list | None = None, mode: str | list | None = None):
        self._metric = metric
        self._mode = mode
        _check_metric_mode(metric, mode)

    @property
    def metric(self):
        return self._metric

    @property
    def mode(self):
        return self._mode

    def set_search_properties(self, metric, mode, config: dict, **spec) -> bool:
        """Take the Tuner's metric, mode and param_space; False when not taken."""
        return False

    def set_max_concurrency(self, max_concurrent: int) -> bool:
        """True when the searcher limits its own concurrency (a `ConcurrencyLimiter` around
        it then only passes calls through)."""
        return False

    # Ray's base-class protocol: a subclass overrides what it supports, and the Tune loop
    # treats NotImplementedError from get_state / save as "cannot be saved" (save_to_dir,
    # search_generator._base_state), as Ray's does.
    def suggest(self, trial_id: str) -> dict | str | None:
        raise NotImplementedError

    def on_trial_result(self, trial_id: str, result: dict) -> None:
        pass

    def on_trial_complete(self, trial_id: str, result: dict | None = None,
                          error: bool = False) -> None:
        raise NotImplementedError

    def add_evaluated_point(self, parameters: dict, value: float, error: bool = False,
                            pruned: bool = False, intermediate_values: list | None = None):
        raise NotImplementedError

    def get_state(self) -> dict:
        raise NotImplementedError

    def set_state(self, state: dict) -> None:
        raise NotImplementedError

    def save(self, checkpoint_path: str) -> None:
        raise NotImplementedError

    def restore(self, checkpoint_path: str) -> None:
        raise NotImplementedError

    def save_to_dir(self, checkpoint_dir: str, session_str: str = "default") -> None:
        """`save` into `checkpoint_dir`, atomically; skipped (with a warning) when the
        searcher does not implement `save`."""
        final = os.path.join(checkpoint_dir, self.CKPT_FILE_TMPL.format(session_str))
        tmp = os.path.join(checkpoint_dir, f".{uuid.uuid4()}-tmp-{os.path.basename(final)}")
        try:
            self.save(tmp)
        except NotImplementedError:
            logger.warning("save not implemented for Searcher. Skipping save.")
            return
        if os.path.exists(tmp):
            os.replace(tmp, final)

    def restore_from_dir(self, checkpoint_dir: str) -> None:
        paths = glob.glob(os.path.join(checkpoint_dir, self.CKPT_FILE_TMPL.format("*")))
        if not paths:
            raise RuntimeError(f"Searcher unable to find checkpoint in {checkpoint_dir}")
        self.restore(max(paths))


class SearchAlgorithm(abc.ABC):
    """What the controller drives (see the module docstring for the order of calls)."""

    _finished = False
    _metric = None

    @property
    def metric(self):
        return self._metric

    def set_search_properties(self, metric, mode, config: dict, **spec) -> bool:
        if self._metric and metric:
            return False
        if metric:
            self._metric = metric
        return True

    @property
    def total_samples(self) -> int:
        return 0

    @abc.abstractmethod
    def add_configurations(self, param_space: dict, num_samples: int = 1) -> None: ...

    @abc.abstractmethod
    def next_config(self, trial_id: str) -> dict | None: ...

    def on_trial_result(self, trial_id: str, result: dict) -> None:
        pass

    def on_trial_complete(self, trial_id: str, result: dict | None = None,
                          error: bool = False) -> None:
        pass

    def is_finished(self) -> bool:
        return self._finished

    def set_finished(self) -> None:
        self._finished = True

    @abc.abstractmethod
    def get_state(self) -> dict[str, Any]: ...

    @abc.abstractmethod
    def set_state(self, state: dict[str, Any]) -> None: ...


class WrappingSearcher(Searcher):
    """A searcher around another (`self.searcher`): its state is its own bookkeeping (the
    wrapped searcher saves and restores itself)."""

    def get_state(self) -> dict:
        return copy.deepcopy({k: v for k, v in self.__dict__.items() if k != "searcher"})

    def set_state(self, state: dict) -> None:
        self.__dict__.update(state)

    def save(self, checkpoint_path: str) -> None:
        self.searcher.save(checkpoint_path)

    def restore(self, checkpoint_path: str) -> None:
        self.searcher.restore(checkpoint_path)
