"""`OptunaSearch`: Ray's wrapper of an Optuna study, through Optuna's ask/tell interface.

The space is a dict of Optuna distributions keyed by flat names ("a/b" for a nested
`{"a": {"b": ...}}`), a define-by-run function `space(trial)` (whose `trial.suggest_*`
calls are recorded; it may return a dict of constants), or reference.tune domains, which
are converted (`convert_search_space`). `suggest` asks the study for a trial with those
distributions; `on_trial_complete` tells it the last result's metric (a list of values for
several metrics), FAIL for an errored trial without it and PRUNED for any other trial
without it. Intermediate results are reported to the Optuna trial (nothing prunes here).

Ordering hazard: the order of the flat names decides the order in which the sampler
draws, so the flattening keeps Ray's order (a level's plain values first, then its dicts'
entries, level by level): with the same sampler and seed, the same results told give the
configs Ray's OptunaSearch gives.
"""

from __future__ import annotations

import copy
import inspect
import logging
import pickle
import time
import warnings
from typing import Any, Callable

from reference.tune.search.sample import Categorical, Domain, Float, Integer
from reference.tune.search.searcher import (
    UNDEFINED_METRIC_MODE,
    UNDEFINED_SEARCH_SPACE,
    UNRESOLVED_SEARCH_SPACE,
    Searcher,
)

try:
    import optuna as ot
except ImportError:  # OptunaSearch() then says how to install it
    ot = None

logger = logging.getLogger(__name__)

DEFAULT_METRIC = "_metric"
TRAINING_ITERATION = "training_iteration"
DEFINE_BY_RUN_WARN_THRESHOLD_S = 1


# ------------------------------------------------------------------- space conversion
def _is_grid(value) -> bool:
    return isinstance(value, dict) and set(value) == {"grid_search"}


def _unresolved(space) -> tuple[bool, bool]:
    """(has domains, has grid searches), looking into dicts and lists as Ray does."""
    if isinstance(space, Domain):
        return True, False
    if _is_grid(space):
        return False, True
    values = space.values() if isinstance(space, dict) else \
        space if isinstance(space, (list, tuple)) else ()
    found = [_unresolved(v) for v in values]
    return any(d for d, _ in found), any(g for _, g in found)


def flatten(space: dict, prevent_delimiter: bool = False) -> dict:
    """Nested dicts to "a/b" names, in Ray's order (each pass keeps the plain values in
    place and appends the entries of the dicts after them)."""
    def check(key) -> None:
        if prevent_delimiter and "/" in str(key):
            raise ValueError("Found delimiter `/` in key when trying to flatten array. Please "
                             "avoid using the delimiter in your specification.")

    for key in space:
        check(key)
    flat = dict(space)
    while any(isinstance(v, dict) for v in flat.values()):
        nested = [(k, v) for k, v in flat.items() if isinstance(v, dict)]
        flat = {k: v for k, v in flat.items() if not isinstance(v, dict)}
        for key, value in nested:
            for sub, item in value.items():
                check(sub)
                flat[f"{key}/{sub}"] = item
    return flat


def unflatten(flat: dict) -> dict:
    out: dict = {}
    for key, value in flat.items():
        *parents, last = key.split("/")
        node = out
        for parent in parents:
            node = node.setdefault(parent, {})
            if not isinstance(node, dict):
                raise TypeError(f"Cannot unflatten dict due the key '{key}' having a parent "
                                f"key '{parent}', which value is not of type {dict} (got "
                                f"{type(node)}). Change the key names to resolve the "
                                "conflict.")
        node[last] = value
    return out


def _ray_sampler_name(domain: Domain) -> str:
    """The class name Ray's error gives for a domain's sampler."""
    if isinstance(domain, Float) and getattr(domain, "normal", None) is not None:
        return "Quantized" if domain.q is not None else "_Normal"
    return "NoneType"  # a Function (and any other domain) has no sampler in Ray's sense


