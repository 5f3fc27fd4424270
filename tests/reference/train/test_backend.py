"""The backend developer API on real worker groups: hook order, execute*, futures, and what
an error in a hook does to the run."""

from __future__ import annotations

import dataclasses
import logging
import os
import time

import pytest

import reference
import reference.train as t
from reference.exceptions import GetTimeoutError, RayActorError, RayTaskError
from reference.train.backend import Backend, BackendConfig

pytestmark = pytest.mark.slow


# ------------------------------------------------------------------ run on the workers
def pid() -> int:
    return os.getpid()


def rank_plus(offset: int, *, times: int = 1) -> int:
    return (t.get_context().get_world_rank() + offset) * times


def raise_on(rank: int) -> None:
    if t.get_context().get_world_rank() == rank:
        raise KeyError(f"rank {rank} refuses")


def die_on(rank: int) -> None:
    if t.get_context().get_world_rank() == rank:
        os._exit(3)


def sleep_s(seconds: float) -> None:
    time.sleep(seconds)


# ------------------------------------------------------------------ backends
@dataclasses.dataclass
class Config(BackendConfig):
    """`plan` says what each hook does; `seen` collects what the hooks saw (in the driver)."""

    plan: str = ""

    @property
    def backend_cls(self):
        return Recording


SEEN: list = []


class Recording(Backend):
    def on_start(self, worker_group, config):
        SEEN.append(("on_start", len(worker_group)))
        if config.plan == "reject":
            raise ValueError("this configuration is wrong")
        if config.plan == "worker raises":
            reference.get(worker_group.execute_async(raise_on, 1))
        if config.plan == "worker dies":
            start = time.monotonic()
            try:
                reference.get(worker_group.execute_async(die_on, 1) +
                              [worker_group.execute_single_async(0, sleep_s, 30)])
            finally:
                SEEN.append(("waited", time.monotonic() - start))
        SEEN.append(("values", worker_group.execute(rank_plus, 10, times=2)))
        SEEN.append(("single", worker_group.execute_single(1, rank_plus, 0)))
        SEEN.append(("pids", worker_group.execute(pid),
                     [w.metadata.pid for w in worker_group.get_workers()]))
        with pytest.raises(ValueError, match=r"The provided rank=2 is not valid for 2 workers"):
            worker_group.execute_single_async(2, pid)

    def on_training_start(self, worker_group, config):
        SEEN.append(("on_training_start",))

    def on_shutdown(self, worker_group, config):
        start = time.monotonic()
        outcomes = []
        for future in worker_group.execute_async(rank_plus, 0):
            try:
                outcomes.append(reference.get(future, timeout=10))
            except RayActorError as exc:
                outcomes.append(type(exc).__name__)
        SEEN.append(("on_shutdown", outcomes, time.monotonic() - start))
        if config.plan == "shutdown fails":
            raise RuntimeError("the tracker would not stop")


def _fit(tmp_path, train_fn, plan="", **failure):
    SEEN.clear()
    return t.DataParallelTrainer(
        train_fn, backend_config=Config(plan=plan),
        scaling_config=t.ScalingConfig(num_workers=2),
        run_config=t.RunConfig(storage_path=str(tmp_path), name="backend",
                               failure_config=t.FailureConfig(**failure))).fit()


def _returns():
    return t.get_context().get_world_rank()


def test_hooks_run_in_order_and_reach_every_worker(tmp_path):
    result = _fit(tmp_path, _returns)
    assert result.return_value == 0
    names = [s[0] for s in SEEN]
    assert names == ["on_start", "values", "single", "pids", "on_training_start", "on_shutdown"]
    assert SEEN[0] == ("on_start", 2)
    assert SEEN[1] == ("values", [20, 22]) and SEEN[2] == ("single", 1)
    _, executed, metadata = SEEN[3]
    assert executed == metadata and len(set(executed)) == 2 and os.getpid() not in executed
    assert SEEN[5][1] == [0, 1]  # every rank returned and still answered


def test_a_driver_side_error_fails_at_once_with_that_error(tmp_path):
    with pytest.raises(t.ControllerError) as info:
        _fit(tmp_path, _returns, plan="reject", max_failures=3)
    assert isinstance(info.value.controller_failure, ValueError)
    assert [s[0] for s in SEEN] == ["on_start"]  # no retry, no on_shutdown of a group never run


def test_a_worker_side_error_is_retried_twice_then_a_controller_error(tmp_path):
    with pytest.raises(t.ControllerError) as info:
        _fit(tmp_path, _returns, plan="worker raises")
    cause = info.value.controller_failure
    assert isinstance(cause, KeyError) and "rank 1 refuses" in str(cause)
    assert [s[0] for s in SEEN] == ["on_start"] * 3


