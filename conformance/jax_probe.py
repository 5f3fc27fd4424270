"""Training function of the JAX checks (clauses `jax.*`).

`jax_probe` imports jax inside the worker (after the implementation's backend has set it
up) and journals what jax sees there: process_count, process_index, device_count,
local_device_count, the platform, whether jax.distributed is initialised and with which
coordinator, and the environment variables the backend may set. When the job spans several
processes it then runs three cross-process computations and journals their values:

- `multihost_utils.process_allgather([rank + 1])`;
- `jax.make_array_from_process_local_data` of `[rank + 1, 10 * (rank + 1)]` on a 1-D mesh
  of every device, then a jitted `jnp.sum` of that global array;
- a jitted `shard_map` of `jax.lax.psum` over the mesh axis.

Then it trains: STEPS steps of gradient descent on a tiny linear regression, each rank
computing the gradient on its own shard (`shard(rank)`); in a multi-process job the
gradients are averaged across processes with `process_allgather`, so every rank holds the
same parameters and they are those of full-batch gradient descent on all shards (`oracle`).
Every step is one report() with {"step", "loss"}; rank 0 attaches a checkpoint holding
`params.npy` and `step.npy` (plain `np.save`). A restarted attempt reads them back from
get_checkpoint() and trains on from the next step.

`config["mode"]`:
- "main": at the end every rank calls `jax.distributed.shutdown()` itself and journals
  `is_initialized()` afterwards;
- "restart": on attempt 0, rank KILL["rank"] calls os._exit(1) right after the report of
  step KILL["step"] (once that report is registered); on later attempts each rank, as its
  function returns, hooks `jax.distributed.shutdown()` so that every later call in the
  process (the implementation's own shutdown of the group) is journaled from inside the
  call, with `is_initialized()` after it;
- "plain", "local": just the above, nothing at the end.
"""

from __future__ import annotations

import importlib
import os
import tempfile
import threading
import time

from conformance.probe import Journal, exit_after_registered

STEPS = 4
LR = 0.1
ROWS_PER_RANK = 6
FEATURES = 3
#: in "restart" mode: this rank exits on attempt 0 right after this step's report
KILL = {"rank": 1, "step": 1}
ENV = ("JAX_PLATFORMS", "CUDA_VISIBLE_DEVICES", "JAX_COORDINATOR_ADDRESS",
       "JAX_CPU_COLLECTIVES_IMPLEMENTATION", "MEGASCALE_COORDINATOR_ADDRESS",
       "MEGASCALE_NUM_SLICES", "MEGASCALE_SLICE_ID", "MEGASCALE_PORT")


def shard(rank: int):
    """(x, y) of one rank: ROWS_PER_RANK rows, deterministic, different per rank."""
    import numpy as np

    rng = np.random.default_rng(100 + rank)
    x = rng.normal(size=(ROWS_PER_RANK, FEATURES))
    y = x @ np.array([1.0, -2.0, 0.5]) + 0.25 * rank
    return x, y


def oracle(ranks, steps: int = STEPS) -> list:
    """The parameters after each step of full-batch gradient descent on the shards of
    `ranks` (float64 NumPy): what a data-parallel run over those ranks must reach."""
    import numpy as np

    w = np.zeros(FEATURES)
    out = []
    for _ in range(steps):
        grads = []
        for r in ranks:
            x, y = shard(r)
            grads.append(2.0 * x.T @ (x @ w - y) / len(y))
        w = w - LR * np.mean(grads, axis=0)
        out.append([float(v) for v in w])
    return out


def _view(jax) -> dict:
    from jax._src import distributed

    devices = jax.devices()
    return {
        "process_count": jax.process_count(), "process_index": jax.process_index(),
        "device_count": jax.device_count(), "local_device_count": jax.local_device_count(),
        "platform": devices[0].platform,
        "initialized": jax.distributed.is_initialized(),
        "coordinator": distributed.global_state.coordinator_address,
        "collectives": jax.config.jax_cpu_collectives_implementation,
        "env": {k: os.environ.get(k) for k in ENV},
    }


def _collectives(jax, rank: int) -> dict:
    import jax.numpy as jnp
    import numpy as np
    from jax.experimental import multihost_utils
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    gathered = multihost_utils.process_allgather(jnp.array([rank + 1.0]))
    mesh = Mesh(np.array(jax.devices()), ("x",))
    local = np.array([rank + 1.0, 10.0 * (rank + 1)], dtype=np.float32)
    arr = jax.make_array_from_process_local_data(NamedSharding(mesh, P("x")), local)
    total = jax.jit(jnp.sum, out_shardings=NamedSharding(mesh, P()))(arr)
    psum = jax.jit(jax.shard_map(lambda v: jax.lax.psum(v, "x"), mesh=mesh,
                                 in_specs=P("x"), out_specs=P()))(arr)
    return {"allgather": np.asarray(gathered).reshape(-1).tolist(),
            "global_shape": list(arr.shape),
            "jit_sum": float(np.asarray(total.addressable_data(0))),
            "psum": np.asarray(psum.addressable_data(0)).tolist()}


def _hook_shutdown(jax, journal: Journal, rank: int, attempt: int) -> None:
    """Journal every later jax.distributed.shutdown() in this process, from inside the
    call (so before the implementation can end the process): `jax.distributed.shutdown`
    calls `global_state.shutdown()`, which an attribute of the instance overrides."""
    from jax._src import distributed

    state = distributed.global_state
    original = state.shutdown
    returned = time.monotonic()

    def shutdown():
        try:
            original()
        finally:
            journal.record(ev="jax_shutdown_seen", rank=rank, attempt=attempt,
                           after_s=time.monotonic() - returned,
                           initialized=jax.distributed.is_initialized(),
                           thread=threading.current_thread().name)

    state.shutdown = shutdown