def _distribution(domain: Domain):
    quantize = getattr(domain, "q", None)
    log = getattr(domain, "log", False)
    if quantize is not None and log:
        logger.warning("Optuna does not handle quantization in loguniform sampling. The "
                       "parameter will be passed but it will probably be ignored.")
    if isinstance(domain, Float) and domain.normal is None:
        if log:
            if quantize is not None:
                logger.warning("Optuna does not support both quantization and sampling from "
                               "LogUniform. Dropped quantization.")
            return ot.distributions.FloatDistribution(domain.lower, domain.upper, log=True)
        return ot.distributions.FloatDistribution(domain.lower, domain.upper, step=quantize)
    if isinstance(domain, Integer):
        step = quantize or 1
        if log:
            return ot.distributions.IntDistribution(domain.lower, domain.upper - 1, step=step,
                                                    log=True)
        # the upper bound is included when quantized, excluded otherwise
        top = domain.upper if quantize is not None else domain.upper - 1
        return ot.distributions.IntDistribution(domain.lower, top, step=step)
    if isinstance(domain, Categorical):
        return ot.distributions.CategoricalDistribution(domain.categories)
    raise ValueError("Optuna search does not support parameters of type "
                     f"`{type(domain).__name__}` with samplers of type "
                     f"`{_ray_sampler_name(domain)}`")


def convert_search_space(spec: dict) -> dict:
    """reference.tune domains to Optuna distributions by flat name ({} when none)."""
    has_domains, has_grids = _unresolved(spec)
    if not has_domains and not has_grids:
        return {}
    if has_grids:
        raise ValueError("Grid search parameters cannot be automatically converted to an "
                         "Optuna search space.")
    out = {}
    for name, value in flatten(spec, prevent_delimiter=True).items():
        if isinstance(value, Domain):
            out[name] = _distribution(value)
        elif isinstance(value, (list, tuple)) and _unresolved(value)[0]:
            raise TypeError(f"OptunaSearch: `{name}` holds a domain inside a list; Optuna names "
                            "parameters by flat keys, so put the domain in a dict instead.")
    return out


# --------------------------------------------------------------------- warm starting
def _validate_warmstart(space, points: list, rewards: list | None, check_lengths: bool):
    if not isinstance(points, list):
        raise TypeError(f"points_to_evaluate expected to be a list, got {type(points)}.")
    for point in points:
        if not isinstance(point, (dict, list)):
            raise TypeError(f"points_to_evaluate expected to include list or dict, got "
                            f"{point}.")
        if check_lengths and len(point) != len(space):
            raise ValueError(f"Dim of point {point} and parameter_names {space} do not match.")
    if rewards:
        if not isinstance(rewards, list):
            raise TypeError(f"evaluated_rewards expected to be a list, got {type(rewards)}.")
        if len(rewards) != len(points):
            raise ValueError(f"Dim of evaluated_rewards {rewards} and points_to_evaluate "
                             f"{points} do not match.")


class _SuggestCaptor:
    """An Optuna trial whose `suggest_*` calls record name -> value."""

    def __init__(self, trial):
        self._trial = trial
        self.captured: dict[str, Any] = {}

    def __getattr__(self, attr: str):
        item = getattr(self._trial, attr)
        if not (attr.startswith("suggest_") and callable(item)):
            return item

        def capture(*args, **kwargs):
            bound = inspect.signature(item).bind_partial(*args, **kwargs)
            if "name" not in bound.arguments:
                raise ValueError("missing required argument: name")
            value = item(*args, **kwargs)
            self.captured[bound.arguments["name"]] = value
            return value

        return capture


