"""The reference implementation of ``ray.tune``: `Tuner` runs a function trainable once per
config of a search space, each trial in its own process on the cluster, with Ray 2.60's
search spaces, schedulers (`reference.tune.schedulers`), search algorithms
(`reference.tune.search`), `ResultGrid`, `Tuner.restore` and the Train interop
(`reference.tune.integration.ray_train.TuneReportCallback`)."""

from reference.train import Checkpoint as _TrainCheckpoint
from reference.tune._config import CheckpointConfig, FailureConfig, RunConfig
from reference.tune._session import TuneContext, get_checkpoint, get_context, report
from reference.tune._tune_config import TuneConfig
from reference.tune.callback import Callback
from reference.tune.error import TuneError
from reference.tune.result import Result
from reference.tune.result_grid import ResultGrid
from reference.tune.schedulers import create_scheduler
from reference.tune.search import create_searcher
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
from reference.tune.stopper import Stopper
from reference.tune.trainable import (
    PlacementGroupFactory,
    Trainable,
    with_parameters,
    with_resources,
)
from reference.tune.tuner import Tuner


class Checkpoint(_TrainCheckpoint):
    """`tune.Checkpoint`: the Train Checkpoint under Tune's name (a folder on storage)."""


__all__ = [
    "Callback",
    "Checkpoint",
    "CheckpointConfig",
    "FailureConfig",
    "PlacementGroupFactory",
    "Result",
    "ResultGrid",
    "RunConfig",
    "Stopper",
    "Trainable",
    "TuneConfig",
    "TuneContext",
    "TuneError",
    "Tuner",
    "choice",
    "create_scheduler",
    "create_searcher",
    "get_checkpoint",
    "get_context",
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
    "report",
    "sample_from",
    "uniform",
    "with_parameters",
    "with_resources",
]
