"""JaxTrainer and JaxConfig of `ray.train.v2.jax` (clauses `jax.*`).

The training function is `conformance.jax_probe.jax_probe` (see there). Four fits:

- "main": JaxConfig(use_tpu=True), 2 workers, worker env JAX_PLATFORMS=cpu: one JAX job
  over both workers; collectives, STEPS data-parallel steps, then every rank calls
  jax.distributed.shutdown() itself;
- "restart": JaxConfig(use_gpu=True), the same env, FailureConfig(max_failures=1), and
  JAX_DISTRIBUTED_SHUTDOWN_TIMEOUT_S=soon in the driver (not a number: the default); rank 1
  exits after the checkpointed report of step 1 on attempt 0;
- "plain": JaxConfig(), 2 workers, no env: independent single-process JAX per worker;
- "local": JaxConfig(use_gpu=True), num_workers=0.

The checks that fit need jax (skipped without it); the others do not.
"""

from __future__ import annotations

import dataclasses
import inspect
import os
import subprocess
import sys

import pytest

from conformance import assertions, jax_probe
from conformance.catalogue import clause
from conformance.scenarios import shared

WORKERS = 2
ENV = {"JAX_PLATFORMS": "cpu"}
#: the TPU slices run's worker env: a port of the user's (kept) and a slice id (replaced)
USER_MEGASCALE = {"MEGASCALE_PORT": "9999", "MEGASCALE_SLICE_ID": "7"}
#: the restart run's driver: a shutdown timeout that is not a number (the default is used)
SHUTDOWN_ENV = {"JAX_DISTRIBUTED_SHUTDOWN_TIMEOUT_S": "soon"}
NAMES = ["JaxConfig", "JaxTrainer"]
#: per-parameter tolerance between the float32 JAX parameters and the float64 oracle
TOL = 1e-4


def _jax(impl):
    return impl.framework("v2.jax")


def _noop(config=None):
    return None


# ------------------------------------------------------------------------ fits
def _run(impl, key: str, mode: str, workers: int, config: dict, env: dict | None,
         failure: bool = False, driver_env: dict | None = None):
    """The shared fit `key` of the probe in `mode`, with JaxConfig(**config)."""
    label = "JaxConfig(" + ", ".join(f"{k}={v!r}" for k, v in config.items()) + ")"

    def build(impl):
        pytest.importorskip("jax")
        tj, t = _jax(impl), impl.train
        outcome, journal = jax_probe.run_fit(
            impl, mode, workers, jax_config=tj.JaxConfig(**config), env=env,
            failure_config=t.FailureConfig(max_failures=1) if failure else None,
            driver_env=driver_env)
        setting = (f"{impl.name}: JaxTrainer(jax_config={label}, num_workers={workers}"
                   + (f", worker env {env}" if env else "")
                   + (f", driver env {driver_env}" if driver_env else "")
                   + (", FailureConfig(max_failures=1); rank "
                      f"{jax_probe.KILL['rank']} calls os._exit(1) after the checkpointed "
                      f"report of step {jax_probe.KILL['step']} on attempt 0" if failure else "")
                   + f") running conformance.jax_probe.jax_probe (mode {mode!r})")
        return outcome, journal, setting

    outcome, journal, setting = shared(impl, key, build)
    result = assertions.succeeded(outcome, setting)
    return result, journal, setting


def _main_run(impl):
    return _run(impl, "jax-main", "main", WORKERS, {"use_tpu": True}, ENV)


def _restart_run(impl):
    return _run(impl, "jax-restart", "restart", WORKERS, {"use_gpu": True}, ENV, failure=True,
                driver_env=SHUTDOWN_ENV)


def _plain_run(impl):
    return _run(impl, "jax-plain", "plain", WORKERS, {}, None)


def _local_run(impl):
    return _run(impl, "jax-local", "local", 0, {"use_gpu": True}, None)


def _by_rank(journal, ev: str, attempt: int = 0) -> dict:
    return {e["rank"]: e for e in journal.events(ev) if e["attempt"] == attempt}