def test_a_worker_dying_in_on_start_fails_its_peers_calls_at_once(tmp_path):
    with pytest.raises(t.ControllerError) as info:
        _fit(tmp_path, _returns, plan="worker dies", controller_failure_limit=1)
    assert "a worker died while the backend set the group up" in str(info.value)
    waited = [s[1] for s in SEEN if s[0] == "waited"]
    assert len(waited) == 2 and max(waited) < 10, waited  # not rank 0's 30 s sleep


def _rank1_fails_rank0_waits():
    if t.get_context().get_world_rank() == 1:
        raise RuntimeError("rank 1 fails")
    t.report({"x": 1})


def test_a_failed_group_runs_on_shutdown_on_the_ranks_still_training(tmp_path, caplog):
    with pytest.raises(t.WorkerGroupError):
        _fit(tmp_path, _rank1_fails_rank0_waits)
    (shutdown,) = [s for s in SEEN if s[0] == "on_shutdown"]
    # rank 0 waits in report() for rank 1 and answers (its worker serves calls beside the
    # training function, as a Ray actor does); rank 1 is gone
    assert shutdown[1] == [0, "RayActorError"] and shutdown[2] < 5


def test_an_on_shutdown_error_fails_a_finished_run(tmp_path):
    with pytest.raises(t.ControllerError) as info:
        _fit(tmp_path, _returns, plan="shutdown fails")
    assert str(info.value.controller_failure) == "the tracker would not stop"


def test_the_training_function_runs_inside_train_func_context(tmp_path):
    @dataclasses.dataclass
    class WithContext(BackendConfig):
        @property
        def train_func_context(self):
            return MarkContext

    def train_fn():
        return os.environ.get("IN_MARK_CONTEXT")

    result = t.DataParallelTrainer(
        train_fn, backend_config=WithContext(), scaling_config=t.ScalingConfig(num_workers=2),
        run_config=t.RunConfig(storage_path=str(tmp_path), name="ctx")).fit()
    assert result.return_value == "1"
    local = t.DataParallelTrainer(train_fn, backend_config=WithContext(),
                                  scaling_config=t.ScalingConfig(num_workers=0)).fit()
    assert local.return_value == "1" and "IN_MARK_CONTEXT" not in os.environ


class MarkContext:
    def __enter__(self):
        os.environ["IN_MARK_CONTEXT"] = "1"

    def __exit__(self, *exc):
        os.environ.pop("IN_MARK_CONTEXT", None)
        return False


# ------------------------------------------------------------------ futures, without a cluster
def test_get_waits_for_one_or_many_and_times_out():
    from concurrent.futures import Future

    done, pending = Future(), Future()
    done.set_result(5)
    assert reference.get(done) == 5 and reference.get([done, done]) == [5, 5]
    with pytest.raises(GetTimeoutError) as info:
        reference.get([done, pending], timeout=0.05)
    assert isinstance(info.value, TimeoutError)
    with pytest.raises(TypeError, match="expected a future"):
        reference.get(5)
    with pytest.raises(ValueError, match="timeout=-1"):
        reference.get(done, timeout=-1)


def test_a_workers_error_is_also_an_instance_of_its_class():
    import pickle
    from concurrent.futures import Future

    failed = Future()
    failed.set_exception(RayTaskError(KeyError("k"), 1, "Traceback...\nKeyError: 'k'"))
    with pytest.raises(KeyError) as info:
        reference.get(failed)
    error = info.value
    assert isinstance(error, RayTaskError) and error.rank == 1
    assert "raised on the worker of rank 1" in str(error) and "Traceback" in str(error)
    again = pickle.loads(pickle.dumps(error))
    assert isinstance(again, RayTaskError) and isinstance(again.cause, KeyError)


def test_the_backend_base_is_a_singleton_per_class_and_does_nothing():
    assert Backend() is Backend() and Recording() is Recording()
    assert Backend.share_cuda_visible_devices is False
    config = BackendConfig()
    assert config.backend_cls is Backend and config.to_dict() == {}
    with config.train_func_context():
        pass
    assert Backend().on_start(None, config) is None


def test_on_shutdown_worker_errors_are_logged_as_ray_logs_them(caplog):
    from reference.train._internal.worker_group.simcluster_group import run_backend_shutdown

    class Fails(Backend):
        def on_shutdown(self, worker_group, config):
            raise RayActorError("gone")

    with caplog.at_level(logging.WARNING):
        assert run_backend_shutdown(Fails(), None, None) is None
    assert "Graceful shutdown of backend failed" in caplog.text
