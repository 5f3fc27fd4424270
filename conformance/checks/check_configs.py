"""RunConfig, FailureConfig, CheckpointConfig, LoggingConfig (clauses `run-config.*`,
`failure-config.fields`, `checkpoint-config.validation`, `logging-config.level`).

Where several rules are broken at once the clauses do not say which error wins, so the
oracles return every exception type that applies and any one of them is accepted.
"""

from __future__ import annotations

import datetime
import logging
import os
import pathlib
import re

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from conformance import assertions
from conformance import strategies as s
from conformance.catalogue import clause

DEPRECATED_RUN_ARGS = ("sync_config", "verbose", "stop", "progress_reporter", "log_to_file")
STANDARD_LEVELS = ("CRITICAL", "FATAL", "ERROR", "WARN", "WARNING", "INFO", "DEBUG", "NOTSET")
NAME_FORMAT = "ray_train_run-%Y-%m-%d_%H-%M-%S"

# Ray's deprecated arguments default to this marker string; passing it is "not given".
_MARKER = "DEPRECATED"


# ---------------------------------------------------------------------------- RunConfig

@clause("run-config.defaults")
def check_run_config_defaults(impl):
    t = impl.train
    before = datetime.datetime.now().replace(microsecond=0)
    config = t.RunConfig()
    after = datetime.datetime.now()
    setting = "RunConfig()"
    if not re.fullmatch(r"ray_train_run-\d{4}-\d\d-\d\d_\d\d-\d\d-\d\d", str(config.name)):
        raise AssertionError(f"name={config.name!r}, expected '{NAME_FORMAT}' [{setting}]")
    stamp = datetime.datetime.strptime(config.name, NAME_FORMAT)
    if not before - datetime.timedelta(seconds=2) <= stamp <= after:
        raise AssertionError(f"name={config.name!r}, expected a local time between "
                             f"{before} and {after} [{setting}]")
    assertions.equal(config.storage_path, os.path.expanduser("~/ray_results"), "storage_path",
                     setting)
    for field, cls in (("failure_config", t.FailureConfig),
                       ("checkpoint_config", t.CheckpointConfig),
                       ("logging_config", t.LoggingConfig)):
        part = getattr(config, field)
        assertions.equal(type(part), cls, f"type({field})", setting)
        assertions.equal(part, cls(), field, setting)
    assertions.equal(config.callbacks, [], "callbacks", setting)
    assertions.equal(config.worker_runtime_env, {}, "worker_runtime_env", setting)


_SEGMENT = st.text("abcdefgh_-", min_size=1, max_size=6)


@clause("run-config.defaults")
@given(name=st.one_of(st.none(), st.text(min_size=1, max_size=20)),
       storage=st.one_of(
           st.none(),
           st.lists(_SEGMENT, min_size=1, max_size=3).map(lambda p: "/" + "/".join(p)),
           st.tuples(st.booleans(), st.lists(_SEGMENT, min_size=1, max_size=3)).map(
               lambda t: pathlib.Path("/" if t[0] else ".", *t[1]))))
def check_run_config_name_and_storage(impl, name, storage):
    kwargs = {"name": name, "storage_path": storage}
    config = impl.train.RunConfig(**kwargs)
    setting = f"RunConfig(**{kwargs!r})"
    if name is None:
        assertions.equal(config.name.startswith("ray_train_run-"), True,
                         f"name={config.name!r} starts with 'ray_train_run-'", setting)
    else:
        assertions.equal(config.name, name, "name", setting)
    if storage is None:
        expected = os.path.expanduser("~/ray_results")
    elif isinstance(storage, pathlib.PurePath):
        expected = storage.as_posix()
    else:
        expected = storage
    assertions.equal(config.storage_path, expected, "storage_path", setting)
    assertions.equal(type(config.storage_path), str, "type(storage_path)", setting)


@clause("run-config.deprecated")
@given(args=st.lists(st.sampled_from(DEPRECATED_RUN_ARGS), min_size=1, max_size=3, unique=True),
       value=s.arbitrary_objects().filter(lambda v: not (isinstance(v, str) and v == _MARKER)))
