"""ScalingConfig, RunConfig, FailureConfig, CheckpointConfig, LoggingConfig."""

from __future__ import annotations

import dataclasses
import os
import pathlib
import re

import pyarrow.fs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from reference.train import (
    CheckpointConfig,
    FailureConfig,
    LoggingConfig,
    RunConfig,
    ScalingConfig,
    UserCallback,
)

# ---------------------------------------------------------------------------- ScalingConfig

SCALING_ERRORS = [
    ({"trainer_resources": {"CPU": 1}}, DeprecationWarning),
    ({"trainer_resources": {}}, DeprecationWarning),
    ({"num_workers": 2.0}, ValueError),
    ({"num_workers": [1, 2]}, ValueError),
    ({"num_workers": (1, 2, 3)}, ValueError),
    ({"num_workers": None}, ValueError),
    ({"num_workers": -1}, ValueError),
    ({"num_workers": (-1, 2)}, ValueError),
    ({"num_workers": (4, 1)}, ValueError),
    ({"elastic_resize_monitor_interval_s": -1}, ValueError),
    ({"use_gpu": True, "use_tpu": True}, ValueError),
    ({"resources_per_worker": {"TPU": 1}}, ValueError),
    ({"use_tpu": True, "resources_per_worker": {"TPU": 0}}, ValueError),
    ({"use_tpu": True, "resources_per_worker": {"CPU": 1}}, ValueError),
    ({"use_tpu": True, "num_workers": 2}, ValueError),
    ({"use_tpu": True, "num_workers": 2, "topology": "4x4"}, ValueError),
    ({"use_tpu": True, "num_workers": 4, "topology": "4x4", "accelerator_type": "TPU-V6E",
      "label_selector": {"a": "b"}}, ValueError),
    ({"use_tpu": True, "num_workers": 4, "topology": "4y4", "accelerator_type": "TPU-V6E"},
     ValueError),
    ({"use_tpu": True, "num_workers": 6, "topology": "4x4", "accelerator_type": "TPU-V6E"},
     ValueError),
    ({"use_tpu": True, "num_workers": (2, 8), "topology": "4x4", "accelerator_type": "TPU-V6E"},
     ValueError),
    ({"num_workers": 2, "label_selector": [{"a": "b"}]}, ValueError),
    ({"resources_per_worker": {"GPU": 1}}, ValueError),
    ({"resources_per_worker": {"GPU": "1"}}, TypeError),
]


@pytest.mark.parametrize("kwargs, exc_type", SCALING_ERRORS)
def test_scaling_config_rejects(kwargs, exc_type):
    with pytest.raises(exc_type) as info:
        ScalingConfig(**kwargs)
    assert type(info.value) is exc_type


@pytest.mark.parametrize("amount", ["1", "0.5", "one", b"1", [1], None])
def test_resource_amounts_must_be_numbers(amount):
    # Ray 2.60 takes these at construction and fails to place the workers in fit().
    with pytest.raises(ValueError, match=r"resources_per_worker=.*values must be numbers; "
                                         r"got CPU=") as info:
        ScalingConfig(num_workers=2, resources_per_worker={"CPU": amount})
    assert type(amount).__name__ in str(info.value)


def test_numeric_string_amount_suggests_the_number():
    with pytest.raises(ValueError, match=r"e\.g\. resources_per_worker=\{'CPU': 1\.0\}"):
        ScalingConfig(resources_per_worker={"CPU": "1"})


@pytest.mark.parametrize("amount", [1, 0.5, True, 1e9])
def test_numeric_resource_amounts_are_accepted(amount):
    assert ScalingConfig(resources_per_worker={"CPU": amount}).num_cpus_per_worker == amount


