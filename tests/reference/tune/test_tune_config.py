"""TuneConfig: Ray 2.60's signature, and bad values named."""

from __future__ import annotations

import datetime
import inspect

import pytest

import reference.tune as tune
from reference.tune.schedulers import ASHAScheduler


def test_signature_is_rays():
    ray_tune = pytest.importorskip("ray.tune")

    def params(cls):
        return [(p.name, p.kind, p.default) for p in inspect.signature(cls).parameters.values()]

    assert params(tune.TuneConfig) == params(ray_tune.TuneConfig)


def test_defaults_and_a_timedelta_budget():
    config = tune.TuneConfig(metric="loss", mode="min", scheduler=ASHAScheduler(),
                             time_budget_s=datetime.timedelta(minutes=2))
    assert (config.num_samples, config.max_concurrent_trials, config.time_budget_s) == \
        (1, None, 120.0)


@pytest.mark.parametrize("kwargs, error, message", [
    ({"num_samples": 0}, ValueError, "num_samples=0"),
    ({"max_concurrent_trials": -1}, ValueError, "max_concurrent_trials=-1"),
    ({"scheduler": "asha"}, TypeError, "scheduler='asha'"),
    ({"time_budget_s": -1}, ValueError, "time_budget_s=-1"),
    ({"chdir_to_trial_dir": True}, DeprecationWarning, "chdir_to_trial_dir"),
])
def test_bad_values_are_named(kwargs, error, message):
    with pytest.raises(error, match=message):
        tune.TuneConfig(**kwargs)
