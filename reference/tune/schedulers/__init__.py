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
