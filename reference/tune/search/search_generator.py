"""`SearchGenerator` (a `Searcher` as the controller's search algorithm), `create_searcher`
(a search algorithm by name) and `prepare_search_alg` (Ray's reading of
`TuneConfig(search_alg=..., max_concurrent_trials=...)`).

A searcher's suggestion is merged into the param_space as Ray merges it: a deep copy of the
space, updated key by key (dicts into dicts, anything else replaced). Entries the searcher
does not suggest stay as the space has them: constants as they are, and a domain the
searcher ignored stays a domain (Ray resolves nothing here: a searcher that took the space
suggests every domain of it).
"""

from __future__ import annotations

import copy
import inspect
import logging
import os
import tempfile

from reference.tune.search.basic_variant import BasicVariantGenerator, num_samples_or_unbounded
from reference.tune.search.concurrency_limiter import ConcurrencyLimiter
from reference.tune.search.repeater import warn_num_samples
from reference.tune.search.sample import Domain
from reference.tune.search.searcher import SearchAlgorithm, Searcher

logger = logging.getLogger(__name__)


def _merge(space: dict, suggestion: dict) -> dict:
    merged = copy.deepcopy(space)

    def update(into: dict, new: dict) -> None:
        for key, value in new.items():
            if isinstance(into.get(key), dict) and isinstance(value, dict):
                update(into[key], value)
            else:
                into[key] = value

    update(merged, copy.deepcopy(suggestion))
    return merged


class SearchGenerator(SearchAlgorithm):
    def __init__(self, searcher: Searcher):
        if not isinstance(searcher, Searcher):
            raise AssertionError("Searcher should be subclassing Searcher.")
        self.searcher = searcher
        self._param_space: dict | None = None
        self._counter = 0  # configs handed out
        self._total_samples = 0
        self._finished = False

    @property
    def metric(self):
        return self.searcher.metric

    @property
    def total_samples(self) -> int:
        return self._total_samples

    def set_search_properties(self, metric, mode, config: dict, **spec) -> bool:
        return self.searcher.set_search_properties(metric, mode, config, **spec)

    def add_configurations(self, param_space: dict, num_samples: int = 1) -> None:
        if self._param_space is not None:
            raise AssertionError("SearchAlgorithms can only support 1 experiment at a time.")
        if not isinstance(param_space, dict):
            raise ValueError("The `param_space` passed to `Tuner(...)` must be a dict. Got "
                             f"'{type(param_space)}' instead.")
        self._param_space = copy.deepcopy(param_space)
        self._total_samples = num_samples_or_unbounded(num_samples)
        warn_num_samples(self.searcher, self._total_samples)

    def next_config(self, trial_id: str) -> dict | None:
        if self.is_finished():
            return None
        suggestion = self.searcher.suggest(trial_id)
        if suggestion == Searcher.FINISHED:
            self._finished = True
            return None
        if suggestion is None:
            return None
        self._counter += 1
        return _merge(self._param_space, suggestion)

    def on_trial_result(self, trial_id: str, result: dict) -> None:
        self.searcher.on_trial_result(trial_id, result)

    def on_trial_complete(self, trial_id: str, result: dict | None = None,
                          error: bool = False) -> None:
        self.searcher.on_trial_complete(trial_id=trial_id, result=result, error=error)

    def is_finished(self) -> bool:
        return self._counter >= self._total_samples or self._finished

    def _chain(self) -> list:
        """The searchers from the outermost wrapper to the base searcher."""
        chain = [self.searcher]
        while hasattr(chain[-1], "searcher"):
            chain.append(chain[-1].searcher)
        return chain

    def get_state(self) -> dict:
        """This generator's counts, each wrapper's state and the base searcher's: its
        `get_state()`, or else the bytes its `save(path)` wrote (None when it has neither,
        as Ray then skips saving it)."""
        *wrappers, base = self._chain()
        return {"counter": self._counter, "total_samples": self._total_samples,
                "finished": self._finished, "param_space": copy.deepcopy(self._param_space),
                "wrappers": [(type(w).__name__, w.get_state()) for w in wrappers],
                "searcher": _base_state(base)}

    def set_state(self, state: dict) -> None:
        *wrappers, base = self._chain()
        saved = dict(state["wrappers"])
        for wrapper in wrappers:
            name = type(wrapper).__name__
            if name in saved:
                wrapper.set_state(saved[name])
            else:
                logger.warning(f"{name} was not found in the experiment state when restoring. "
                               f"Found {list(saved)}.")
        _restore_base(base, state["searcher"])
        self._counter = state["counter"]
        self._total_samples = state["total_samples"]
        self._finished = state["finished"]
        self._param_space = copy.deepcopy(state["param_space"])


def _base_state(searcher: Searcher) -> dict | None:
    try:
        return {"state": searcher.get_state()}
    except NotImplementedError:
        pass
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "searcher-state.pkl")
        try:
            searcher.save(path)
        except NotImplementedError:
            logger.warning("save not implemented for Searcher. Skipping save.")
            return None
        with open(path, "rb") as file:
            return {"saved": file.read()}


