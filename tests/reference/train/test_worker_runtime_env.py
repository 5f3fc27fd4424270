"""RunConfig(worker_runtime_env={"env_vars": ...}) reaches every worker from its start."""

from __future__ import annotations

import os

import pytest

import reference.train as train


def read_env(config):
    return os.environ.get("TRAINSPEC_FROM_RUNTIME_ENV"), os.environ.get("OMP_NUM_THREADS")


@pytest.mark.slow
def test_env_vars_are_set_on_every_worker(tmp_path):
    result = train.DataParallelTrainer(
        read_env, scaling_config=train.ScalingConfig(num_workers=2),
        run_config=train.RunConfig(storage_path=str(tmp_path), worker_runtime_env={
            "env_vars": {"TRAINSPEC_FROM_RUNTIME_ENV": "yes", "OMP_NUM_THREADS": "7"}})).fit()
    # as on Ray, OMP_NUM_THREADS is set from the worker's CPUs only when the user did not
    assert result.return_value == ("yes", "7")


@pytest.mark.parametrize("runtime_env, error, message", [
    ({"pip": ["x"]}, ValueError, "supports only \\('env_vars',\\), not \\['pip'\\]"),
    ({"env_vars": {"A": 1}}, TypeError, "env_vars must map names to string values"),
])
def test_what_the_reference_cannot_honour_fails_before_the_run(tmp_path, runtime_env, error,
                                                               message):
    trainer = train.DataParallelTrainer(
        read_env, scaling_config=train.ScalingConfig(num_workers=1),
        run_config=train.RunConfig(storage_path=str(tmp_path), worker_runtime_env=runtime_env))
    with pytest.raises(error, match=message):
        trainer.fit()
    assert not list(tmp_path.iterdir())  # nothing of the run was created
