"""ScalingConfig values that can never be placed: taken at construction (as Ray 2.60 takes
them), refused by fit() before the run starts, with a ControllerError naming the field
(reference/train/_internal/controller/scaling_check.py); a refused placement's message
stays short however many workers were asked for."""

from __future__ import annotations

import math

import pytest

import reference
import reference.train as train
from reference.train import ControllerError, ScalingConfig

BAD = [
    ({"resources_per_worker": {"CPU": math.nan}}, "resources_per_worker", "finite"),
    ({"resources_per_worker": {"CPU": math.inf}}, "resources_per_worker", "finite"),
    ({"resources_per_worker": {"CPU": -1}}, "resources_per_worker", ">= 0"),
    ({"resources_per_worker": {"CPU": True}}, "resources_per_worker", "bool"),
    ({"resources_per_worker": {"": 1}}, "resources_per_worker", "non-empty strings"),
    ({"resources_per_worker": {1: 1}}, "resources_per_worker", "non-empty strings"),
    ({"resources_per_worker": {"GPU": 1.5}, "use_gpu": True}, "resources_per_worker",
     "whole number"),
    ({"placement_strategy": "BAD"}, "placement_strategy", "'STRICT_SPREAD'"),
    ({"placement_strategy": "spread"}, "placement_strategy", "did you mean 'SPREAD'"),
    ({"use_gpu": "yes"}, "use_gpu", "True or False"),
]


def _never_called(config):
    raise AssertionError("the training function ran with a ScalingConfig fit() must refuse")


@pytest.mark.parametrize(("settings", "field", "allowed"), BAD,
                         ids=[f"{f}={list(s.values())[0]!r}" for s, f, _ in BAD])
def test_fit_refuses_what_construction_took_naming_the_field(tmp_path, settings, field,
                                                             allowed):
    config = ScalingConfig(num_workers=2, **settings)  # accepted, as in Ray
    trainer = train.DataParallelTrainer(
        _never_called, scaling_config=config,
        run_config=train.RunConfig(storage_path=str(tmp_path / "store"), name="run"))
    with pytest.raises(ControllerError) as info:
        trainer.fit()
    message = str(info.value)
    assert f"ScalingConfig({field}=" in message and allowed in message, message
    assert "bundles[" not in message, message
    assert isinstance(info.value.controller_failure, ValueError)
    assert not (tmp_path / "store").exists(), "the run folder was made for a refused config"


@pytest.mark.slow
def test_a_refused_placement_of_a_million_workers_has_a_short_message(tmp_path):
    reference.shutdown()
    reference.init(num_cpus=2)
    try:
        trainer = train.DataParallelTrainer(
            _never_called, scaling_config=ScalingConfig(num_workers=10**6),
            run_config=train.RunConfig(storage_path=str(tmp_path / "store"), name="run"))
        with pytest.raises(ControllerError) as info:
            trainer.fit()
    finally:
        reference.shutdown()
    message = str(info.value)
    assert len(message) < 1000, f"{len(message)} characters: {message[:300]}..."
    assert "[{'CPU': 1}] * 1000000" in message, message