def _close(seen: list, want: list, what: str, setting: str) -> None:
    __tracebackhide__ = True
    ok = len(seen) == len(want) and all(
        len(a) == len(b) and all(abs(x - y) <= TOL for x, y in zip(a, b, strict=True))
        for a, b in zip(seen, want, strict=True))
    if not ok:
        raise AssertionError(f"{what}={seen!r}, expected {want!r} (within {TOL}) [{setting}]")


def _params(journal, rank: int, attempt: int = 0) -> list:
    return [e["params"] for e in sorted(journal.events("jax_step"), key=lambda e: e["step"])
            if e["rank"] == rank and e["attempt"] == attempt]


def _distributed_start(starts: dict, world: int, what: str, setting: str) -> None:
    """The jax_start events of one attempt of a distributed group."""
    __tracebackhide__ = True
    assertions.equal(sorted(starts), list(range(world)), f"{what}: ranks that started", setting)
    for rank, e in sorted(starts.items()):
        assertions.equal(
            (e["initialized"], e["process_count"], e["process_index"], e["device_count"],
             e["local_device_count"], e["platform"]),
            (True, world, rank, world, 1, "cpu"),
            f"{what}, rank {rank}: (jax.distributed.is_initialized(), process_count(), "
            "process_index(), device_count(), local_device_count(), platform)", setting)
    coordinators = {e["coordinator"] for e in starts.values()}
    assertions.equal(len(coordinators) == 1 and None not in coordinators, True,
                     f"{what}: every rank names one coordinator (seen {sorted(map(str, coordinators))})",
                     setting)


def _collectives_ok(journal, world: int, attempt: int, what: str, setting: str) -> None:
    __tracebackhide__ = True
    seen = _by_rank(journal, "jax_collective", attempt)
    assertions.equal(sorted(seen), list(range(world)), f"{what}: ranks that ran the "
                     "collectives", setting)
    total = sum((r + 1) + 10.0 * (r + 1) for r in range(world))
    psum = [float(sum(r + 1 for r in range(world))), float(sum(10 * (r + 1) for r in range(world)))]
    for rank, e in sorted(seen.items()):
        assertions.equal(
            (e["allgather"], e["global_shape"], e["jit_sum"], e["psum"]),
            ([float(r + 1) for r in range(world)], [2 * world], total, psum),
            f"{what}, rank {rank}: (process_allgather([rank + 1]), shape of "
            "make_array_from_process_local_data([rank + 1, 10 * (rank + 1)]), jitted "
            "jnp.sum of it, jitted shard_map psum of it)", setting)


# ------------------------------------------------------------------------ no fit
@clause("jax.names")
def check_import_path(impl):
    tj = _jax(impl)
    assertions.equal(sorted(tj.__all__), NAMES, f"{tj.__name__}.__all__", impl.name)
    for name in NAMES:
        assertions.equal(hasattr(tj, name), True, f"{tj.__name__}.{name} exists", impl.name)
    try:
        module = impl.framework("jax")
    except ModuleNotFoundError:
        pass
    else:
        raise AssertionError(f"{module.__name__} imported, expected ModuleNotFoundError (JAX "
                             f"lives only under {tj.__name__}) [{impl.name}]")


@clause("jax.lazy-import")
def check_import_does_not_import_jax(impl):
    name = _jax(impl).__name__
    code = (f"import sys\nimport {name} as m\nm.JaxConfig(use_gpu=True)\n"
            "print('jax' in sys.modules)\n")
    root = os.path.dirname(os.path.dirname(os.path.abspath(jax_probe.__file__)))
    path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
    env = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONPATH=path)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, env=env, cwd=root)
    assertions.equal(done.returncode, 0, f"python -c 'import {name}' exit status "
                     f"(stderr: {done.stderr[-2000:]!r})", impl.name)
    assertions.equal(done.stdout.strip().splitlines()[-1:], ["False"],
                     f"'jax' in sys.modules after importing {name} and building a JaxConfig",
                     impl.name)


