"""Trial schedulers of `reference.tune`: plain objects that decide, from each result a
trial reports, whether it goes on (`CONTINUE`), waits (`PAUSE`) or stops (`STOP`), and
which waiting trial runs next (`choose_trial_to_run`)."""

from reference.tune.schedulers._asha import ASHAScheduler, AsyncHyperBandScheduler
from reference.tune.schedulers._base import FIFOScheduler, TrialScheduler
from reference.tune.schedulers._hyperband import HyperBandScheduler
from reference.tune.schedulers._median import MedianStoppingRule
from reference.tune.schedulers._pbt import PopulationBasedTraining

__all__ = ["ASHAScheduler", "AsyncHyperBandScheduler", "FIFOScheduler", "HyperBandScheduler",
           "MedianStoppingRule", "PopulationBasedTraining", "TrialScheduler"]

#: Ray's names for `create_scheduler`; None: a scheduler the reference does not have
SCHEDULER_NAMES = {
    "fifo": FIFOScheduler, "async_hyperband": AsyncHyperBandScheduler,
    "asynchyperband": AsyncHyperBandScheduler, "median_stopping_rule": MedianStoppingRule,
    "medianstopping": MedianStoppingRule, "hyperband": HyperBandScheduler, "hb_bohb": None,
    "pbt": PopulationBasedTraining, "pbt_replay": None, "pb2": None, "resource_changing": None,
}


def create_scheduler(scheduler: str, **kwargs) -> TrialScheduler:
    """The scheduler Ray calls `scheduler` (e.g. "async_hyperband"), built with `kwargs`."""
    name = scheduler.lower()
    if name not in SCHEDULER_NAMES:
        raise ValueError(f"The `scheduler` argument must be one of {list(SCHEDULER_NAMES)}. "
                         f"Got: {name}")
    cls = SCHEDULER_NAMES[name]
    if cls is None:
        supported = [k for k, v in SCHEDULER_NAMES.items() if v is not None]
        raise NotImplementedError(f"create_scheduler({scheduler!r}): the reference has no "
                                  f"such scheduler; it has {supported}.")
    return cls(**kwargs)


__all__ += ["create_scheduler"]
