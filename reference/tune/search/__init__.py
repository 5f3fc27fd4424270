"""Search spaces and search algorithms of `reference.tune` (Ray's `ray.tune.search`).

`Searcher` is what users subclass (suggest a config per trial id); `SearchAlgorithm` is
what the Tuner's controller drives: `BasicVariantGenerator` (random and grid search, the
default) or `SearchGenerator(searcher)`. `ConcurrencyLimiter` and `Repeater` wrap a
searcher; `OptunaSearch` lives in `reference.tune.search.optuna`; `create_searcher(name)`
builds one by Ray's name. The order of the controller's calls is in `searcher`'s docstring.
"""

from reference.tune.search.basic_variant import BasicVariantGenerator
from reference.tune.search.concurrency_limiter import ConcurrencyLimiter
from reference.tune.search.repeater import Repeater
from reference.tune.search.sample import grid_search
from reference.tune.search.search_generator import (
    SearchGenerator,
    create_searcher,
    prepare_search_alg,
)
from reference.tune.search.searcher import (
    UNDEFINED_METRIC_MODE,
    UNDEFINED_SEARCH_SPACE,
    UNRESOLVED_SEARCH_SPACE,
    SearchAlgorithm,
    Searcher,
)

__all__ = [
    "UNDEFINED_METRIC_MODE",
    "UNDEFINED_SEARCH_SPACE",
    "UNRESOLVED_SEARCH_SPACE",
    "BasicVariantGenerator",
    "ConcurrencyLimiter",
    "Repeater",
    "SearchAlgorithm",
    "SearchGenerator",
    "Searcher",
    "create_searcher",
    "grid_search",
    "prepare_search_alg",
]
