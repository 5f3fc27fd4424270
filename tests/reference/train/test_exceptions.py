"""The exception tree: messages, payloads, and pickling round trips."""

from __future__ import annotations

import pickle
import types

import pytest

from reference.train import (
    ControllerError,
    NCCLHangError,
    PreemptionError,
    TrainingFailedError,
    WorkerGroupError,
)
from reference.train._exceptions import RayTrainError

_PREEMPTION = types.SimpleNamespace(preempted_ranks=[1, 3])


def test_tree():
    assert TrainingFailedError.__mro__[1:] == (RayTrainError, Exception, BaseException, object)
    for cls in (WorkerGroupError, ControllerError, PreemptionError):
        assert cls.__bases__ == (TrainingFailedError,)
    assert NCCLHangError.__bases__ == (WorkerGroupError,)


def test_worker_group_error():
    failures = {0: ValueError("bad"), 2: KeyError("k")}
    error = WorkerGroupError("[Rank 0] bad", failures)
    assert str(error) == "Training failed due to worker errors:\n[Rank 0] bad"
    assert error.worker_failures is failures


def test_controller_error_keeps_the_cause_and_its_traceback():
    try:
        raise OSError("disk")
    except OSError as exc:
        cause = exc
    error = ControllerError(cause)
    assert str(error) == "Training failed due to controller error:\ndisk"
    assert error.controller_failure is cause
    assert error.__traceback__ is cause.__traceback__


def test_preemption_error():
    error = PreemptionError(_PREEMPTION, drain_timed_out=True)
    assert "preempted_ranks=[1, 3]" in str(error) and "drain_timed_out=True" in str(error)


@pytest.mark.parametrize("error", [
    TrainingFailedError("plain"),
    WorkerGroupError("msg", {1: ValueError("x")}),
    NCCLHangError("hang", {0: TimeoutError("t")}),
    ControllerError(RuntimeError("c")),
    PreemptionError(types.SimpleNamespace(preempted_ranks=[0]), True),
], ids=lambda e: type(e).__name__)
def test_pickle_round_trip(error):
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is type(error) and str(copy) == str(error) and copy.args == error.args
    if isinstance(error, WorkerGroupError):
        assert {r: repr(e) for r, e in copy.worker_failures.items()} == {
            r: repr(e) for r, e in error.worker_failures.items()}
    if isinstance(error, ControllerError):
        assert repr(copy.controller_failure) == repr(error.controller_failure)
    if isinstance(error, PreemptionError):
        assert copy.preemption_info == error.preemption_info
        assert copy.drain_timed_out is error.drain_timed_out
