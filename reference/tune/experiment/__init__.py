"""Trials: what the Tuner runs, and what schedulers and searchers see of them."""

from reference.tune.experiment.trial import Trial

__all__ = ["Trial"]
