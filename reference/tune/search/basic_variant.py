"""`BasicVariantGenerator`: Tune's default search, Ray's random and grid search.

Each of the `num_samples` samples is one full grid: every grid_search combination once,
the domains drawn for each (see `variant_generator`). The `points_to_evaluate` come first,
each standing in for one sample: its values replace those of the space at the same paths,
and whatever grid is left in the space still expands around it. So with `a` a grid of 2,
num_samples=4 and points `[{"a": 2, "b": 2}, {"b": 2}]`: one trial (a=2, b=2), two trials
(a=1|2, b=2), then two samples of two trials each; `total_samples` is 7.

One random generator serves all samples in order, drawn a whole sample at a time as Ray
does; so with the same `random_state` (a seed or a numpy Generator) the configs are the
ones Ray's generator gives. With None the generator is seeded from numpy's global state:
`np.random.seed(...)` makes a run repeatable, but with other numbers than Ray's (which
draws from the global RandomState itself).
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import sys
from typing import Any

import numpy as np

from reference.tune.search.sample import Categorical, Domain
from reference.tune.search.searcher import SearchAlgorithm
from reference.tune.search.variant_generator import count_variants, generate_variants

logger = logging.getLogger(__name__)


def _generator(random_state) -> np.random.Generator:
    if isinstance(random_state, np.random.Generator):
        return random_state
    if random_state is None or isinstance(random_state, np.random.RandomState):
        source = random_state if random_state is not None else np.random
        return np.random.default_rng(source.randint(0, 2**63 - 1))
    if isinstance(random_state, bool) or not isinstance(random_state, (int, np.integer)):
        raise TypeError(f"BasicVariantGenerator(random_state={random_state!r}): expected None, "
                        "an int seed, a numpy.random.Generator or a numpy.random.RandomState.")
    return np.random.default_rng(random_state)


def num_samples_or_unbounded(num_samples: int) -> int:
    """Ray's reading of num_samples: -1 is (virtually) unbounded."""
    if isinstance(num_samples, bool) or not isinstance(num_samples, int) \
            or not (num_samples >= 0 or num_samples == -1):
        raise ValueError(f"add_configurations(num_samples={num_samples!r}): expected an int "
                         ">= 0, or -1 for unbounded.")
    return sys.maxsize if num_samples == -1 else num_samples


def _point_leaves(point: Any, path: tuple = ()):
    """(path, value) of a point's fixed values; domains and grids in a point are skipped,
    as Ray skips them."""
    items = point.items() if isinstance(point, dict) else enumerate(point)
    for key, value in items:
        if isinstance(value, Domain) or (isinstance(value, dict) and set(value) == {"grid_search"}):
            continue
        if isinstance(value, (dict, list, tuple)):
            yield from _point_leaves(value, path + (key,))
        else:
            yield path + (key,), value


def with_point(space: dict, point: dict) -> dict:
    """The space with a point's values in place of what stood at their paths."""
    space = copy.deepcopy(space)
    for path, value in _point_leaves(point):
        node = space
        try:
            for key in path[:-1]:
                node = node[key]
            current = node[path[-1]]
        except (KeyError, IndexError, TypeError):  # Ray: a bare KeyError for a dict key
            raise ValueError(
                f"Pre-set config key `{'/'.join(map(str, path))}` does not correspond to a "
                "valid key in the search space definition. Please add this path to the "
                "`param_space` variable passed to `tune.Tuner()`.") from None
        if isinstance(current, dict) and set(current) == {"grid_search"}:
            current = Categorical(current["grid_search"])
        name = "/".join(map(str, path))
        if isinstance(node, tuple):
            raise ValueError(f"Pre-set config key `{name}` points into a tuple of the "
                             "param_space; make that tuple a list.")
        if isinstance(current, Domain):
            if not current.is_valid(value):
                logger.warning(f"Pre-set value `{value}` is not within valid values of "
                               f"parameter `{name}`: {current!r}")
        elif not isinstance(current, dict) and current != value:
            logger.warning(f"Pre-set value `{value}` is not equal to the value of parameter "
                           f"`{name}`: {current}")
        node[path[-1]] = value
    return space


