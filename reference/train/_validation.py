"""Named argument checks for the config classes and the training-function utilities.

Each check raises the exception type Ray raises under the same condition (ValueError for
bad values, DeprecationWarning *raised* for removed arguments) with a message that names the
argument and the value it got, says what is allowed, and ends with the fix when there is one.
Comparisons are written as plain Python operators on purpose: an argument of a type the
operator cannot handle (``num_to_keep="3"``) fails with the TypeError Ray fails with too.
A few checks have no counterpart in Ray, which lets the value through and fails later, after
resources were requested or files written (resource amounts, folder-name lengths); they
raise ValueError up front and say so where they are called.
"""

from __future__ import annotations

import logging
import numbers
from typing import Any

from reference.train._internal.accelerators import tpu

DEPRECATED = "DEPRECATED"

#: the tail of Ray's V2 migration messages (``ray.train.constants.V2_MIGRATION_GUIDE_MESSAGE``)
RAY_MIGRATION_GUIDE = (
    "See this issue for more context and migration options: "
    "https://github.com/ray-project/ray/issues/49454. Disable these warnings by setting the "
    "environment variable: RAY_TRAIN_ENABLE_V2_MIGRATION_WARNINGS=0")

# Every message below opens with Ray 2.60's text for the same error, word for word (typos
# included), so `pytest.raises(match=...)` written against Ray matches here too; what we add
# (the argument as passed, the fix) follows it.


def check_not_deprecated(owner: str, name: str, value: Any, unset: Any, fix: str,
                         ray_text: str | None = None) -> None:
    """A removed argument was passed: raise DeprecationWarning (Ray raises, it does not warn).
    `ray_text`: Ray's message for it, which the message starts with."""
    if value is unset or (unset is not None and value == unset):
        return
    head = ray_text or f"`{owner}({name})` is deprecated."
    raise DeprecationWarning(f"{head} Got {owner}({name}={value!r}). {fix}".rstrip())


def check_num_workers(value: Any) -> None:
    # bool is an int, so num_workers=True means one worker, as it does in Ray.
    fixed = isinstance(value, int)
    elastic = (isinstance(value, tuple) and len(value) == 2
               and all(isinstance(n, int) for n in value))
    if not (fixed or elastic):
        raise ValueError(
            "ScalingConfig(num_workers) must be an int or a tuple of two ints. Got "
            f"num_workers={value!r}. Pass num_workers=N for a fixed group or "
            "num_workers=(min_workers, max_workers) for elastic training."
        )


def check_non_negative(owner: str, name: str, value: Any) -> None:
    if value < 0:
        raise ValueError(f"{owner}({name}) must be non-negative. Got {name}={value!r}.")


def check_worker_bounds(num_workers: Any, min_workers: int, max_workers: int) -> None:
    if min_workers < 0:
        raise ValueError(
            f"Invalid ScalingConfig(num_workers={num_workers!r}): Number of workers cannot be "
            "negative. Use num_workers=0 to run the training function in the driver."
        )
    if min_workers > max_workers:
        raise ValueError(
            f"Invalid ScalingConfig(num_workers={num_workers!r}): min_workers={min_workers} "
            f"must be <= max_workers={max_workers}. Pass the tuple as (min, max)."
        )


def check_accelerator_choice(use_gpu: Any, use_tpu: Any) -> None:
    if use_gpu and use_tpu:
        raise ValueError(
            "Cannot specify both `use_gpu=True` and `use_tpu=True`. Got "
            f"ScalingConfig(use_gpu={use_gpu!r}, use_tpu={use_tpu!r}); a worker uses one kind "
            "of accelerator."
        )


def check_tpu_request(use_tpu: Any, num_tpus: Any) -> None:
    """TPUs in resources_per_worker and use_tpu must agree."""
    if not use_tpu and num_tpus > 0:
        raise ValueError(
            "`use_tpu` is False but `TPU` was found in `resources_per_worker`. Either set "
            "`use_tpu` to True or remove `TPU` from `resources_per_worker. Got "
            f"ScalingConfig(use_tpu={use_tpu!r}) with TPU={num_tpus!r} in resources_per_worker."
        )
    if use_tpu and num_tpus == 0:
        raise ValueError(
            "`use_tpu` is True but `TPU` is set to 0 in `resources_per_worker`. Either set "
            "`use_tpu` to False or request a positive number of `TPU` in "
            "`resources_per_worker. Got ScalingConfig(use_tpu=True) with TPU=0 (or absent); "
            "pass use_tpu=False or a positive TPU amount."
        )


def check_tpu_slice_settings(max_workers: int, topology: Any, accelerator_type: Any,
                             label_selector: Any) -> None:
    """A multi-worker TPU job runs on whole slices, which need a topology and a type."""
    if max_workers <= 1:
        return
    if not topology:
        raise ValueError(
            "`topology` must be specified in ScalingConfig when `use_tpu=True`  and "
            f"`num_workers` > 1. Got topology={topology!r}. Pass the slice shape, e.g. "
            "topology='4x4'."
        )
    if not accelerator_type:
        raise ValueError(
            "`accelerator_type` must be specified in ScalingConfig when `use_tpu=True` and "
            f"`num_workers` > 1. Got accelerator_type={accelerator_type!r}. Pass e.g. "
            "accelerator_type='TPU-V6E'."
        )
    if label_selector:
        raise ValueError(
            "Cannot set `label_selector` when `use_tpu=True` because Ray Train automatically "
            "reserves a TPU slice with a predefined label. Got "
            f"label_selector={label_selector!r}. Remove label_selector."
        )