@clause("jax.config")
def check_config(impl):
    tj = _jax(impl)
    backend = impl.framework("backend")
    cls = tj.JaxConfig
    assertions.equal(dataclasses.is_dataclass(cls), True, "JaxConfig is a dataclass", impl.name)
    assertions.equal([(f.name, f.default) for f in dataclasses.fields(cls)],
                     [("use_tpu", False), ("use_gpu", False)],
                     "JaxConfig fields (name, default) in order", impl.name)
    config = cls()
    assertions.equal(isinstance(config, backend.BackendConfig), True,
                     f"JaxConfig() is a {backend.__name__}.BackendConfig", impl.name)
    assertions.equal(config.to_dict(), {"use_tpu": False, "use_gpu": False},
                     "JaxConfig().to_dict()", impl.name)
    assertions.equal(cls(use_gpu=True).to_dict(), {"use_tpu": False, "use_gpu": True},
                     "JaxConfig(use_gpu=True).to_dict()", impl.name)
    assertions.equal(cls(True).to_dict(), {"use_tpu": True, "use_gpu": False},
                     "JaxConfig(True).to_dict() (use_tpu is the first field)", impl.name)
    both = cls(use_tpu=True, use_gpu=True)
    assertions.equal((both.use_tpu, both.use_gpu), (True, True),
                     "JaxConfig(use_tpu=True, use_gpu=True) (accepted, not validated)",
                     impl.name)
    assertions.equal(isinstance(config.backend_cls, type)
                     and issubclass(config.backend_cls, backend.Backend), True,
                     "JaxConfig().backend_cls is a Backend subclass", impl.name)


@clause("jax.trainer")
def check_trainer(impl):
    tj = _jax(impl)
    t = impl.train
    cls = tj.JaxTrainer
    assertions.equal(issubclass(cls, impl.DataParallelTrainer), True,
                     "JaxTrainer subclasses DataParallelTrainer", impl.name)
    params = inspect.signature(cls.__init__).parameters
    seen = [(k, p.kind.name, p.default) for k, p in params.items()][1:]
    keyword = ["train_loop_config", "jax_config", "scaling_config", "dataset_config",
               "run_config", "datasets", "validation_config"]
    assertions.equal(seen, [("train_loop_per_worker", "POSITIONAL_OR_KEYWORD",
                             inspect.Parameter.empty)]
                     + [(k, "KEYWORD_ONLY", None) for k in keyword],
                     "JaxTrainer.__init__ parameters (name, kind, default)", impl.name)
    scaling = t.ScalingConfig(num_workers=2)
    for name, value in (("metadata", {"a": 1}),
                        ("resume_from_checkpoint",
                         t.Checkpoint.from_directory(os.path.dirname(__file__)))):
        try:
            cls(_noop, scaling_config=scaling, **{name: value})
        except TypeError:
            pass
        else:
            raise AssertionError(f"JaxTrainer(fn, {name}=...) returned, expected TypeError "
                                 f"(no such parameter) [{impl.name}]")
    try:
        cls(_noop)
    except AttributeError:
        pass
    except Exception as exc:  # noqa: BLE001 - the wrong outcome, reported
        raise AssertionError(f"JaxTrainer(fn) raised {type(exc).__name__}({exc}), expected "
                             f"AttributeError (no scaling_config to derive the default "
                             f"JaxConfig from) [{impl.name}]") from exc
    else:
        raise AssertionError(f"JaxTrainer(fn) returned, expected AttributeError (no "
                             f"scaling_config to derive the default JaxConfig from) "
                             f"[{impl.name}]")
    cls(_noop, scaling_config=scaling)
    cls(_noop, jax_config=tj.JaxConfig(use_gpu=True), scaling_config=scaling)
    cls(_noop, jax_config=tj.JaxConfig(use_tpu=True), scaling_config=scaling)


# ------------------------------------------------------------------------ main fit
@clause("jax.distributed-cpu")
def check_distributed_on_cpu(impl):
    result, journal, setting = _main_run(impl)
    starts = _by_rank(journal, "jax_start")
    _distributed_start(starts, WORKERS, "attempt 0", setting)
    for rank, e in sorted(starts.items()):
        env = e["env"]
        assertions.equal(env["JAX_PLATFORMS"], "cpu", f"rank {rank}: JAX_PLATFORMS", setting)
        assertions.equal(env["CUDA_VISIBLE_DEVICES"], None,
                         f"rank {rank}: CUDA_VISIBLE_DEVICES (not set: cuda is not among "
                         "the platforms)", setting)
        megascale = {k: v for k, v in env.items() if k.startswith("MEGASCALE_") and v}
        assertions.equal(megascale, {}, f"rank {rank}: MEGASCALE_* variables (one slice)",
                         setting)