@dataclasses.dataclass
class _Experiment:
    """One add_configurations: what is left to hand out of it."""

    space: dict
    points: list
    samples_left: int
    pending: list = dataclasses.field(default_factory=list)  # the current sample's configs

    def next(self, constant_grid_search: bool, rng: np.random.Generator) -> dict | None:
        while not self.pending:
            if self.points:
                space = with_point(self.space, self.points.pop(0))
            elif self.samples_left > 0:
                space = self.space
            else:
                return None
            self.samples_left -= 1
            self.pending = [config for _, config in
                            generate_variants(space, constant_grid_search, random_state=rng)]
        return self.pending.pop(0)


class BasicVariantGenerator(SearchAlgorithm):
    def __init__(self, points_to_evaluate: list[dict] | None = None, max_concurrent: int = 0,
                 constant_grid_search: bool = False, random_state=None):
        if points_to_evaluate is not None and (
                not isinstance(points_to_evaluate, list)
                or not all(isinstance(p, dict) for p in points_to_evaluate)):
            raise TypeError(f"BasicVariantGenerator(points_to_evaluate={points_to_evaluate!r})"
                            ": expected a list of config dicts.")
        if isinstance(max_concurrent, bool) or not isinstance(max_concurrent, int) \
                or max_concurrent < 0:
            raise ValueError(f"BasicVariantGenerator(max_concurrent={max_concurrent!r}): "
                             "expected an int >= 0 (0: no limit).")
        self._points_to_evaluate = list(points_to_evaluate or [])
        self.max_concurrent = max_concurrent
        self._constant_grid_search = constant_grid_search
        self._rng = _generator(random_state)
        self._experiments: list[_Experiment] = []
        self._total_samples = 0
        self._live_trials: set[str] = set()
        self._finished = False

    @property
    def total_samples(self) -> int:
        return self._total_samples

    def add_configurations(self, param_space: dict, num_samples: int = 1) -> None:
        if not isinstance(param_space, dict):
            raise ValueError("The `param_space` passed to `Tuner(...)` must be a dict. Got "
                             f"'{type(param_space)}' instead.")
        num_samples = num_samples_or_unbounded(num_samples)
        points = copy.deepcopy(self._points_to_evaluate)
        per_point = [count_variants(with_point(param_space, p)) for p in points]
        rest = num_samples - len(points)
        grid = count_variants(param_space)
        self._total_samples += sum(per_point) + (rest * grid if rest > 0 else 0)
        # an empty grid_search has no variants: no sample of this space can give a trial
        self._experiments.append(_Experiment(copy.deepcopy(param_space), points,
                                             num_samples if grid else 0))

    def next_config(self, trial_id: str) -> dict | None:
        if self.is_finished():
            return None
        if self.max_concurrent > 0 and len(self._live_trials) >= self.max_concurrent:
            return None
        if trial_id in self._live_trials:
            raise ValueError(f"next_config(trial_id={trial_id!r}): that trial already has a "
                             "config; pass a new trial id.")
        for experiment in self._experiments:
            config = experiment.next(self._constant_grid_search, self._rng)
            if config is not None:
                self._live_trials.add(trial_id)
                return config
        # Ray's generator, too, learns it is exhausted only when asked once more
        self.set_finished()
        return None

    def on_trial_complete(self, trial_id: str, result: dict | None = None,
                          error: bool = False) -> None:
        self._live_trials.discard(trial_id)

    def get_state(self) -> dict:
        """Everything needed to go on where it stopped (the random generator included);
        picklable with cloudpickle (a space's `sample_from` functions may be lambdas)."""
        return copy.deepcopy({
            "points_to_evaluate": self._points_to_evaluate, "max_concurrent": self.max_concurrent,
            "constant_grid_search": self._constant_grid_search, "rng": self._rng,
            "experiments": self._experiments, "total_samples": self._total_samples,
            "live_trials": self._live_trials, "finished": self._finished})

    def set_state(self, state: dict) -> None:
        state = copy.deepcopy(state)
        self._points_to_evaluate = state["points_to_evaluate"]
        self.max_concurrent = state["max_concurrent"]
        self._constant_grid_search = state["constant_grid_search"]
        self._rng = state["rng"]
        self._experiments = state["experiments"]
        self._total_samples = state["total_samples"]
        self._live_trials = state["live_trials"]
        self._finished = state["finished"]
