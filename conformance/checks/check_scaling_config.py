"""ScalingConfig: fields, validation at construction and derived values (clauses `scaling.*`).

Design note: `expected_errors(kwargs)` is the oracle. It lists every rule the arguments break
and returns the exception types those rules raise; the order in which an implementation
checks its rules is not part of the contract, so any one of them is accepted when several
apply. `expected_derived(kwargs)` gives the derived values of a config the oracle accepts.
Ray also adds an `accelerator_type:<X>` resource when accelerator_type is set; no clause
says so, so the derived comparisons ignore those keys.
"""

from __future__ import annotations

import inspect
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conformance import assertions
from conformance import strategies as s
from conformance.catalogue import clause

FIELDS = (
    ("trainer_resources", None), ("num_workers", 1), ("use_gpu", False),
    ("resources_per_worker", None), ("placement_strategy", "PACK"),
    ("accelerator_type", None), ("label_selector", None), ("use_tpu", False),
    ("topology", None), ("elastic_resize_monitor_interval_s", 60.0),
)

# Chips on one host: 4, except v5e/v6e single-host slices, whose one host holds all the chips.
_EIGHT_CHIP_HOSTS = ("v5litepod", "v6e")
_SINGLE_HOST_TOPOLOGIES = ("1x1", "2x2", "2x4")


# ---------------------------------------------------------------------------- oracle

def _worker_bounds(num_workers):
    """(min, max) for a well-typed num_workers, else None."""
    if isinstance(num_workers, int):
        return num_workers, num_workers
    if (isinstance(num_workers, tuple) and len(num_workers) == 2
            and all(isinstance(n, int) for n in num_workers)):
        return num_workers
    return None


def tpu_slice(topology: str, accelerator_type: str):
    """(chips in the slice, chips per host), or None when the topology does not parse."""
    try:
        sides = [int(side) for side in topology.strip().lower().split("x")]
    except ValueError:
        return None
    chips = math.prod(sides)
    version = accelerator_type.lower().removeprefix("tpu-")
    if version in _EIGHT_CHIP_HOSTS and topology.strip().lower() in _SINGLE_HOST_TOPOLOGIES:
        return chips, chips
    return chips, 4


def _nonzero(resources: dict) -> dict:
    return {k: v for k, v in resources.items() if v != 0}