@pytest.mark.parametrize("kwargs", [
    {"num_workers": True},  # bool is an int
    {"use_gpu": True, "resources_per_worker": {"GPU": 0}},  # GPU falls back to 1
    {"placement_strategy": "BOGUS"},  # checked only when workers are placed
    {"num_workers": 0},
    {"num_workers": (0, 0)},
    {"num_workers": 2, "label_selector": [{"a": "b"}, {"c": "d"}]},
    {"num_workers": 1, "use_tpu": True},
    {"num_workers": 8, "use_tpu": True, "topology": "4x4", "accelerator_type": "TPU-V6E"},
])
def test_scaling_config_accepts_ray_quirks(kwargs):
    config = ScalingConfig(**kwargs)
    for name, value in kwargs.items():
        if name != "resources_per_worker":
            assert getattr(config, name) == value


def test_field_order_and_defaults():
    fields = [(f.name, f.default) for f in dataclasses.fields(ScalingConfig)]
    assert fields == [
        ("trainer_resources", None), ("num_workers", 1), ("use_gpu", False),
        ("resources_per_worker", None), ("placement_strategy", "PACK"),
        ("accelerator_type", None), ("label_selector", None), ("use_tpu", False),
        ("topology", None), ("elastic_resize_monitor_interval_s", 60.0),
    ]
    assert ScalingConfig(None, 3).num_workers == 3


def test_tpu_fills_in_resources_per_worker():
    config = ScalingConfig(num_workers=4, use_tpu=True, topology="4x4",
                           accelerator_type="TPU-V6E")
    assert config.resources_per_worker == {"CPU": 1, "TPU": 4}
    assert config.num_tpus_per_worker == 4
    assert config.total_resources == {"CPU": 4.0, "TPU": 16.0, "accelerator_type:TPU-V6E": 0.004}


@pytest.mark.parametrize("kwargs, per_worker", [
    ({}, {"CPU": 1}),
    ({"use_gpu": True}, {"GPU": 1}),
    ({"use_tpu": True}, {"TPU": 1}),
    ({"use_gpu": True, "resources_per_worker": {"CPU": 2}}, {"CPU": 2, "GPU": 1}),
    ({"resources_per_worker": {}}, {}),
    ({"resources_per_worker": {"CPU": 0, "memory": 1e9}}, {"memory": 1e9}),
    ({"accelerator_type": "A100"}, {"CPU": 1, "accelerator_type:A100": 0.001}),
])
def test_resources_per_worker_not_none(kwargs, per_worker):
    assert ScalingConfig(**kwargs)._resources_per_worker_not_none == per_worker


def test_derived_values():
    config = ScalingConfig(num_workers=(1, 4), use_gpu=True,
                           resources_per_worker={"CPU": 2, "special": 1})
    assert (config.min_workers, config.max_workers, config.elasticity_enabled) == (1, 4, True)
    assert (config.num_cpus_per_worker, config.num_gpus_per_worker) == (2, 1)
    assert config.num_tpus_per_worker == 0
    assert config.additional_resources_per_worker == {"special": 1}
    assert config.total_resources == {"CPU": 8.0, "special": 4.0, "GPU": 4.0}
    assert ScalingConfig(num_workers=0).total_resources == {"CPU": 0.0}
    assert ScalingConfig()._trainer_resources_not_none == {}


def test_label_selector_per_worker():
    assert ScalingConfig(num_workers=2)._label_selector_per_worker(2) is None
    assert ScalingConfig(num_workers=2, label_selector={"a": "b"})._label_selector_per_worker(
        3) == [{"a": "b"}] * 3
    both = [{"a": "1"}, {"a": "2"}]
    assert ScalingConfig(num_workers=(1, 2), label_selector=both)._label_selector_per_worker(
        1) == [{"a": "1"}]


@given(num_workers=st.one_of(st.integers(0, 8), st.tuples(st.integers(0, 4),
                                                          st.integers(4, 8))),
       resources=st.dictionaries(st.sampled_from(["CPU", "memory", "x"]),
                                 st.sampled_from([0, 0.5, 1, 2]), max_size=3))
def test_total_resources_is_per_worker_times_max_workers(num_workers, resources):
    config = ScalingConfig(num_workers=num_workers, resources_per_worker=resources)
    per_worker = {k: n for k, n in resources.items() if n != 0}
    assert config.total_resources == {k: float(n * config.max_workers)
                                      for k, n in per_worker.items()}
    assert all(isinstance(n, float) for n in config.total_resources.values())