@clause("jax.collectives")
def check_collectives(impl):
    result, journal, setting = _main_run(impl)
    _collectives_ok(journal, WORKERS, 0, "attempt 0", setting)
    want = jax_probe.oracle(range(WORKERS))
    for rank in range(WORKERS):
        _close(_params(journal, rank), want,
               f"rank {rank}: parameters after each step (gradients averaged with "
               "process_allgather: full-batch gradient descent on every shard)", setting)


@clause("jax.train-loop")
def check_reports_and_checkpoint(impl):
    import numpy as np

    result, journal, setting = _main_run(impl)
    steps = _by_rank(journal, "jax_step")
    last = [e for e in journal.events("jax_step") if e["rank"] == 0]
    last = max(last, key=lambda e: e["step"])
    assertions.equal(result.metrics, {"step": jax_probe.STEPS - 1, "loss": last["loss"]},
                     "result.metrics (rank 0's last report)", setting)
    assertions.equal(sorted(steps), list(range(WORKERS)), "ranks that trained", setting)
    assertions.equal(result.checkpoint is not None, True, "result.checkpoint is not None",
                     setting)
    with result.checkpoint.as_directory() as d:
        assertions.equal(sorted(os.listdir(d)), ["params.npy", "step.npy"],
                         "result.checkpoint files", setting)
        params = np.load(os.path.join(d, "params.npy")).tolist()
        step = int(np.load(os.path.join(d, "step.npy")))
    assertions.equal(step, jax_probe.STEPS - 1, "step.npy of result.checkpoint", setting)
    for rank in range(WORKERS):
        _close([params], [_params(journal, rank)[-1]],
               f"params.npy of result.checkpoint (rank {rank}'s final parameters)", setting)


@clause("jax.user-shutdown")
def check_user_shutdown(impl):
    result, journal, setting = _main_run(impl)
    seen = _by_rank(journal, "jax_user_shutdown")
    assertions.equal({r: e["initialized"] for r, e in seen.items()},
                     dict.fromkeys(range(WORKERS), False),
                     "rank -> jax.distributed.is_initialized() after the function's own "
                     "jax.distributed.shutdown()", setting)
    assertions.equal(sorted(_by_rank(journal, "jax_end")), list(range(WORKERS)),
                     "ranks whose function returned", setting)


# ------------------------------------------------------------------------ restart fit
@clause("jax.restart")
def check_restart(impl):
    result, journal, setting = _restart_run(impl)
    kill = jax_probe.KILL
    first, second = _by_rank(journal, "jax_start", 0), _by_rank(journal, "jax_start", 1)
    _distributed_start(first, WORKERS, "attempt 0", setting)
    (killed,) = journal.events("jax_kill")
    assertions.equal((killed["rank"], killed["step"]), (kill["rank"], kill["step"]),
                     "(rank, step) of the os._exit(1)", setting)
    attempts = sorted({e["attempt"] for e in journal.events("jax_start")})
    assertions.equal(attempts, [0, 1], "attempts that started", setting)
    _distributed_start(second, WORKERS, "attempt 1", setting)
    pids = {e["pid"] for e in first.values()} & {e["pid"] for e in second.values()}
    assertions.equal(pids, set(), "worker pids shared by attempts 0 and 1 (new processes)",
                     setting)
    _collectives_ok(journal, WORKERS, 1, "attempt 1", setting)
    restored = _by_rank(journal, "jax_restored", 1)
    saved = [e for e in journal.events("jax_step")
             if (e["rank"], e["attempt"], e["step"]) == (0, 0, kill["step"])]
    assertions.equal(len(saved), 1, f"rank 0's step {kill['step']} on attempt 0", setting)
    assertions.equal(sorted(restored), list(range(WORKERS)),
                     "ranks of attempt 1 that got a checkpoint from get_checkpoint()", setting)
    for rank, e in sorted(restored.items()):
        assertions.equal((e["step"], e["files"]), (kill["step"], ["params.npy", "step.npy"]),
                         f"rank {rank}: (step.npy, files) of get_checkpoint() on attempt 1",
                         setting)
        _close([e["params"]], [saved[0]["params"]],
               f"rank {rank}: params.npy of get_checkpoint() on attempt 1 (rank 0's "
               f"parameters after step {kill['step']})", setting)
    want = jax_probe.oracle(range(WORKERS))
    for rank in range(WORKERS):
        steps = sorted(e["step"] for e in journal.events("jax_step")
                       if (e["rank"], e["attempt"]) == (rank, 1))
        assertions.equal(steps, list(range(kill["step"] + 1, jax_probe.STEPS)),
                         f"rank {rank}: steps trained on attempt 1", setting)
        _close(_params(journal, rank, 1), want[kill["step"] + 1:],
               f"rank {rank}: parameters after each step of attempt 1 (those of an "
               "uninterrupted run)", setting)
    assertions.equal(result.metrics["step"], jax_probe.STEPS - 1, "result.metrics['step']",
                     setting)