def expected_errors(kwargs: dict) -> set:
    """The exception types construction may raise (empty: it must succeed)."""
    errors: set = set()
    if kwargs.get("trainer_resources") is not None:
        errors.add(DeprecationWarning)
    bounds = _worker_bounds(kwargs.get("num_workers", 1))
    if bounds is None:
        return errors | {ValueError}  # the other rules need the worker counts
    low, high = bounds
    if low < 0 or low > high:
        errors.add(ValueError)
    use_gpu, use_tpu = kwargs.get("use_gpu", False), kwargs.get("use_tpu", False)
    resources = kwargs.get("resources_per_worker")
    topology, accelerator = kwargs.get("topology"), kwargs.get("accelerator_type")
    labels = kwargs.get("label_selector")
    if resources is None:
        tpus = 1 if use_tpu else 0
    else:
        tpus = _nonzero(resources).get("TPU", 0)
    if use_gpu and use_tpu:
        errors.add(ValueError)
    if not use_tpu and tpus > 0:
        errors.add(ValueError)
    if use_tpu and tpus == 0:  # a resources_per_worker without TPU counts as TPU: 0 as well
        errors.add(ValueError)
    if use_tpu and high > 1 and (not topology or not accelerator or labels):
        errors.add(ValueError)
    if use_tpu and topology and accelerator and tpus > 0:
        shape = tpu_slice(topology, accelerator)
        if shape is not None:
            chips, per_host = shape
            per_worker = resources["TPU"] if resources and "TPU" in resources else per_host
        # Ray reports a per-worker TPU count that does not split the slice evenly as
        # "Could not parse TPU topology details"; the clause names only the unparsable topology.
        if shape is None or chips % per_worker != 0:
            errors.add(ValueError)
        else:
            per_slice = int(chips // per_worker)
            if per_slice > 0 and (high % per_slice or low % per_slice):
                errors.add(ValueError)
    if isinstance(labels, list) and len(labels) != high:
        errors.add(ValueError)
    if resources and not use_gpu and _nonzero(resources).get("GPU", 0) > 0:
        errors.add(ValueError)
    return errors


def expected_resources_field(kwargs: dict):
    """resources_per_worker after construction: the TPU fill-in, else as given."""
    resources = kwargs.get("resources_per_worker")
    topology, accelerator = kwargs.get("topology"), kwargs.get("accelerator_type")
    if resources is None and kwargs.get("use_tpu") and topology and accelerator:
        return {"CPU": 1, "TPU": tpu_slice(topology, accelerator)[1]}
    return resources


def expected_derived(kwargs: dict) -> dict:
    """The derived values of a config that `expected_errors` accepts."""
    low, high = _worker_bounds(kwargs.get("num_workers", 1))
    use_gpu, use_tpu = kwargs.get("use_gpu", False), kwargs.get("use_tpu", False)
    resources = expected_resources_field(kwargs)
    if resources is None:
        per_worker = {"GPU": 1} if use_gpu else {"TPU": 1} if use_tpu else {"CPU": 1}
    else:
        per_worker = _nonzero(resources)
    if use_gpu:
        per_worker.setdefault("GPU", 1)
    return {
        "min_workers": low,
        "max_workers": high,
        "elasticity_enabled": isinstance(kwargs.get("num_workers", 1), tuple),
        "num_cpus_per_worker": per_worker.get("CPU", 0),
        "num_gpus_per_worker": per_worker.get("GPU", 0),
        "additional_resources_per_worker": {
            k: v for k, v in per_worker.items() if k not in ("CPU", "GPU")},
        "total_resources": {k: float(v * high) for k, v in per_worker.items()},
    }


# ---------------------------------------------------------------------------- helpers

def construct(impl, kwargs: dict):
    """ScalingConfig(**kwargs) held to the oracle `expected_errors`; the config or None."""
    __tracebackhide__ = True
    return assertions.constructed(impl.train.ScalingConfig, kwargs, expected_errors(kwargs),
                                  "ScalingConfig")


def _drop_accelerator_keys(resources: dict) -> dict:
    return {k: v for k, v in resources.items() if not k.startswith("accelerator_type:")}


def assert_derived(config, kwargs: dict) -> None:
    __tracebackhide__ = True
    setting = f"ScalingConfig(**{kwargs!r})"
    expected = expected_derived(kwargs)
    for name in ("min_workers", "max_workers", "elasticity_enabled", "num_cpus_per_worker",
                 "num_gpus_per_worker"):
        assertions.equal(getattr(config, name), expected[name], name, setting)
    assertions.equal(_drop_accelerator_keys(config.additional_resources_per_worker),
                     expected["additional_resources_per_worker"],
                     "additional_resources_per_worker", setting)
    total = _drop_accelerator_keys(config.total_resources)
    want = expected["total_resources"]
    close = total.keys() == want.keys() and all(
        isinstance(total[k], float) and math.isclose(total[k], want[k]) for k in want)
    if not close:
        raise AssertionError(f"total_resources={total!r}, expected floats {want!r} [{setting}]")


# ---------------------------------------------------------------------------- checks

@clause("scaling.defaults")
def check_scaling_defaults(impl):
    cls = impl.train.ScalingConfig
    params = [(p.name, p.default) for p in inspect.signature(cls).parameters.values()]
    assertions.equal(params, list(FIELDS), "ScalingConfig signature (name, default)",
                     "inspect.signature(ScalingConfig)")
    config = cls()
    for name, default in FIELDS:
        assertions.equal(getattr(config, name), default, f"ScalingConfig().{name}",
                         "ScalingConfig()")
    values = (None, 3, False, {"CPU": 2}, "SPREAD", "A100", {"zone": "a"}, False, "2x2", 5.0)
    config = cls(*values)
    for (name, _), value in zip(FIELDS, values, strict=True):
        assertions.equal(getattr(config, name), value, name, f"ScalingConfig(*{values!r})")


@clause("scaling.trainer-resources-deprecated")
@given(trainer_resources=st.one_of(st.just({}), s.resources_per_worker(allow_none=False),
                                   st.just(0), st.just("CPU")),
       kwargs=s.valid_scaling_kwargs())
def check_trainer_resources_deprecated(impl, trainer_resources, kwargs):
    kwargs = {**kwargs, "trainer_resources": trainer_resources}
    with pytest.raises(DeprecationWarning):
        impl.train.ScalingConfig(**kwargs)
    construct(impl, {**kwargs, "trainer_resources": None})


def _is_bounds(value) -> bool:
    return _worker_bounds(value) is not None


@clause("scaling.num-workers-type")
@given(num_workers=st.one_of(s.valid_num_workers(),
                             s.any_num_workers().filter(lambda v: not _is_bounds(v))))
def check_num_workers_type(impl, num_workers):
    construct(impl, {"num_workers": num_workers})


@clause("scaling.num-workers-range")
@given(num_workers=st.one_of(st.integers(-4, 8),
                             st.tuples(st.integers(-4, 8), st.integers(-4, 8))))
def check_num_workers_range(impl, num_workers):
    config = construct(impl, {"num_workers": num_workers})
    if config is not None and num_workers == 0:
        setting = "ScalingConfig(num_workers=0)"
        assertions.equal((config.min_workers, config.max_workers), (0, 0), "(min, max)", setting)


@clause("scaling.tpu-rules")
@given(kwargs=s.tpu_scaling_kwargs())
def check_tpu_rules(impl, kwargs):
    config = construct(impl, kwargs)
    if config is not None:
        assertions.equal(config.resources_per_worker, expected_resources_field(kwargs),
                         "resources_per_worker", f"ScalingConfig(**{kwargs!r})")


@clause("scaling.tpu-rules")
def check_tpu_example(impl):
    config = impl.train.ScalingConfig(num_workers=4, use_tpu=True, topology="4x4",
                                      accelerator_type="TPU-V6E")
    assertions.equal(config.resources_per_worker, {"CPU": 1, "TPU": 4}, "resources_per_worker",
                     "ScalingConfig(num_workers=4, use_tpu=True, topology='4x4', "
                     "accelerator_type='TPU-V6E')")


@clause("scaling.gpu-resources-without-use-gpu")
@given(use_gpu=st.booleans(), gpus=s.resource_values(),
       others=s.resources_per_worker(keys=("CPU", "memory", "custom_a"), allow_none=False),
       num_workers=s.valid_num_workers())
def check_gpu_resources_need_use_gpu(impl, use_gpu, gpus, others, num_workers):
    kwargs = {"num_workers": num_workers, "use_gpu": use_gpu,
              "resources_per_worker": {**others, "GPU": gpus}}
    config = construct(impl, kwargs)
    if config is not None:
        expected = (gpus or 1) if use_gpu else 0
        assertions.equal(config.num_gpus_per_worker, expected, "num_gpus_per_worker",
                         f"ScalingConfig(**{kwargs!r})")


@clause("scaling.label-selector")
@given(num_workers=s.valid_num_workers(), label_selector=s.label_selectors())
def check_label_selector(impl, num_workers, label_selector):
    construct(impl, {"num_workers": num_workers, "label_selector": label_selector})


@clause("scaling.derived")
@given(kwargs=s.valid_scaling_kwargs())
def check_scaling_derived(impl, kwargs):
    config = construct(impl, kwargs)
    assert_derived(config, kwargs)


@clause("scaling.derived")
def check_scaling_derived_examples(impl):
    sc = impl.train.ScalingConfig
    cases = [
        ({}, {"CPU": 1.0}),
        ({"num_workers": 0}, {"CPU": 0.0}),
        ({"num_workers": (1, 4)}, {"CPU": 4.0}),
        ({"num_workers": 2, "use_gpu": True}, {"GPU": 2.0}),
        ({"num_workers": 2, "use_gpu": True, "resources_per_worker": {"CPU": 2}},
         {"CPU": 4.0, "GPU": 2.0}),
        ({"num_workers": 3, "resources_per_worker": {"CPU": 0, "memory": 1e9}},
         {"memory": 3e9}),
    ]
    for kwargs, total in cases:
        assertions.equal(sc(**kwargs).total_resources, total, "total_resources",
                         f"ScalingConfig(**{kwargs!r})")


@clause("scaling.resource-amounts")
@given(name=st.sampled_from(["CPU", "memory", "custom_a"]),
       amount=st.one_of(st.sampled_from(["1", "0.5", "2", "one", "", b"1"]),
                        st.lists(st.integers(0, 2), max_size=2)))
def check_resource_amount_must_be_a_number(impl, name, amount):
    sc = impl.train.ScalingConfig
    assertions.constructed(sc, {"num_workers": 2, "resources_per_worker": {name: amount}},
                           {ValueError}, "ScalingConfig")
    made = assertions.constructed(sc, {"num_workers": 2, "resources_per_worker": {name: 1.5}},
                                  set(), "ScalingConfig")
    assertions.equal(made.resources_per_worker, {name: 1.5}, "resources_per_worker",
                     f"ScalingConfig(num_workers=2, resources_per_worker={{{name!r}: 1.5}})")


@clause("scaling.placement-strategy-lazy")
@given(strategy=st.one_of(st.sampled_from(["PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD",
                                           "BOGUS", "pack", ""]), st.text(max_size=12)))
def check_placement_strategy_accepted(impl, strategy):
    config = impl.train.ScalingConfig(placement_strategy=strategy)
    assertions.equal(config.placement_strategy, strategy, "placement_strategy",
                     f"ScalingConfig(placement_strategy={strategy!r})")


@clause("scaling.trainer-resources-deprecated", "scaling.num-workers-type",
        "scaling.num-workers-range", "scaling.tpu-rules", "scaling.gpu-resources-without-use-gpu",
        "scaling.label-selector", "scaling.derived")
@given(kwargs=s.scaling_kwargs())
def check_scaling_config_any_arguments(impl, kwargs):
    config = construct(impl, kwargs)
    if config is not None:
        assert_derived(config, kwargs)