def check_run_config_deprecated(impl, args, value):
    kwargs = dict.fromkeys(args, value)
    with pytest.raises(DeprecationWarning) as info:
        impl.train.RunConfig(**kwargs)
    message = str(info.value)
    if not any(arg in message for arg in args):
        raise AssertionError(f"DeprecationWarning({message!r}), expected it to name one of "
                             f"{args!r} [RunConfig(**{kwargs!r})]")


@clause("run-config.deprecated")
def check_run_config_runtime_env_removed(impl):
    with pytest.raises(TypeError):
        impl.train.RunConfig(runtime_env={"env_vars": {"A": "1"}})


class _DuckCallback:
    """Has the callback methods but is not a UserCallback."""

    def after_report(self, run_context, metrics, checkpoint):
        pass


def _callback(impl, kind: str):
    t = impl.train
    if kind == "user":
        return t.UserCallback()
    if kind == "subclass":
        return type("MyCallback", (t.UserCallback,), {})()
    return {"duck": _DuckCallback, "object": object, "string": lambda: "cb",
            "dict": lambda: {"after_report": None}}[kind]()


def _part(impl, kind: str, right: str):
    """A failure_config/checkpoint_config value: None, the right class, or a wrong truthy one."""
    t = impl.train
    if kind == "none":
        return None
    if kind == "right":
        return getattr(t, right)()
    return {"other-config": lambda: (t.CheckpointConfig() if right == "FailureConfig"
                                     else t.FailureConfig()),
            "logging-config": t.LoggingConfig, "object": object, "int": lambda: 1,
            "dict": lambda: {"max_failures": 1}}[kind]()


_GOOD_CALLBACKS = ("user", "subclass")
_PART_KINDS = ("none", "right", "right", "other-config", "logging-config", "object", "int",
               "dict")


@clause("run-config.types")
@given(callbacks=st.one_of(st.none(), st.lists(st.sampled_from(
           _GOOD_CALLBACKS * 3 + ("duck", "object", "string", "dict")), max_size=4)),
       failure=st.sampled_from(_PART_KINDS), checkpoint=st.sampled_from(_PART_KINDS))
def check_run_config_types(impl, callbacks, failure, checkpoint):
    kwargs = {
        "callbacks": None if callbacks is None else [_callback(impl, k) for k in callbacks],
        "failure_config": _part(impl, failure, "FailureConfig"),
        "checkpoint_config": _part(impl, checkpoint, "CheckpointConfig"),
    }
    wrong = (any(k not in _GOOD_CALLBACKS for k in callbacks or ())
             or failure not in ("none", "right") or checkpoint not in ("none", "right"))
    config = assertions.constructed(impl.train.RunConfig, kwargs,
                                    {ValueError} if wrong else set(), "RunConfig")
    if config is not None:
        setting = f"RunConfig(**{kwargs!r})"
        assertions.equal(config.callbacks, kwargs["callbacks"] or [], "callbacks", setting)
        for field in ("failure_config", "checkpoint_config"):
            if kwargs[field] is not None:
                assertions.equal(getattr(config, field) is kwargs[field], True,
                                 f"{field} is the object passed", setting)


# ---------------------------------------------------------------------------- FailureConfig

@clause("failure-config.fields")
def check_failure_config_defaults(impl):
    config = impl.train.FailureConfig()
    for field, default in (("max_failures", 0), ("controller_failure_limit", -1),
                           ("max_preemption_failures", -1)):
        assertions.equal(getattr(config, field), default, field, "FailureConfig()")


_COUNTS = st.integers(-10, 10**6)


@clause("failure-config.fields")
@given(counts=st.fixed_dictionaries({}, optional={"max_failures": _COUNTS,
                                                  "controller_failure_limit": _COUNTS,
                                                  "max_preemption_failures": _COUNTS}),
       fail_fast=st.one_of(st.just(()), st.tuples(st.one_of(
           st.booleans(), st.none(), st.sampled_from(["raise", "RAISE", "x"]), st.integers()))))
def check_failure_config_fields(impl, counts, fail_fast):
    kwargs = dict(counts)
    if fail_fast:
        kwargs["fail_fast"] = fail_fast[0]
    config = assertions.constructed(impl.train.FailureConfig, kwargs,
                                    {DeprecationWarning} if fail_fast else set(),
                                    "FailureConfig")
    if config is not None:
        defaults = {"max_failures": 0, "controller_failure_limit": -1,
                    "max_preemption_failures": -1}
        for field, default in defaults.items():
            assertions.equal(getattr(config, field), counts.get(field, default), field,
                             f"FailureConfig(**{kwargs!r})")


