"""The reference implementation of ``ray.tune``, being built: so far its search spaces
(`uniform`, `choice`, `grid_search`, `sample_from`, ...), the variant generation that turns
a param_space into trial configs in Ray's order (`reference.tune.search`), the schedulers
(`reference.tune.schedulers`) and `TuneConfig`."""

from reference.tune._tune_config import TuneConfig
from reference.tune.search.sample import (
    choice,
    grid_search,
    lograndint,
    loguniform,
    qlograndint,
    qloguniform,
    qrandint,
    qrandn,
    quniform,
    randint,
    randn,
    sample_from,
    uniform,
)

__all__ = [
    "TuneConfig",
    "choice",
    "grid_search",
    "lograndint",
    "loguniform",
    "qlograndint",
    "qloguniform",
    "qrandint",
    "qrandn",
    "quniform",
    "randint",
    "randn",
    "sample_from",
    "uniform",
]