def _run_define_by_run(func: Callable, trial) -> dict:
    captor = _SuggestCaptor(trial)
    start = time.time()
    constants = func(captor)
    took = time.time() - start
    if took > DEFINE_BY_RUN_WARN_THRESHOLD_S:
        warnings.warn(f"Define-by-run function passed in the `space` argument took {took} "
                      "seconds to run. Ensure that actual computation, training takes place "
                      "inside Tune's train functions or Trainables passed to `tune.Tuner()`.",
                      stacklevel=3)
    if constants is None:
        return captor.captured
    if not isinstance(constants, dict):
        raise TypeError("The return value of the define-by-run function passed in the `space` "
                        "argument should be either None or a `dict` with `str` keys. Got "
                        f"{type(constants)}.")
    if not all(isinstance(k, str) for k in constants):
        raise TypeError("At least one of the keys in the dict returned by the define-by-run "
                        "function passed in the `space` argument was not a `str`.")
    return {**captor.captured, **constants}


# ------------------------------------------------------------------------ the searcher
class OptunaSearch(Searcher):
    def __init__(self, space: dict | list | Callable | None = None,
                 metric: str | list | None = None, mode: str | list | None = None,
                 points_to_evaluate: list[dict] | None = None, sampler=None,
                 study_name: str | None = None, storage=None, seed: int | None = None,
                 evaluated_rewards: list | None = None):
        if ot is None:
            raise AssertionError("Optuna must be installed! Run `pip install optuna`.")
        if int(ot.__version__.split(".")[0]) < 3:
            raise ImportError("`OptunaSearch` requires the `optuna` version to be >= 3.0.0. "
                              'Upgrade with: `pip install -U "optuna>=3.0"`')
        super().__init__(metric=metric, mode=mode)
        if isinstance(space, dict) and space:
            if any(_unresolved(space)):
                logger.warning(UNRESOLVED_SEARCH_SPACE.format(par="space", cls="OptunaSearch"))
                space = convert_search_space(space)
            else:
                space = flatten(space)
        self._space = space
        self._points_to_evaluate = points_to_evaluate or []
        self._evaluated_rewards = evaluated_rewards
        self._study_name = study_name or "optuna"  # fixed for in-memory storage, as Ray's
        if sampler and seed:
            logger.warning("You passed an initialized sampler to `OptunaSearch`. The `seed` "
                           "parameter has to be passed to the sampler directly and will be "
                           "ignored.")
        elif sampler and not isinstance(sampler, ot.samplers.BaseSampler):
            raise AssertionError("You can only pass an instance of "
                                 "`optuna.samplers.BaseSampler` as a sampler to "
                                 "`OptunaSearcher`.")
        if storage and not isinstance(storage, ot.storages.BaseStorage):
            raise AssertionError("The `storage` parameter in `OptunaSearcher` must be an "
                                 "instance of `optuna.storages.BaseStorage`.")
        self._sampler = sampler
        self._seed = seed
        self._storage = storage
        self._completed_trials: set[str] = set()
        self._ot_trials: dict[str, Any] = {}
        self._ot_study = None
        if self._space:
            self._setup_study(mode)

    def _setup_study(self, mode) -> None:
        if self._metric is None and self._mode:
            if isinstance(self._mode, list):
                raise ValueError("If ``mode`` is a list (multi-objective optimization case), "
                                 "``metric`` must be defined.")
            self._metric = DEFAULT_METRIC
        sampler = self._sampler or ot.samplers.TPESampler(seed=self._seed)
        if isinstance(mode, list):
            directions = {"directions": ["minimize" if m == "min" else "maximize" for m in mode]}
        else:
            directions = {"direction": "minimize" if mode == "min" else "maximize"}
        self._ot_study = ot.study.create_study(
            storage=self._storage, sampler=sampler, pruner=ot.pruners.NopPruner(),
            study_name=self._study_name, load_if_exists=True, **directions)
        if not self._points_to_evaluate:
            return
        _validate_warmstart(self._space, self._points_to_evaluate, self._evaluated_rewards,
                            check_lengths=not callable(self._space))
        if self._evaluated_rewards:
            for point, reward in zip(self._points_to_evaluate, self._evaluated_rewards,
                                     strict=True):
                self.add_evaluated_point(point, reward)
        else:
            for point in self._points_to_evaluate:
                self._ot_study.enqueue_trial(point)

    def set_search_properties(self, metric, mode, config: dict, **spec) -> bool:
        if self._space:
            return False
        self._space = convert_search_space(config)
        if metric:
            self._metric = metric
        if mode:
            self._mode = mode
        self._setup_study(self._mode)
        return True

    def _check_ready(self) -> None:
        if not self._space:
            raise RuntimeError(UNDEFINED_SEARCH_SPACE.format(cls="OptunaSearch", space="space"))
        if not self._metric or not self._mode:
            raise RuntimeError(UNDEFINED_METRIC_MODE.format(
                cls="OptunaSearch", metric=self._metric, mode=self._mode))

    def suggest(self, trial_id: str) -> dict | None:
        self._check_ready()
        if trial_id not in self._ot_trials:
            fixed = None if callable(self._space) else self._space
            self._ot_trials[trial_id] = self._ot_study.ask(fixed_distributions=fixed)
        trial = self._ot_trials[trial_id]
        if callable(self._space):
            return unflatten(_run_define_by_run(self._space, trial))
        return unflatten(trial.params)

    def on_trial_result(self, trial_id: str, result: dict) -> None:
        if isinstance(self.metric, list):
            return  # Optuna takes no intermediate values for several objectives
        if trial_id in self._completed_trials:
            logger.warning(f"Received additional result for trial {trial_id}, but it already "
                           f"finished. Result: {result}")
            return
        self._ot_trials[trial_id].report(result[self.metric], result[TRAINING_ITERATION])

    def on_trial_complete(self, trial_id: str, result: dict | None = None,
                          error: bool = False) -> None:
        if trial_id in self._completed_trials:
            logger.warning(f"Received additional completion for trial {trial_id}, but it "
                           f"already finished. Result: {result}")
            return
        value = None
        if result:
            value = [result.get(m) for m in self.metric] if isinstance(self.metric, list) \
                else result.get(self.metric)
        state = ot.trial.TrialState.COMPLETE
        if value is None:
            state = ot.trial.TrialState.FAIL if error else ot.trial.TrialState.PRUNED
        try:
            self._ot_study.tell(self._ot_trials[trial_id], value, state=state)
        except Exception as exc:  # e.g. a NaN or a missing objective: Ray logs and goes on
            logger.warning(exc)
        self._completed_trials.add(trial_id)

    def add_evaluated_point(self, parameters: dict, value: float, error: bool = False,
                            pruned: bool = False, intermediate_values: list | None = None):
        self._check_ready()
        if callable(self._space):
            raise TypeError("Define-by-run function passed in `space` argument is not yet "
                            "supported when using `evaluated_rewards`. Please provide an "
                            "`OptunaDistribution` dict or pass a Ray Tune search space to "
                            "`tune.Tuner()`.")
        state = ot.trial.TrialState.FAIL if error else \
            ot.trial.TrialState.PRUNED if pruned else ot.trial.TrialState.COMPLETE
        trial = ot.trial.create_trial(
            state=state, value=None if error else value, params=parameters,
            distributions=self._space,
            intermediate_values=dict(enumerate(intermediate_values)) if intermediate_values
            else None)
        self._ot_study.add_trial(trial)

    def get_state(self) -> dict:
        """What Ray's `save` pickles: every attribute, the study and its sampler included (a
        define-by-run space travels too: pickle it with cloudpickle if it is a lambda)."""
        return copy.deepcopy(self.__dict__)

    def set_state(self, state: dict) -> None:
        self.__dict__.update(copy.deepcopy(state))

    def save(self, checkpoint_path: str) -> None:
        with open(checkpoint_path, "wb") as file:
            pickle.dump(self.__dict__.copy(), file)

    def restore(self, checkpoint_path: str) -> None:
        with open(checkpoint_path, "rb") as file:
            self.__dict__.update(pickle.load(file))

    convert_search_space = staticmethod(convert_search_space)