def jax_probe(config: dict) -> None:
    import numpy as np

    train = importlib.import_module(config["train_module"])
    journal = Journal(config["journal"])
    mode = config["mode"]
    ctx = train.get_context()
    rank, world = ctx.get_world_rank(), ctx.get_world_size()
    attempt = journal.next_attempt(rank)
    import jax
    import jax.numpy as jnp

    view = _view(jax)
    journal.record(ev="jax_start", rank=rank, world=world, attempt=attempt, pid=os.getpid(),
                   mode=mode, **view)
    multi = view["process_count"] > 1
    if multi:
        journal.record(ev="jax_collective", rank=rank, attempt=attempt,
                       **_collectives(jax, rank))

    w, first = np.zeros(FEATURES), 0
    restored = train.get_checkpoint()
    if restored is not None:
        with restored.as_directory() as d:
            w = np.load(os.path.join(d, "params.npy"))
            first = int(np.load(os.path.join(d, "step.npy"))) + 1
        journal.record(ev="jax_restored", rank=rank, attempt=attempt, step=first - 1,
                       params=[float(v) for v in w], files=sorted(os.listdir(d))
                       if os.path.isdir(d) else None)

    x, y = shard(rank)

    def loss(w):
        return jnp.mean((jnp.asarray(x) @ w - jnp.asarray(y)) ** 2)

    grad = jax.jit(jax.value_and_grad(loss))
    from jax.experimental import multihost_utils

    for step in range(first, STEPS):
        # float64 on the host: jax computes in float32 unless x64 is on
        value, g = grad(jnp.asarray(w, dtype=jnp.float32))
        g = np.asarray(g, dtype=np.float64)
        value = float(value)
        if multi:
            g = np.asarray(multihost_utils.process_allgather(jnp.asarray(g)),
                           dtype=np.float64).mean(axis=0)
            value = float(np.mean(multihost_utils.process_allgather(jnp.array([value]))))
        w = w - LR * g
        metrics = {"step": step, "loss": value}
        journal.record(ev="jax_step", rank=rank, attempt=attempt, step=step, loss=value,
                       params=[float(v) for v in w])
        if rank == 0:
            with tempfile.TemporaryDirectory() as d:
                np.save(os.path.join(d, "params.npy"), w)
                np.save(os.path.join(d, "step.npy"), np.array(step))
                train.report(metrics, checkpoint=train.Checkpoint.from_directory(d))
        else:
            train.report(metrics)
        if mode == "restart" and attempt == 0 and (rank, step) == (KILL["rank"], KILL["step"]):
            exit_after_registered(train, journal, "jax_kill", rank, attempt, step, step=step)

    if mode == "main":
        jax.distributed.shutdown()
        journal.record(ev="jax_user_shutdown", rank=rank, attempt=attempt,
                       initialized=jax.distributed.is_initialized())
    elif mode == "restart" and attempt > 0:
        _hook_shutdown(jax, journal, rank, attempt)
    journal.record(ev="jax_end", rank=rank, attempt=attempt)


# ------------------------------------------------------------------------ driver side
def run_fit(impl, mode: str, num_workers: int, jax_config=None, env: dict | None = None,
            failure_config=None, deadline_s: float = 180.0, driver_env: dict | None = None):
    """fit() of the implementation's JaxTrainer running `jax_probe` (`env`: the workers'
    variables; `driver_env`: the driver's while fit() runs); returns (outcome, journal)."""
    from conformance.scenarios import TrainerFactory, WithDriverEnviron, workspace

    t = impl.train
    tj = impl.framework("v2.jax")
    folder = workspace()
    journal = os.path.join(folder, "journal")
    os.makedirs(journal)
    run_config = dict(name=f"jax-{mode}", storage_path=os.path.join(folder, "s"))
    if env:
        run_config["worker_runtime_env"] = {"env_vars": dict(env)}
    if failure_config is not None:
        run_config["failure_config"] = failure_config
    kwargs = dict(train_loop_per_worker=jax_probe,
                  train_loop_config={"train_module": t.__name__, "journal": journal,
                                     "mode": mode},
                  scaling_config=t.ScalingConfig(num_workers=num_workers),
                  run_config=t.RunConfig(**run_config))
    if jax_config is not None:
        kwargs["jax_config"] = jax_config
    factory = TrainerFactory(tj.JaxTrainer, kwargs, journal_dir=journal)
    if driver_env:
        factory = WithDriverEnviron(factory, driver_env)
    outcome = impl.fit(factory, max(impl.fit_deadline_s, deadline_s))
    return outcome, Journal(journal)


#: what a TPU host's process sees, journaled by `tpu_probe`
TPU_ENV = ("TPU_NAME", "TPU_WORKER_ID", "TPU_ACCELERATOR_TYPE", "TPU_TOPOLOGY",
           "TPU_WORKER_HOSTNAMES", "TPU_VISIBLE_CHIPS", "MEGASCALE_COORDINATOR_ADDRESS",
           "MEGASCALE_NUM_SLICES", "MEGASCALE_SLICE_ID", "MEGASCALE_PORT")


def tpu_probe(config: dict) -> None:
    """On a TPU slice job: the host's TPU environment and jax's view, journaled."""
    train = importlib.import_module(config["train_module"])
    journal = Journal(config["journal"])
    rank = train.get_context().get_world_rank()
    import jax

    util = importlib.import_module(config["train_module"].split(".")[0] + ".util")
    journal.record(ev="tpu_start", rank=rank, process_count=jax.process_count(),
                   node_ip=util.get_node_ip_address(),
                   process_index=jax.process_index(),
                   env={k: os.environ.get(k) for k in TPU_ENV})