@clause("jax.backend-shutdown")
def check_backend_shuts_jax_down(impl):
    result, journal, setting = _restart_run(impl)
    calls = [e for e in journal.events("jax_shutdown_seen") if e["attempt"] == 1]
    what = ("jax.distributed.shutdown() calls in the workers of attempt 1 after their "
            "function returned without shutting jax.distributed down")
    assertions.equal(sorted({e["rank"] for e in calls}), list(range(WORKERS)),
                     f"ranks with {what}", setting)
    assertions.equal(sorted({e["initialized"] for e in calls}), [False],
                     f"jax.distributed.is_initialized() after each of the {what}", setting)


# ------------------------------------------------------------------------ plain and local
@clause("jax.plain")
def check_plain_config(impl):
    result, journal, setting = _plain_run(impl)
    starts = _by_rank(journal, "jax_start")
    assertions.equal(sorted(starts), list(range(WORKERS)), "ranks that started", setting)
    for rank, e in sorted(starts.items()):
        assertions.equal((e["world"], e["initialized"], e["process_count"], e["process_index"],
                          e["device_count"]), (WORKERS, False, 1, 0, 1),
                         f"rank {rank}: (world size, jax.distributed.is_initialized(), "
                         "process_count(), process_index(), device_count())", setting)
        _close(_params(journal, rank), jax_probe.oracle([rank]),
               f"rank {rank}: parameters after each step (its own shard alone)", setting)
    assertions.equal(journal.events("jax_collective"), [], "collective runs (none: one "
                     "process per job)", setting)
    last = max((e for e in journal.events("jax_step") if e["rank"] == 0),
               key=lambda e: e["step"])
    assertions.equal(result.metrics, {"step": jax_probe.STEPS - 1, "loss": last["loss"]},
                     "result.metrics (rank 0's last report)", setting)


@clause("jax.local")
def check_local_mode(impl):
    result, journal, setting = _local_run(impl)
    (fit,) = journal.events("fit")
    (start,) = journal.events("jax_start")
    assertions.equal(start["pid"], fit["pid"],
                     "pid of the training function (the process that called fit())", setting)
    assertions.equal((start["rank"], start["world"], start["initialized"],
                      start["process_count"]), (0, 1, False, 1),
                     "(world rank, world size, jax.distributed.is_initialized(), "
                     "process_count())", setting)
    steps = journal.events("jax_step")
    assertions.equal([e["step"] for e in steps], list(range(jax_probe.STEPS)), "steps trained",
                     setting)
    _close([e["params"] for e in steps], jax_probe.oracle([0]),
           "parameters after each step", setting)
    assertions.equal(result.metrics, {"step": jax_probe.STEPS - 1, "loss": steps[-1]["loss"]},
                     "result.metrics (the last report)", setting)


