"""The reference implementation of ``ray.tune``, being built: so far its search spaces
(`uniform`, `choice`, `grid_search`, `sample_from`, ...) and the variant generation that
turns a param_space into trial configs in Ray's order (`reference.tune.search`)."""

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
