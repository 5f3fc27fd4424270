"""reference.tune's public names against ray.tune 2.60's `__all__`."""

import pytest

import reference.tune as tune

#: ray.tune names the reference does not offer, and why (docs/tune.md)
NOT_OFFERED = {
    "CLIReporter": "progress is the reference's own table / lines (RunConfig(verbose=...))",
    "JupyterNotebookReporter": "as CLIReporter",
    "ProgressReporter": "as CLIReporter",
    "Experiment": "the legacy tune.run API",
    "ExperimentAnalysis": "the legacy tune.run API; ResultGrid covers it",
    "run": "the legacy tune.run API; use Tuner",
    "run_experiments": "the legacy tune.run API; use Tuner",
    "register_env": "RLlib environments",
    "register_trainable": "registered trainable names; pass the function",
    "ResumeConfig": "Tuner.restore's flags cover resuming",
    "SyncConfig": "storage is a local path; nothing to sync",
}


def test_every_exported_name_exists():
    for name in tune.__all__:
        assert hasattr(tune, name), name


def test_names_match_ray_tune_except_the_listed_ones():
    ray_tune = pytest.importorskip("ray.tune")
    ours, theirs = set(tune.__all__), set(ray_tune.__all__)
    assert theirs - ours == set(NOT_OFFERED)
    assert ours - theirs == set()


def test_create_scheduler_and_searcher_by_ray_names():
    from reference.tune.schedulers import ASHAScheduler, PopulationBasedTraining
    from reference.tune.search import BasicVariantGenerator

    asha = tune.create_scheduler("async_hyperband", metric="loss", mode="min", max_t=9)
    assert isinstance(asha, ASHAScheduler)
    pbt = tune.create_scheduler("PBT", hyperparam_mutations={"lr": [0.1, 0.2]})
    assert isinstance(pbt, PopulationBasedTraining)
    with pytest.raises(ValueError, match="The `scheduler` argument must be one of"):
        tune.create_scheduler("nope")
    with pytest.raises(NotImplementedError, match="no such scheduler"):
        tune.create_scheduler("pb2")
    assert isinstance(tune.create_searcher("variant_generator"), BasicVariantGenerator)