def _slices_run(impl, topology: str, hosts: int, env: dict | None = None):
    """A JaxTrainer running `jax_probe.tpu_probe` on two TPU-V4 slices 'a' and 'b' of
    `topology` (`hosts` hosts of 4 chips each), one worker per host; returns (the
    tpu_start events by rank, setting)."""
    from conformance.adapters.base import require
    from conformance.scenarios import TrainerFactory, workspace

    pytest.importorskip("jax")
    require(impl, "tpu_slices")
    t, tj = impl.train, impl.framework("v2.jax")
    folder = workspace()
    journal = os.path.join(folder, "journal")
    os.makedirs(journal)
    workers = 2 * hosts
    setting = (f"{impl.name}: two TPU-V4 {topology} slices 'a' and 'b' ({hosts} host(s) of 4 "
               f"chips each), JaxTrainer(ScalingConfig(num_workers={workers}, use_tpu=True, "
               f"topology={topology!r}, accelerator_type='TPU-V4'))"
               + (f", workers' env {env}" if env else ""))
    run_config = dict(name="jax-tpu", storage_path=os.path.join(folder, "s"))
    if env:
        run_config["worker_runtime_env"] = {"env_vars": dict(env)}
    with impl.tpu_slices([("a", "TPU-V4", topology), ("b", "TPU-V4", topology)]):
        outcome = impl.fit(TrainerFactory(tj.JaxTrainer, dict(
            train_loop_per_worker=jax_probe.tpu_probe,
            train_loop_config={"train_module": t.__name__, "journal": journal},
            scaling_config=t.ScalingConfig(num_workers=workers, use_tpu=True,
                                           topology=topology, accelerator_type="TPU-V4"),
            run_config=t.RunConfig(**run_config))),
            max(impl.fit_deadline_s, 180.0))
    assertions.succeeded(outcome, setting)
    starts = sorted(jax_probe.Journal(journal).events("tpu_start"), key=lambda e: e["rank"])
    assertions.equal([e["rank"] for e in starts], list(range(workers)), "ranks that started",
                     setting)
    return starts, setting


@pytest.mark.cluster
@clause("jax.tpu-slices")
def check_tpu_slices(impl):
    starts, setting = _slices_run(impl, "2x2x2", 2, USER_MEGASCALE)
    env = [e["env"] for e in starts]
    names = [e["TPU_NAME"] for e in env]
    assertions.equal(sorted(names), ["a", "a", "b", "b"], "TPU_NAME of ranks 0..3 (whole slices)",
                     setting)
    assertions.equal(names[0] == names[1] and names[2] == names[3], True,
                     f"ranks 0-1 and 2-3 each on one slice (TPU_NAME {names})", setting)
    assertions.equal([e["TPU_WORKER_ID"] for e in env], ["0", "1", "0", "1"],
                     "TPU_WORKER_ID of ranks 0..3 (ranks follow the hosts of a slice)", setting)
    assertions.equal([e["MEGASCALE_SLICE_ID"] for e in env], ["0", "0", "1", "1"],
                     "MEGASCALE_SLICE_ID of ranks 0..3", setting)
    assertions.equal({(e["MEGASCALE_NUM_SLICES"], e["MEGASCALE_PORT"]) for e in env},
                     {("2", "9999")}, "(MEGASCALE_NUM_SLICES, MEGASCALE_PORT) (the port the "
                     "workers' env set is kept)", setting)
    assertions.equal({e["MEGASCALE_COORDINATOR_ADDRESS"] for e in env}, {starts[0]["node_ip"]},
                     "MEGASCALE_COORDINATOR_ADDRESS values (rank 0's node address)", setting)
    assertions.equal([e["TPU_VISIBLE_CHIPS"] for e in env], [None] * 4,
                     "TPU_VISIBLE_CHIPS (each worker holds its host's every chip)", setting)
    assertions.equal([(e["process_count"], e["process_index"]) for e in starts],
                     [(4, r) for r in range(4)], "(jax.process_count(), process_index())",
                     setting)


@pytest.mark.cluster
@clause("jax.tpu-slices")
def check_single_host_slices(impl):
    starts, setting = _slices_run(impl, "2x2x1", 1)
    env = [e["env"] for e in starts]
    assertions.equal(sorted(e["TPU_NAME"] for e in env), ["a", "b"],
                     "TPU_NAME of ranks 0 and 1 (one slice each)", setting)
    assertions.equal([(e["MEGASCALE_SLICE_ID"], e["MEGASCALE_NUM_SLICES"], e["MEGASCALE_PORT"])
                      for e in env], [("0", "2", "8081"), ("1", "2", "8081")],
                     "(MEGASCALE_SLICE_ID, MEGASCALE_NUM_SLICES, MEGASCALE_PORT) of ranks 0, 1",
                     setting)
