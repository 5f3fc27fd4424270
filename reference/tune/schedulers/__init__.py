"""Trial schedulers of `reference.tune`: plain objects that decide, from each result a
trial reports, whether it goes on (`CONTINUE`) or stops (`STOP`)."""

from reference.tune.schedulers._asha import ASHAScheduler, AsyncHyperBandScheduler
from reference.tune.schedulers._base import FIFOScheduler, TrialScheduler
from reference.tune.schedulers._median import MedianStoppingRule

__all__ = ["ASHAScheduler", "AsyncHyperBandScheduler", "FIFOScheduler", "MedianStoppingRule",
           "TrialScheduler"]