def _restore_base(searcher: Searcher, saved: dict | None) -> None:
    if saved is None:
        return
    if "state" in saved:
        searcher.set_state(saved["state"])
        return
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "searcher-state.pkl")
        with open(path, "wb") as file:
            file.write(saved["saved"])
        searcher.restore(path)


# -------------------------------------------------------------------------- by name
#: Ray's names (ray.tune.search.SEARCH_ALG_IMPORT), in Ray's order
SEARCH_ALG_NAMES = ("variant_generator", "random", "ax", "hyperopt", "bayesopt", "bohb",
                    "nevergrad", "optuna", "zoopt", "hebo")


def _searcher_class(name: str):
    if name in ("variant_generator", "random"):
        return BasicVariantGenerator
    if name == "optuna":
        from reference.tune.search.optuna import OptunaSearch

        return OptunaSearch
    raise NotImplementedError(
        f"create_searcher({name!r}): reference.tune implements 'variant_generator', 'random' "
        "and 'optuna' of Ray's search algorithms; pass a Searcher of your own as "
        "TuneConfig(search_alg=...) instead.")


def create_searcher(search_alg: str, **kwargs):
    """The search algorithm Ray calls `search_alg`, given the kwargs its constructor takes
    (the others are dropped, as Ray drops them)."""
    search_alg = search_alg.lower()
    if search_alg not in SEARCH_ALG_NAMES:
        raise ValueError(f"The `search_alg` argument must be one of {list(SEARCH_ALG_NAMES)}. "
                         f"Got: {search_alg}")
    cls = _searcher_class(search_alg)
    accepted = inspect.signature(cls).parameters
    return cls(**{k: v for k, v in kwargs.items() if k in accepted})


# ------------------------------------------------------------- TuneConfig -> algorithm
def _has_domains(space) -> bool:
    if isinstance(space, Domain):
        return True
    if isinstance(space, dict):
        return set(space) == {"grid_search"} or any(_has_domains(v) for v in space.values())
    if isinstance(space, (list, tuple)):
        return any(_has_domains(v) for v in space)
    return False


def prepare_search_alg(search_alg, *, metric: str | None, mode: str | None, param_space: dict,
                       max_concurrent_trials: int | None = None) -> SearchAlgorithm:
    """What Ray's Tuner makes of `TuneConfig.search_alg`: a name -> `create_searcher`;
    None -> `BasicVariantGenerator(max_concurrent=max_concurrent_trials or 0)`; a Searcher
    -> (in a `ConcurrencyLimiter` when max_concurrent_trials is set) a `SearchGenerator`.
    Then metric, mode and a non-empty param_space go to `set_search_properties`; when the
    algorithm refuses them while param_space still holds domains, Ray's ValueError."""
    if isinstance(search_alg, str):
        search_alg = create_searcher(search_alg)
    if not search_alg:
        search_alg = BasicVariantGenerator(max_concurrent=max_concurrent_trials or 0)
    elif max_concurrent_trials:
        if isinstance(search_alg, ConcurrencyLimiter):
            if search_alg.max_concurrent != max_concurrent_trials:
                raise ValueError(
                    f"You have specified `max_concurrent_trials={max_concurrent_trials}`, but "
                    "the `search_alg` is already a `ConcurrencyLimiter` with `max_concurrent="
                    f"{search_alg.max_concurrent}. FIX THIS by setting "
                    "`max_concurrent_trials=None`.")
            logger.warning(f"You have specified `max_concurrent_trials={max_concurrent_trials}`"
                           ", but the `search_alg` is already a `ConcurrencyLimiter`. "
                           "`max_concurrent_trials` will be ignored.")
        elif max_concurrent_trials < 1:
            raise ValueError("`max_concurrent_trials` must be greater or equal than 1, got "
                             f"{max_concurrent_trials}.")
        elif isinstance(search_alg, Searcher):
            search_alg = ConcurrencyLimiter(search_alg, max_concurrent=max_concurrent_trials)
        else:
            logger.warning("You have passed a `SearchGenerator` instance as the `search_alg`, "
                           "but `max_concurrent_trials` requires a `Searcher` instance`. "
                           "`max_concurrent_trials` will be ignored.")
    if isinstance(search_alg, Searcher):
        search_alg = SearchGenerator(search_alg)
    if not isinstance(search_alg, SearchAlgorithm):
        raise TypeError(f"TuneConfig(search_alg={search_alg!r}): expected a Searcher (e.g. "
                        "OptunaSearch()), a SearchAlgorithm (e.g. BasicVariantGenerator()), "
                        f"one of the names {list(SEARCH_ALG_NAMES)}, or None.")
    if param_space and not search_alg.set_search_properties(metric, mode, param_space) \
            and _has_domains(param_space):
        raise ValueError(
            "You passed a `param_space` parameter to `Tuner(...)` with unresolved parameters, "
            "but the search algorithm was already instantiated with a search space. Make sure "
            "that `config` does not contain any more parameter definitions - include them in "
            "the search algorithm's search space if necessary.")
    return search_alg