# ---------------------------------------------------------------------------- CheckpointConfig

def checkpoint_config_errors(kwargs: dict) -> set:
    errors: set = set()
    if "checkpoint_frequency" in kwargs or "checkpoint_at_end" in kwargs:
        errors.add(DeprecationWarning)
    keep = kwargs.get("num_to_keep")
    if keep is not None and keep < 1:
        errors.add(ValueError)
    if kwargs.get("checkpoint_score_order", "max") not in ("max", "min"):
        errors.add(ValueError)
    return errors


_FREQUENCY = st.one_of(st.none(), st.integers(0, 5))
_AT_END = st.one_of(st.none(), st.booleans())
_DEPRECATED_CHECKPOINT_ARGS = st.one_of(
    st.fixed_dictionaries({"checkpoint_frequency": _FREQUENCY}),
    st.fixed_dictionaries({"checkpoint_at_end": _AT_END}),
    st.fixed_dictionaries({"checkpoint_frequency": _FREQUENCY, "checkpoint_at_end": _AT_END}),
)


@clause("checkpoint-config.validation")
@given(kwargs=st.fixed_dictionaries({}, optional={
    "num_to_keep": st.one_of(st.none(), st.integers(-3, 5), st.integers(6, 10**6)),
    "checkpoint_score_attribute": st.one_of(st.none(), st.text(max_size=8)),
    "checkpoint_score_order": st.one_of(
        st.sampled_from(["max", "min"]),
        st.sampled_from(["MAX", "Min", " max", "maximum", ""]), st.none(),
        st.text(max_size=4)),
}), deprecated=st.integers(0, 3).flatmap(
    lambda n: _DEPRECATED_CHECKPOINT_ARGS if n == 3 else st.just({})))
def check_checkpoint_config_validation(impl, kwargs, deprecated):
    kwargs = {**kwargs, **deprecated}
    config = assertions.constructed(impl.train.CheckpointConfig, kwargs,
                                    checkpoint_config_errors(kwargs), "CheckpointConfig")
    if config is not None:
        expected = {"num_to_keep": None, "checkpoint_score_attribute": None,
                    "checkpoint_score_order": "max", **kwargs}
        for field, value in expected.items():
            assertions.equal(getattr(config, field), value, field,
                             f"CheckpointConfig(**{kwargs!r})")


# ---------------------------------------------------------------------------- LoggingConfig

def _mixed_case(name: str) -> st.SearchStrategy:
    flags = st.lists(st.booleans(), min_size=len(name), max_size=len(name))
    return flags.map(
        lambda fs: "".join(c.lower() if f else c for c, f in zip(name, fs, strict=True)))


@clause("logging-config.level")
@given(level=st.one_of(
    st.sampled_from(STANDARD_LEVELS).flatmap(_mixed_case),
    st.text(max_size=10),
    st.sampled_from(["INF", "DEBUGGING", "WARNINGS", " INFO", "info ", "10"]),
    st.integers(-10, 60), st.none(), st.just(b"INFO")))
def check_logging_config_level(impl, level):
    setting = f"LoggingConfig({level!r})"
    if isinstance(level, str) and level.upper() in STANDARD_LEVELS:
        config = assertions.constructed(impl.train.LoggingConfig, {"log_level": level}, set(),
                                        "LoggingConfig")
        assertions.equal(config.log_level, level.upper(), "log_level", setting)
        config = impl.train.LoggingConfig(level)
        assertions.equal(config.log_level, level.upper(), "log_level (positional)", setting)
    elif isinstance(level, str) and isinstance(logging.getLevelName(level.upper()), int):
        event("a level name registered by a library, not a standard one: not judged")
    else:
        assertions.constructed(impl.train.LoggingConfig, {"log_level": level}, {ValueError},
                               "LoggingConfig")


@clause("logging-config.level")
def check_logging_config_default(impl):
    assertions.equal(impl.train.LoggingConfig().log_level, "INFO", "log_level", "LoggingConfig()")