def test_equality_is_field_wise():
    assert ScalingConfig(num_workers=(1, 2)) == ScalingConfig(num_workers=(1, 2))
    assert ScalingConfig(num_workers=2) != ScalingConfig(num_workers=3)


# ---------------------------------------------------------------------------- RunConfig

def test_run_config_defaults():
    config = RunConfig()
    assert re.fullmatch(r"ray_train_run-\d{4}-\d\d-\d\d_\d\d-\d\d-\d\d", config.name)
    assert config.storage_path == os.path.expanduser("~/ray_results")
    assert config.failure_config == FailureConfig()
    assert config.checkpoint_config == CheckpointConfig()
    assert config.logging_config == LoggingConfig()
    assert (config.callbacks, config.worker_runtime_env) == ([], {})
    assert config.storage_filesystem is None


def test_run_config_keeps_what_it_is_given():
    fs = pyarrow.fs.LocalFileSystem()
    callback = UserCallback()
    config = RunConfig(name="exp", storage_path=pathlib.Path("/data/runs"),
                       storage_filesystem=fs, callbacks=[callback],
                       worker_runtime_env={"env_vars": {"A": "1"}})
    assert (config.name, config.storage_path) == ("exp", "/data/runs")
    assert config.storage_filesystem is fs and config.callbacks == [callback]
    assert not hasattr(config, "storage_context")


@pytest.mark.parametrize("name", ["sync_config", "verbose", "stop", "progress_reporter",
                                  "log_to_file"])
def test_run_config_deprecated_arguments_raise(name):
    with pytest.raises(DeprecationWarning, match=f"RunConfig\\({name}\\)"):
        RunConfig(**{name: None})


@pytest.mark.parametrize("kwargs", [
    {"callbacks": [object()]},
    {"callbacks": [UserCallback(), "cb"]},
    {"failure_config": CheckpointConfig()},
    {"checkpoint_config": FailureConfig()},
    {"checkpoint_config": {"num_to_keep": 1}},
])
def test_run_config_rejects_wrong_parts(kwargs):
    with pytest.raises(ValueError):
        RunConfig(**kwargs)


def test_run_config_has_no_runtime_env_argument():
    with pytest.raises(TypeError):
        RunConfig(runtime_env={})


# ---------------------------------------------------------------------------- the rest

def test_failure_config():
    assert FailureConfig() == FailureConfig(0, "DEPRECATED", -1, -1, False, 0.0)
    assert FailureConfig(max_failures=-5).max_failures == -5  # no range check
    for fail_fast in (False, True, "raise"):
        with pytest.raises(DeprecationWarning, match="fail_fast"):
            FailureConfig(fail_fast=fail_fast)


@pytest.mark.parametrize("kwargs, exc_type", [
    ({"num_to_keep": 0}, ValueError),
    ({"num_to_keep": -1}, ValueError),
    ({"num_to_keep": "2"}, TypeError),
    ({"checkpoint_score_order": "MAX"}, ValueError),
    ({"checkpoint_frequency": 1}, DeprecationWarning),
    ({"checkpoint_at_end": None}, DeprecationWarning),
])
def test_checkpoint_config_rejects(kwargs, exc_type):
    with pytest.raises(exc_type):
        CheckpointConfig(**kwargs)


def test_checkpoint_config_accepts():
    assert CheckpointConfig(num_to_keep=1.5).num_to_keep == 1.5
    config = CheckpointConfig(2, "loss", "min")
    assert (config.num_to_keep, config.checkpoint_score_attribute,
            config.checkpoint_score_order) == (2, "loss", "min")


@pytest.mark.parametrize("level", ["debug", "Info", "WARNING", "critical", "notset"])
def test_logging_config_normalises_level(level):
    assert LoggingConfig(level).log_level == level.upper()


@pytest.mark.parametrize("level", ["verbose", "", 10, None])
def test_logging_config_rejects_unknown_levels(level):
    with pytest.raises(ValueError, match="log_level"):
        LoggingConfig(level)
