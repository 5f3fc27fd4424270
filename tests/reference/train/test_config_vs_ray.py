"""Differential tests: the same arguments, given to Ray and to the reference, give the same
outcome (the same exception type, or equal reprs and derived values). Skipped without Ray."""

from __future__ import annotations

import copy
import numbers
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import reference.train as ref

ray_train = pytest.importorskip("ray.train")

_FAST = settings(max_examples=100, deadline=None,
                 suppress_health_check=[HealthCheck.too_slow])
_DERIVED = ("min_workers", "max_workers", "elasticity_enabled", "num_cpus_per_worker",
            "num_gpus_per_worker", "num_tpus_per_worker", "additional_resources_per_worker",
            "total_resources", "resources_per_worker")


def _outcome(build):
    try:
        return "ok", build()
    except Exception as exc:  # noqa: BLE001 - compared between the implementations
        return "raised", type(exc)


def _same(kwargs, make_ray, make_ref, derived=()):
    __tracebackhide__ = True
    theirs = _outcome(lambda: make_ray(**copy.deepcopy(kwargs)))
    ours = _outcome(lambda: make_ref(**copy.deepcopy(kwargs)))
    if theirs[0] == "raised" or ours[0] == "raised":
        assert ours == theirs, f"kwargs={kwargs!r}: ray {theirs}, reference {ours}"
        return
    assert repr(ours[1]) == repr(theirs[1]), f"kwargs={kwargs!r}"
    for name in derived:
        # A derived value may raise on both (e.g. total_resources of {'CPU': None}).
        assert (_outcome(lambda n=name: getattr(ours[1], n))
                == _outcome(lambda n=name: getattr(theirs[1], n))), f"{name} kwargs={kwargs!r}"


_ODD = st.one_of(st.none(), st.booleans(), st.integers(-3, 5), st.text(max_size=3),
                 st.sampled_from([0.5, 2.0, -1.0, "DEPRECATED", "max", "min", "MAX", "info"]),
                 st.lists(st.integers(0, 2), max_size=2))
_WORKERS = st.one_of(st.integers(-2, 9), st.tuples(st.integers(-1, 9), st.integers(-1, 9)),
                     _ODD, st.tuples(st.integers(0, 4)), st.tuples(st.booleans(), st.integers()))
_RESOURCES = st.one_of(st.none(), st.dictionaries(
    st.sampled_from(["CPU", "GPU", "TPU", "memory", "x"]),
    st.one_of(st.sampled_from([0, 0.0, 1, 2, 4, 0.5]), _ODD), max_size=3))
_TOPOLOGIES = st.sampled_from([None, "", "1x1", "2x2", "2x4", "4x4", "4x8", "2x2x2", "4x4x4",
                               "4y4", "4x", "x4", "0x4", " 2X4 ", "four"])
_TYPES = st.sampled_from([None, "", "TPU-V4", "TPU-V5P", "TPU-V6E", "TPU-V5LITEPOD", "TPU-V7X",
                          "TPU-V2", "v6e", "TPU4", "tpuv4", "A100"])


@_FAST
@given(kwargs=st.fixed_dictionaries({}, optional={
    "num_workers": _WORKERS, "use_gpu": st.one_of(st.booleans(), _ODD),
    "resources_per_worker": _RESOURCES, "use_tpu": st.booleans(), "topology": _TOPOLOGIES,
    "accelerator_type": _TYPES, "placement_strategy": st.sampled_from(["PACK", "BOGUS"]),
    "label_selector": st.one_of(_ODD, st.just({"a": "b"}),
                                st.lists(st.just({"a": "b"}), max_size=9)),
    "elastic_resize_monitor_interval_s": st.one_of(st.floats(-1, 100), _ODD),
    "trainer_resources": st.one_of(st.none(), st.just({}), st.just({"CPU": 1})),
}))
def test_scaling_config_matches_ray(kwargs):
    resources = kwargs.get("resources_per_worker") or {}
    not_numbers = [v for v in resources.values() if not isinstance(v, numbers.Real)]
    if not_numbers and _outcome(lambda: ray_train.ScalingConfig(**copy.deepcopy(kwargs)))[0] == "ok":
        # A deliberate departure (clause scaling.resource-amounts): Ray takes the amount here
        # and fails to place the workers in fit(); the reference refuses it at once.
        with pytest.raises(ValueError, match="values must be numbers"):
            ref.ScalingConfig(**copy.deepcopy(kwargs))
        return
    _same(kwargs, ray_train.ScalingConfig, ref.ScalingConfig, _DERIVED)


@_FAST
@given(kwargs=st.dictionaries(st.sampled_from(
    ["num_to_keep", "checkpoint_score_attribute", "checkpoint_score_order",
     "checkpoint_frequency", "checkpoint_at_end"]), _ODD))
def test_checkpoint_config_matches_ray(kwargs):
    _same(kwargs, ray_train.CheckpointConfig, ref.CheckpointConfig)


@_FAST
@given(kwargs=st.dictionaries(st.sampled_from(
    ["max_failures", "fail_fast", "controller_failure_limit", "max_preemption_failures",
     "relax_collectives_on_preemption", "preemption_grace_s"]), _ODD))
def test_failure_config_matches_ray(kwargs):
    _same(kwargs, ray_train.FailureConfig, ref.FailureConfig)


@_FAST
@given(level=st.one_of(_ODD, st.sampled_from(["debug", "Warn", "FATAL", "trace", "notset"])))
def test_logging_config_matches_ray(level):
    _same({"log_level": level}, ray_train.LoggingConfig, ref.LoggingConfig)


@_FAST
@given(kwargs=st.dictionaries(st.sampled_from(
    ["name", "storage_path", "worker_runtime_env", "sync_config", "verbose", "stop",
     "progress_reporter", "log_to_file", "callbacks", "failure_config", "checkpoint_config"]),
    _ODD))
def test_run_config_matches_ray(kwargs):
    def normalised(make):
        def build(**kw):
            text = repr(make(**kw)).replace("ray.train.", "")
            # The default name carries the time of day, which may tick between the calls.
            return re.sub(r"ray_train_run-[0-9_-]+", "ray_train_run-<time>", text)
        return build

    _same(kwargs, normalised(ray_train.RunConfig), normalised(ref.RunConfig))


_LEAF = st.one_of(st.none(), st.integers(-3, 3), st.floats(allow_nan=False), st.text("ab", max_size=2))
_METRICS = st.recursive(_LEAF, lambda inner: st.one_of(
    st.lists(inner, max_size=2), st.dictionaries(st.sampled_from(["a", "b", "0"]), inner,
                                                 max_size=2)), max_leaves=4)


@_FAST
@given(best=st.lists(st.dictionaries(st.sampled_from(["a", "b", "a/b"]), _METRICS, max_size=3),
                     max_size=3),
       metric=st.sampled_from(["a", "a/b", "a/0", "b/a/0", "c"]),
       mode=st.sampled_from(["max", "min", "MAX"]))
def test_get_best_checkpoint_matches_ray(best, metric, mode):
    def pick(module):
        def build():
            pairs = [(module.Checkpoint(f"/c{i}"), m) for i, m in enumerate(best)]
            result = module.Result({"a": 1}, None, None, "/run", best_checkpoints=pairs)
            return result.get_best_checkpoint(metric, mode).path
        return build

    assert _outcome(pick(ref)) == _outcome(pick(ray_train)), (best, metric, mode)
