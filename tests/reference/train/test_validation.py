"""The named argument checks: the exception type, and a message naming argument and value."""

from __future__ import annotations

import pytest

from reference.train import _validation as v

# (check, args, exception type, fragments the message must contain)
FAILING = [
    (v.check_not_deprecated, ("RunConfig", "stop", {"a": 1}, "DEPRECATED", "Remove it."),
     DeprecationWarning, ["RunConfig(stop)", "stop={'a': 1}", "Remove it."]),
    (v.check_not_deprecated, ("ScalingConfig", "trainer_resources", {}, None, "Fix."),
     DeprecationWarning, ["trainer_resources={}"]),
    (v.check_num_workers, ([1, 2],), ValueError,
     ["ScalingConfig(num_workers) must be an int or a tuple of two ints", "num_workers=[1, 2]",
      "num_workers=(min_workers, max_workers)"]),
    (v.check_num_workers, ((1, 2, 3),), ValueError, ["num_workers=(1, 2, 3)"]),
    (v.check_num_workers, (2.0,), ValueError, ["num_workers=2.0"]),
    (v.check_num_workers, ((1, None),), ValueError, ["num_workers=(1, None)"]),
    (v.check_non_negative, ("ScalingConfig", "elastic_resize_monitor_interval_s", -1.5),
     ValueError, ["elastic_resize_monitor_interval_s=-1.5", "non-negative"]),
    (v.check_worker_bounds, (-1, -1, -1), ValueError,
     ["num_workers=-1", "cannot be negative"]),
    (v.check_worker_bounds, ((4, 1), 4, 1), ValueError,
     ["num_workers=(4, 1)", "min_workers=4 must be <= max_workers=1"]),
    (v.check_accelerator_choice, (True, True), ValueError, ["use_gpu=True", "use_tpu=True"]),
    (v.check_tpu_request, (False, 2), ValueError, ["use_tpu=False", "TPU=2"]),
    (v.check_tpu_request, (True, 0), ValueError, ["use_tpu=True", "use_tpu=False"]),
    (v.check_tpu_slice_settings, (2, None, "TPU-V6E", None), ValueError, ["topology=None"]),
    (v.check_tpu_slice_settings, (2, "4x4", "", None), ValueError, ["accelerator_type=''"]),
    (v.check_tpu_slice_settings, (2, "4x4", "TPU-V6E", {"a": "b"}), ValueError,
     ["label_selector={'a': 'b'}", "Remove label_selector"]),
    (v.check_slice_multiple, ("num_workers", 6, 4, "4x4"), ValueError,
     ["num_workers=6", "multiple of 4", "topology='4x4'"]),
    (v.check_label_selector_length, ([{}], 2), ValueError,
     ["1 entries", "max_workers=2", "single dict"]),
    (v.check_gpu_request, (False, 1), ValueError, ["use_gpu=False", "GPU=1"]),
    (v.check_positive_or_none, ("CheckpointConfig", "num_to_keep", 0), ValueError,
     ["num_to_keep=0", "Must be None or an integer >= 1"]),
    (v.check_one_of, ("CheckpointConfig", "checkpoint_score_order", "MAX", ("max", "min")),
     ValueError, ["checkpoint_score_order='MAX'", "'max' or 'min'"]),
    (v.check_log_level, ("LOUD",), ValueError, ["log_level='LOUD'", "'DEBUG'", "'INFO'"]),
    (v.check_log_level, (20,), ValueError, ["log_level=20"]),
    (v.check_instance, ("RunConfig", "failure_config", 1, dict, "Use a dict."), ValueError,
     ["failure_config=1", "Use a dict."]),
    (v.check_all_instances, ("RunConfig", "callbacks", [1, "x"], dict, "UserCallback", "Fix."),
     ValueError, ["callbacks=", "`UserCallback`", "[1, 'x']", "Fix."]),
]


@pytest.mark.parametrize("check, args, exc_type, fragments", FAILING,
                         ids=[f"{c.__name__}-{i}" for i, (c, *_) in enumerate(FAILING)])
def test_failing_check_names_argument_and_value(check, args, exc_type, fragments):
    with pytest.raises(exc_type) as info:
        check(*args)
    assert type(info.value) is exc_type
    for fragment in fragments:
        assert fragment in str(info.value)


PASSING = [
    (v.check_not_deprecated, ("RunConfig", "stop", "DEPRECATED", "DEPRECATED", "")),
    (v.check_not_deprecated, ("ScalingConfig", "trainer_resources", None, None, "")),
    (v.check_num_workers, (True,)),
    (v.check_num_workers, ((True, 2),)),
    (v.check_num_workers, (0,)),
    (v.check_worker_bounds, ((0, 0), 0, 0)),
    (v.check_accelerator_choice, (True, False)),
    (v.check_tpu_request, (True, 4)),
    (v.check_tpu_slice_settings, (1, None, None, {"a": "b"})),
    (v.check_slice_multiple, ("num_workers", 8, 4, "4x4")),
    (v.check_slice_multiple, ("num_workers", 3, 0, "0x4")),
    (v.check_label_selector_length, ({"a": "b"}, 3)),
    (v.check_gpu_request, (True, 1)),
    (v.check_positive_or_none, ("CheckpointConfig", "num_to_keep", 1.5)),
    (v.check_positive_or_none, ("CheckpointConfig", "num_to_keep", None)),
    (v.check_one_of, ("CheckpointConfig", "checkpoint_score_order", "min", ("max", "min"))),
]


@pytest.mark.parametrize("check, args", PASSING,
                         ids=[f"{c.__name__}-{i}" for i, (c, _) in enumerate(PASSING)])
def test_passing_check_returns_quietly(check, args):
    check(*args)


@pytest.mark.parametrize("given, stored", [("info", "INFO"), ("Debug", "DEBUG"),
                                           ("warn", "WARN"), ("trace", "TRACE")])
def test_log_level_is_upper_cased(given, stored):
    assert v.check_log_level(given) == stored


def test_comparisons_fail_like_plain_python_on_wrong_types():
    with pytest.raises(TypeError):
        v.check_positive_or_none("CheckpointConfig", "num_to_keep", "3")
    with pytest.raises(TypeError):
        v.check_non_negative("ScalingConfig", "elastic_resize_monitor_interval_s", None)


def test_tpu_slice_workers_is_the_tpu_modules_arithmetic():
    # The cases live in tests/reference/train/_internal/accelerators/test_accelerator_tpu.py.
    assert v.tpu_slice_workers("4x4", "TPU-V6E", None) == (4, {"CPU": 1, "TPU": 4})
    with pytest.raises(ValueError, match="not a TPU type"):
        v.tpu_slice_workers("4x4", "A100", None)