def check_slice_multiple(name: str, value: int, workers_per_slice: int, topology: str) -> None:
    if workers_per_slice > 0 and value % workers_per_slice != 0:
        raise ValueError(
            f"The configured `{name}` ({value}) must be a multiple of {workers_per_slice} for "
            f"the specified topology ({topology}). TPU workloads typically require symmetric "
            "resource distribution across all slices to function correctly. Got "
            f"ScalingConfig({name}={value!r}, topology={topology!r})."
        )


def check_label_selector_length(label_selector: Any, max_workers: int) -> None:
    if isinstance(label_selector, list) and len(label_selector) != max_workers:
        raise ValueError(
            "If `label_selector` is a list, it must be the same length as `max_workers` (or "
            f"`num_workers` when fixed). Got {len(label_selector)} entries for "
            f"max_workers={max_workers}. Pass a single dict to apply the same selector to "
            "every worker."
        )


def check_gpu_request(use_gpu: Any, num_gpus: Any) -> None:
    # use_gpu=True with GPU: 0 never fails: zero entries are dropped and GPU falls back to 1.
    if not use_gpu and num_gpus > 0:
        raise ValueError(
            "`use_gpu` is False but `GPU` was found in `resources_per_worker`. Either set "
            "`use_gpu` to True or remove `GPU` from `resources_per_worker. Got "
            f"ScalingConfig(use_gpu={use_gpu!r}) with GPU={num_gpus!r} in resources_per_worker."
        )


def check_resource_amounts(resources_per_worker: Any) -> None:
    """Every amount is a number: a string would only fail once the workers are placed."""
    if not isinstance(resources_per_worker, dict):
        return
    for name, amount in resources_per_worker.items():
        if isinstance(amount, numbers.Real):
            continue
        try:
            fix = f"{{{name!r}: {float(amount)!r}}}"
        except (TypeError, ValueError):
            fix = f"{{{name!r}: 1}}"
        raise ValueError(
            f"ScalingConfig(resources_per_worker={resources_per_worker!r}): values must be "
            f"numbers; got {name}={amount!r} ({type(amount).__name__}). Pass the amount as "
            f"a number, e.g. resources_per_worker={fix}."
        )


def check_name_component_sizes(argument: str, name: str, limit: int) -> None:
    """Each '/'-separated part of `name` fits in one folder name of `limit` bytes (UTF-8)."""
    for part in name.split("/"):
        size = len(part.encode("utf-8", "surrogatepass"))
        if size > limit:
            shown = part if len(part) <= 40 else f"{part[:37]}..."
            raise ValueError(
                f"{argument}={name!r} is not allowed: its path component {shown!r} is "
                f"{size} bytes long, and the file system holding the run folder allows at "
                f"most {limit} bytes per folder name. Use a shorter name (nested names "
                "like 'epoch_3/shard' keep each part short)."
            )


def check_consistency_mode(value: Any, modes: type) -> None:
    if not isinstance(value, modes):
        choices = " or ".join(f"{modes.__name__}.{m.name}" for m in modes)
        raise ValueError(
            f"get_all_reported_checkpoints(consistency_mode={value!r}): unexpected "
            f"consistency mode. Pass {choices}."
        )


def check_positive_or_none(owner: str, name: str, value: Any) -> None:
    # Not an int check: Ray accepts num_to_keep=1.5.
    if value is not None and value <= 0:
        raise ValueError(
            f"Received invalid {name}: {value}. Must be None or an integer >= 1. Got "
            f"{owner}({name}={value!r})."
        )


def check_one_of(owner: str, name: str, value: Any, allowed: tuple) -> None:
    if value not in allowed:
        choices = " or ".join(repr(a) for a in allowed)
        raise ValueError(f"Received invalid {name}: {value}. Must be {choices}. Got "
                         f"{owner}({name}={value!r}).")


def check_log_level(value: Any) -> str:
    """The upper-cased level name, or ValueError listing the valid names."""
    # TRACE is registered by Ray's data library; accept it so the same configs are valid.
    valid = set(logging._nameToLevel) | {"TRACE"}
    if not isinstance(value, str) or value.upper() not in valid:
        raise ValueError(
            f"Invalid log_level: {value!r}. Must be one of: "
            f"{', '.join(repr(v) for v in sorted(valid))}. Got LoggingConfig(log_level={value!r})."
        )
    return value.upper()


def check_instance(owner: str, name: str, value: Any, cls: type, fix: str) -> None:
    if not isinstance(value, cls):
        raise ValueError(
            f"Invalid `{cls.__name__}` type: {type(value)}. {fix} See this issue for more "
            f"context: https://github.com/ray-project/ray/issues/49454 (the reference's class "
            f"is reference.train.{cls.__name__}). Got {owner}({name}={value!r})."
        )


def check_all_instances(owner: str, name: str, values: Any, cls: type, shown: str,
                        fix: str, ray_text: str | None = None) -> None:
    wrong = [v for v in values if not isinstance(v, cls)]
    if wrong:
        head = ray_text or f"All {name} must be instances of `{shown}`."
        raise ValueError(f"{head} Got {owner}({name}=[...]) with {wrong!r}. {fix}")


def tpu_slice_workers(topology: str, accelerator_type: str,
                      resources_per_worker: dict | None) -> tuple[int, dict]:
    """(workers in one slice, resources of one worker); ValueError when the slice is bad.

    The slice arithmetic lives with the TPU accelerator manager.
    """
    return tpu.slice_workers(topology, accelerator_type, resources_per_worker)
